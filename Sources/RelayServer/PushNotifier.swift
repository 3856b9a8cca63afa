import Dispatch
import Foundation
import RelayCore
import RelayCrypto
import RelayLocks
import RelayPush
import RelayStore

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Delivers the push outbox: polls due jobs, coalesces them per device into one signed webhook,
/// sends it, and records the outcome (delivered; device gone → disabled; retry with backoff and
/// full jitter until the TTL; dead). At-least-once: a job stays pending in the store until its
/// outcome is committed, so a crash only means it is sent again.
///
/// `@unchecked Sendable`: the Dispatch timer is created in `start()` (a timer released without
/// ever being resumed traps) and cancelled in `stop()`, both by the owner; everything else is
/// immutable or behind a mutex.
final class PushNotifier: @unchecked Sendable {
    struct Settings: Sendable {
        var retry = RetryPolicy()
        /// Deliveries in flight at most.
        var maxInFlight = 512
        var pollIntervalMs = 10
        var requestTimeoutSeconds = 10.0
        var connectTimeoutSeconds = 5.0
        /// Threads doing blocking deliveries; a hung receiver holds one of them until its timeout.
        var deliveryThreads = 64
        /// Deliveries in flight at most per receiver `host:port`: one slow host never holds more
        /// than this share of the threads (its other jobs wait, due, for the next poll).
        var deliveriesPerHost = 16
    }

    private let store: any RelayStore
    private let settings: Settings
    private let signer: WebhookSignature
    private let allowList: HostAllowList
    private let metrics: Metrics
    private let logger: Logger
    private let events: any RelayEventSink
    private let now: @Sendable () -> Timestamp
    private let session: URLSession
    private let queue = DispatchQueue(label: "pushrelay-notifier")
    private var timer: (any DispatchSourceTimer)?
    /// Devices with a delivery in flight: their other due jobs wait, so one device never gets two
    /// pushes racing each other.
    private let inFlight = LockedValue<Set<String>>([])
    /// The chat server's event webhook, if configured.
    private let eventsURL: String?
    private let client: WebhookClient
    private let workers: WorkerPool
    private let ssrfGuard: SSRFGuard
    private let eventsInFlight = LockedValue<Set<Int64>>([])
    private let pollScheduled = LockedValue(false)
    /// One breaker per receiver `host:port`.
    private let breakers = LockedValue<[String: CircuitBreaker]>([:])
    /// Deliveries in flight per receiver `host:port`.
    private let hostsInFlight = LockedValue<[String: Int]>([:])

    init(
        store: any RelayStore, settings: Settings, signer: WebhookSignature, allowList: HostAllowList, metrics: Metrics,
        logger: Logger, events: any RelayEventSink, eventsURL: String?, now: @escaping @Sendable () -> Timestamp
    ) {
        self.eventsURL = eventsURL
        ssrfGuard = SSRFGuard(allowList: allowList)
        client = WebhookClient(
            connectTimeoutMs: Int(settings.connectTimeoutSeconds * 1000),
            totalTimeoutMs: Int(settings.requestTimeoutSeconds * 1000))
        workers = WorkerPool(threads: settings.deliveryThreads, name: "pushrelay-delivery")
        self.store = store
        self.settings = settings
        self.signer = signer
        self.allowList = allowList
        self.metrics = metrics
        self.logger = logger
        self.events = events
        self.now = now
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = settings.requestTimeoutSeconds
        configuration.timeoutIntervalForResource = settings.requestTimeoutSeconds
        configuration.httpMaximumConnectionsPerHost = 64
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        // Redirects are refused: a redirect could lead to an address the SSRF guard never checked.
        session = URLSession(configuration: configuration, delegate: RefuseRedirects(), delegateQueue: nil)
    }

    func start() {
        let interval = DispatchTimeInterval.milliseconds(settings.pollIntervalMs)
        let timer = DispatchSource.makeTimerSource(queue: queue)
        timer.schedule(deadline: .now() + interval, repeating: interval, leeway: .milliseconds(10))
        timer.setEventHandler { [self] in poll() }
        timer.resume()
        self.timer = timer
    }

