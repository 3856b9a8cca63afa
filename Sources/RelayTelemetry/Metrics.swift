package import RelayCore
import RelayLocks

/// Counters and histograms, rendered in the Prometheus text format (version 0.0.4).
package final class Metrics: Sendable {
    struct Histogram {
        let bounds: [Double]
        var counts: [UInt64]
        var sum = 0.0
        var count: UInt64 = 0

        init(bounds: [Double]) {
            self.bounds = bounds
            counts = [UInt64](repeating: 0, count: bounds.count)
        }

        mutating func observe(_ value: Double) {
            if let index = bounds.firstIndex(where: { value <= $0 }) { counts[index] += 1 }
            sum += value
            count += 1
        }
    }

    struct RequestKey: Hashable {
        var method: String
        var route: String
        var status: Int
    }

    private struct State {
        var requests: [RequestKey: UInt64] = [:]
        var latency: [String: Histogram] = [:]
        var messagesAccepted: UInt64 = 0
        var recipientsAccepted: UInt64 = 0
        var batchSizes = Histogram(bounds: [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024])
        var events: [String: UInt64] = [:]
        var pushesByApp: [AppID: [PushOutcome: UInt64]] = [:]
        var signals: [SignalOutcome: UInt64] = [:]
        var matrixNotifies: UInt64 = 0
        var matrixRejected: UInt64 = 0
        var pushLatency = Histogram(bounds: Metrics.latencyBounds)
        var gauges: [(name: String, help: String, read: @Sendable () -> Int)] = []
        var families: [(name: String, help: String, read: @Sendable () -> [(labels: String, value: Int)])] = []
    }

    static let latencyBounds = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5]
    private let state = LockedValue(State())

    package init() {}

    /// The `method` label's closed set: anything else is `other`, so that junk methods sent by
    /// anyone cannot grow `/metrics` without bound (routes are templates or `unmatched` already).
    static let methodLabels: Set<String> = ["GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"]

    package func recordRequest(method: String, route: String, status: Int, seconds: Double) {
        let method = Self.methodLabels.contains(method) ? method : "other"
        state.withLock { state in
            state.requests[RequestKey(method: method, route: route, status: status), default: 0] += 1
            state.latency[route, default: Histogram(bounds: Self.latencyBounds)].observe(seconds)
        }
    }

    package func recordAccepted(recipients: Int) {
        state.withLock { state in
            state.messagesAccepted += 1
            state.recipientsAccepted += UInt64(recipients)
        }
    }

    /// What became of a push attempt (`pushrelay_push_attempts_total{outcome}`).
    package enum PushOutcome: String, CaseIterable, Sendable {
        case delivered
        /// Failed; tried again after the backoff.
        case retried
        /// Dead-lettered: the TTL or the attempts ran out, or the answer was final.
        case dead
        /// The service said the device is gone: it is disabled.
        case deviceGone = "device_gone"
        /// Not attempted: the host's breaker refused it.
        case postponed
        /// Sent but never processed by the service (GOAWAY, `REFUSED_STREAM`): sent again, no
        /// attempt counted.
        case requeued
    }

    /// Counts a push attempt's outcome; `seconds` (the attempt's duration) when one was made.
    package func recordPush(_ outcome: PushOutcome, app: AppID = .default, seconds: Double?) {
        state.withLock { state in
            state.pushesByApp[app, default: [:]][outcome, default: 0] += 1
            if let seconds { state.pushLatency.observe(seconds) }
        }
    }

    /// What became of an ephemeral signal (`pushrelay_signals_total{outcome}`).
    package enum SignalOutcome: String, CaseIterable, Sendable {
        /// A client sent one on its socket.
        case received
        /// Dropped: the user (all of its sockets together) sent more than its signal rate.
        case rateLimited = "rate_limited"
        /// Dropped: `signalsMaxInFlight` forwards were waiting for `eventsUrl` to answer.
        case dropped
        /// Taken by the chat server's `eventsUrl`.
        case forwarded
        /// Not taken (no `eventsUrl`, or it failed: signals are not retried).
        case notForwarded = "not_forwarded"
        /// Frames handed to recipients' sockets by `POST /v1/signals`.
        case sent
    }

    /// Totals since start, for the operator's overview (`GET /v1/stats`).
    package struct Totals: Sendable {
        package var messagesAccepted: UInt64
        package var recipientsAccepted: UInt64
        package var pushes: [PushOutcome: UInt64]
        package var signals: [SignalOutcome: UInt64]
    }

    package var totals: Totals {
        state.withLock { state in
            Totals(
                messagesAccepted: state.messagesAccepted, recipientsAccepted: state.recipientsAccepted,
                pushes: state.pushesByApp.values.reduce(into: [:]) { all, app in all.merge(app, uniquingKeysWith: +) },
                signals: state.signals)
        }
    }

    /// A Matrix notify was answered, `rejected` of its pushkeys unknown or disabled.
    package func recordMatrixNotify(rejected: Int) {
        state.withLock { state in
            state.matrixNotifies += 1
            state.matrixRejected += UInt64(max(0, rejected))
        }
    }

    package func recordSignal(_ outcome: SignalOutcome, count: Int = 1) {
        state.withLock { $0.signals[outcome, default: 0] += UInt64(max(0, count)) }
    }

    package func recordEvent(type: String) {
        state.withLock { $0.events[type, default: 0] += 1 }
    }

    /// A value read when `/metrics` is rendered (connections, sessions).
    package func registerGauge(_ name: String, help: String, read: @escaping @Sendable () -> Int) {
        state.withLock { $0.gauges.append((name, help, read)) }
    }

    /// Labeled values read at render time (`name{labels} value`).
    package func registerGaugeFamily(
        _ name: String, help: String, read: @escaping @Sendable () -> [(labels: String, value: Int)]
    ) {
        state.withLock { $0.families.append((name, help, read)) }
    }

    package func recordBatch(size: Int) {
        state.withLock { $0.batchSizes.observe(Double(size)) }
    }

    package func render() -> String {
        let snapshot = state.withLock { $0 }
        var out = ""
        Self.family(&out, "pushrelay_http_requests_total", "counter", "HTTP requests by route and status.")
        for (key, value) in snapshot.requests.sorted(by: {
            ($0.key.route, $0.key.method, $0.key.status) < ($1.key.route, $1.key.method, $1.key.status)
        }) {
            out +=
                "pushrelay_http_requests_total{method=\"\(key.method)\",route=\"\(key.route)\",status=\"\(key.status)\"} \(value)\n"
        }
        Self.family(
            &out, "pushrelay_http_request_duration_seconds", "histogram",
            "Time from a request's last byte to its response.")
        for (route, histogram) in snapshot.latency.sorted(by: { $0.key < $1.key }) {
            out += Self.render(
                histogram, name: "pushrelay_http_request_duration_seconds", labels: "route=\"\(route)\",")
        }
        Self.family(
            &out, "pushrelay_messages_accepted_total", "counter", "Messages accepted (first acceptance, not replays).",
            value: snapshot.messagesAccepted)
        Self.family(
            &out, "pushrelay_inbox_entries_written_total", "counter", "Inbox entries written (one per recipient).",
            value: snapshot.recipientsAccepted)
        Self.family(
            &out, "pushrelay_store_commit_batch_size", "histogram", "Writes sharing one group-commit transaction.")
        out += Self.render(snapshot.batchSizes, name: "pushrelay_store_commit_batch_size", labels: "")
        Self.family(
            &out, "pushrelay_push_attempts_total", "counter",
            "Push deliveries by outcome (delivered, retried, dead, device_gone, postponed, requeued) and app.")
        for (app, pushes) in snapshot.pushesByApp.sorted(by: { $0.key < $1.key }) {
            for (outcome, count) in pushes.sorted(by: { $0.key.rawValue < $1.key.rawValue }) {
                out += "pushrelay_push_attempts_total{outcome=\"\(outcome.rawValue)\",app=\"\(app)\"} \(count)\n"
            }
        }
        Self.family(&out, "pushrelay_push_duration_seconds", "histogram", "Time of one push delivery attempt.")
        out += Self.render(snapshot.pushLatency, name: "pushrelay_push_duration_seconds", labels: "")
        Self.family(&out, "pushrelay_events_total", "counter", "Events produced for the chat server, by type.")
        for (type, count) in snapshot.events.sorted(by: { $0.key < $1.key }) {
            out += "pushrelay_events_total{type=\"\(type)\"} \(count)\n"
        }
        Self.family(
            &out, "pushrelay_matrix_notifies_total", "counter", "Matrix Push Gateway notifies answered.",
            value: snapshot.matrixNotifies)
        Self.family(
            &out, "pushrelay_matrix_pushkeys_rejected_total", "counter",
            "Pushkeys answered as rejected (unknown or disabled).", value: snapshot.matrixRejected)
        Self.family(
            &out, "pushrelay_signals_total", "counter", "Ephemeral signals (typing and the like) by outcome.")
        for outcome in SignalOutcome.allCases {
            out += "pushrelay_signals_total{outcome=\"\(outcome.rawValue)\"} \(snapshot.signals[outcome, default: 0])\n"
        }
        for family in snapshot.families {
            Self.family(&out, family.name, "gauge", family.help)
            for (labels, value) in family.read() { out += "\(family.name){\(labels)} \(value)\n" }
        }
        for gauge in snapshot.gauges {
            Self.family(&out, gauge.name, "gauge", gauge.help, value: gauge.read())
        }
        return out
    }

    /// A metric's `# HELP` and `# TYPE` lines, and its unlabeled value when it has one.
    private static func family(
        _ out: inout String, _ name: String, _ type: String, _ help: String, value: (any CustomStringConvertible)? = nil
    ) {
        out += "# HELP \(name) \(help)\n# TYPE \(name) \(type)\n"
        if let value { out += "\(name) \(value)\n" }
    }

    private static func render(_ histogram: Histogram, name: String, labels: String) -> String {
        var out = ""
        var cumulative: UInt64 = 0
        for (bound, count) in zip(histogram.bounds, histogram.counts) {
            cumulative += count
            out += "\(name)_bucket{\(labels)le=\"\(bound)\"} \(cumulative)\n"
        }
        out += "\(name)_bucket{\(labels)le=\"+Inf\"} \(histogram.count)\n"
        let plainLabels = labels.isEmpty ? "" : "{\(labels.dropLast())}"
        out += "\(name)_sum\(plainLabels) \(histogram.sum)\n"
        out += "\(name)_count\(plainLabels) \(histogram.count)\n"
        return out
    }
}