    func stop() {
        timer?.cancel()
        queue.sync {}
        workers.stop()
        session.invalidateAndCancel()
    }

    private func poll() {
        pollEvents()
        let busy = inFlight.withLock { $0 }
        let room = settings.maxInFlight - busy.count
        guard room > 0 else { return }
        let batches: [PushBatch]
        do {
            batches = try store.duePushes(now: now(), limit: room * 4, skipping: busy)
        } catch {
            logger.warning("cannot read due pushes", ("error", "\(error)"))
            return
        }
        let time = now()
        for batch in batches.prefix(room) {
            guard inFlight.withLock({ $0.insert(batch.deviceKey).inserted }) else { continue }
            if time >= batch.expiresAt {
                finish(batch, .dead(error: "TTL expired before it could be delivered"), started: time)
                continue
            }
            let host = Self.hostKey(batch.pushURL)
            let allowed = breakers.withLock { $0[host, default: CircuitBreaker()].allows(at: time) }
            guard allowed else {
                // The host is paused: its jobs wait for the probe instead of occupying a thread.
                let until = breakers.withLock { breakers -> Timestamp in
                    if case .open(let until, _) = breakers[host]?.state { return until }
                    return Timestamp(milliseconds: time.milliseconds + 1000)
                }
                finish(batch, .postponed(until: until), started: time)
                continue
            }
            guard takeHostSlot(host) else {
                // The host has its share of threads busy: the job stays due for the next poll.
                inFlight.withLock { _ = $0.remove(batch.deviceKey) }
                continue
            }
            deliver(batch, host: host)
        }
        // A full round means a backlog: go again as soon as deliveries free up room, not at the
        // next tick.
        if batches.count >= room { pollSoon() }
    }

    /// Polls again shortly (coalescing requests while one is pending).
    private func pollSoon() {
        guard
            pollScheduled.withLock({ scheduled in
                defer { scheduled = true }
                return !scheduled
            })
        else { return }
        queue.asyncAfter(deadline: .now() + .milliseconds(2)) { [self] in
            pollScheduled.withLock { $0 = false }
            poll()
        }
    }

    private func takeHostSlot(_ host: String) -> Bool {
        hostsInFlight.withLock { hosts in
            guard hosts[host, default: 0] < settings.deliveriesPerHost else { return false }
            hosts[host, default: 0] += 1
            return true
        }
    }

    private func releaseHostSlot(_ host: String) {
        hostsInFlight.withLock { hosts in
            let left = hosts[host, default: 1] - 1
            hosts[host] = left > 0 ? left : nil
        }
    }

    private func deliver(_ batch: PushBatch, host: String) {
        let started = now()
        guard let target = try? PushURL(batch.pushURL) else {
            releaseHostSlot(host)
            finish(batch, .dead(error: "push URL is malformed"), started: started)
            return
        }
        post(target, body: Self.body(of: batch), webhookId: batch.webhookId, at: started) { [self] outcome in
            releaseHostSlot(host)
            finish(batch, result(for: outcome, attempts: batch.attempts, expiresAt: batch.expiresAt), started: started)
        }
    }

    /// Turns a receiver's answer into what the store records, applying backoff and the TTL.
    private func result(for outcome: DeliveryOutcome, attempts: Int, expiresAt: Timestamp) -> PushResult {
        switch outcome {
        case .delivered: return .delivered
        case .deviceGone: return .deviceGone(reason: "push receiver answered 404/410")
        case .dead(let reason): return .dead(error: reason)
        case .retry(let reason, let notBefore):
            let time = now()
            let backoff = settings.retry.delay(afterAttempt: attempts + 1, random: Double.random(in: 0...1))
            let at = Timestamp(milliseconds: time.milliseconds + max(backoff, notBefore ?? 0))
            if at >= expiresAt { return .dead(error: "TTL expired; last error: \(reason)") }
            return .retry(error: reason, at: at)
        }
    }

    /// Sends a signed POST; `done` gets the classified answer. Plain HTTP goes through the
    /// relay's own client on the delivery threads (connecting to the address the SSRF guard
    /// checked); HTTPS through URLSession, after the same check of the resolved addresses.
    private func post(
        _ target: PushURL, body: [UInt8], webhookId: String, at time: Timestamp,
        done: @escaping @Sendable (DeliveryOutcome) -> Void
    ) {
        let headers =
            [("Content-Type", "application/json"), ("User-Agent", "PushRelay")]
            + signer.headers(id: webhookId, timestampSeconds: time.seconds, body: body)
        workers.submit { [self] in
            let addresses: [IPAddress]
            switch ssrfGuard.addresses(for: target) {
            case .failure(let refusal):
                done(.dead(reason: "SSRF guard: \(refusal.description)"))
                return
            case .success(let resolved): addresses = resolved
            }
            guard target.scheme == "https" else {
                do {
                    let response = try client.post(target, address: addresses[0], headers: headers, body: body)
                    done(.classify(status: response.status, retryAfter: response.retryAfter))
                } catch {
                    done(.retry(reason: "\(error)", notBeforeMilliseconds: nil))
                }
                return
            }
            guard let url = URL(string: "\(target.scheme)://\(target.hostHeader)\(target.target)") else {
                done(.dead(reason: "URL is malformed"))
                return
            }
            var request = URLRequest(url: url)
            request.httpMethod = "POST"
            request.httpBody = Data(body)
            for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
            session.dataTask(with: request) { _, response, error in
                if let http = response as? HTTPURLResponse {
                    done(.classify(status: http.statusCode, retryAfter: http.value(forHTTPHeaderField: "Retry-After")))
                } else {
                    done(
                        .retry(
                            reason: error.map { "\($0.localizedDescription)" } ?? "no response",
                            notBeforeMilliseconds: nil))
                }
            }.resume()
        }
    }

    // MARK: Events

    private func pollEvents() {
        guard let eventsURL else { return }
        let busy = eventsInFlight.withLock { $0 }
        let room = settings.maxInFlight - busy.count
        guard room > 0 else { return }
        let jobs: [EventJob]
        do {
            jobs = try store.dueEvents(now: now(), limit: room, skipping: busy)
        } catch {
            logger.warning("cannot read due events", ("error", "\(error)"))
            return
        }
        for job in jobs {
            guard eventsInFlight.withLock({ $0.insert(job.id).inserted }) else { continue }
            guard let target = try? PushURL(eventsURL) else {
                finishEvent(job, .dead(error: "events URL is malformed"))
                continue
            }
            post(target, body: job.body, webhookId: job.webhookId, at: now()) { [self] outcome in
                let result: PushResult
                switch outcome {
                case .deviceGone: result = .dead(error: "events receiver answered 404/410")
                default: result = self.result(for: outcome, attempts: job.attempts, expiresAt: job.expiresAt)
                }
                finishEvent(job, result)
            }
        }
    }

    private func finishEvent(_ job: EventJob, _ result: PushResult) {
        let logger = self.logger
        store.finishEvent(job, result: result, now: now()) { [self] stored in
            eventsInFlight.withLock { _ = $0.remove(job.id) }
            if case .failure(let error) = stored { logger.error("cannot record event outcome", ("error", "\(error)")) }
            if case .dead(let error) = result {
                logger.warning("event dead-lettered", ("event.type", job.type), ("error", error))
            }
        }
    }

    static func hostKey(_ url: String) -> String {
        guard let parsed = try? PushURL(url) else { return url }
        return "\(parsed.host):\(parsed.port)"
    }

    /// Feeds the breaker of the batch's host: receiver errors count as failures; any answer that
    /// shows the host alive (2xx, 4xx) as a success.
    private func recordHealth(_ batch: PushBatch, _ result: PushResult) {
        let host = Self.hostKey(batch.pushURL)
        let time = now()
        breakers.withLock { breakers in
            switch result {
            case .postponed: return
            case .retry: breakers[host, default: CircuitBreaker()].recordFailure(at: time)
            case .delivered, .dead, .deviceGone: breakers[host, default: CircuitBreaker()].recordSuccess()
            }
        }
    }

    /// `host:port` of receivers whose breaker is open (for /metrics).
    var openBreakers: [(labels: String, value: Int)] {
        breakers.withLock { breakers in
            breakers.filter { $0.value.isOpen }.keys.sorted().map { ("host=\"\($0)\"", 1) }
        }
    }

    private func finish(_ batch: PushBatch, _ result: PushResult, started: Timestamp) {
        recordHealth(batch, result)
        let metrics = self.metrics
        let logger = self.logger.with("user.id", batch.userId).with("device.id", batch.deviceId)
        let events = self.events
        let finishedAt = now()
        store.finish(batch, result: result, now: finishedAt) { [self] stored in
            inFlight.withLock { _ = $0.remove(batch.deviceKey) }
            if case .failure(let error) = stored {
                logger.error("cannot record push outcome", ("error", "\(error)"))
                return
            }
            let seconds = Double(finishedAt.milliseconds - started.milliseconds) / 1000
            switch result {
            case .postponed:
                metrics.recordPush(outcome: "postponed", seconds: nil)
            case .delivered:
                metrics.recordPush(outcome: "delivered", seconds: seconds)
                events.emit(.push(type: "push.delivered", batch, error: nil, at: finishedAt))
            case .retry(let error, _):
                metrics.recordPush(outcome: "retried", seconds: seconds)
                logger.info("push will be retried", ("error", error), ("attempt", String(batch.attempts + 1)))
            case .dead(let error):
                metrics.recordPush(outcome: "dead", seconds: seconds)
                logger.warning("push dead-lettered", ("error", error))
                events.emit(.push(type: "push.failed", batch, error: error, at: finishedAt))
            case .deviceGone(let reason):
                metrics.recordPush(outcome: "device_gone", seconds: seconds)
                events.emit(.push(type: "device.disabled", batch, error: reason, at: finishedAt))
            }
        }
    }

    /// The push body (DESIGN §5); content-free devices get ids and counts only.
    static func body(of batch: PushBatch) -> [UInt8] {
        var writer = JSONWriter(capacity: 256 + (batch.push?.count ?? 0))
        writer.beginObject()
        writer.member("type", batch.kind)
        writer.member("userId", batch.userId)
        writer.member("deviceId", batch.deviceId)
        if !batch.contentFree, let messageId = batch.messageId { writer.member("messageId", messageId) }
        writer.key("seq")
        writer.beginObject()
        writer.member("from", batch.seqFrom)
        writer.member("to", batch.seqTo)
        writer.endObject()
        writer.member("unread", batch.unread)
        writer.member("priority", batch.priority)
        writer.member("collapseKey", orNull: batch.collapseKey)
        if !batch.contentFree, batch.kind == "message" {
            writer.key("push")
            if let push = batch.push { writer.raw(push) } else { writer.null() }
        }
        writer.endObject()
        return writer.bytes
    }
}

/// Makes URLSession hand a 3xx back as the answer instead of following it (then: dead, "HTTP 3xx").
final class RefuseRedirects: NSObject, URLSessionTaskDelegate, @unchecked Sendable {
    func urlSession(
        _ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
        newRequest request: URLRequest, completionHandler: @escaping (URLRequest?) -> Void
    ) {
        completionHandler(nil)
    }
}

extension RelayEvent {
    static func push(type: String, _ batch: PushBatch, error: String?, at: Timestamp) -> RelayEvent {
        var writer = JSONWriter()
        writer.beginObject()
        writer.member("userId", batch.userId)
        writer.member("deviceId", batch.deviceId)
        writer.member("messageId", orNull: batch.messageId)
        writer.key("seq")
        writer.beginObject()
        writer.member("from", batch.seqFrom)
        writer.member("to", batch.seqTo)
        writer.endObject()
        writer.member("error", orNull: error)
        writer.endObject()
        return RelayEvent(type: type, data: writer.bytes, at: at)
    }
}
