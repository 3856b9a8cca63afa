import Dispatch
import Foundation
import RelayCore
import RelayCrypto
import RelayStore
import Synchronization

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Delivers the push outbox: polls due jobs, coalesces them per device into one signed webhook,
/// sends it, and records the outcome (delivered; device gone → disabled; retry with backoff and
/// full jitter until the TTL; dead). At-least-once: a job stays pending in the store until its
/// outcome is committed, so a crash only means it is sent again.
///
/// `@unchecked Sendable`: the Dispatch timer is configured in `start()` and cancelled in
/// `stop()`, both by the owner; everything else is immutable or behind `inFlight`'s mutex.
final class PushNotifier: @unchecked Sendable {
    struct Settings: Sendable {
        var retry = RetryPolicy()
        /// Deliveries in flight at most.
        var maxInFlight = 256
        var pollIntervalMs = 50
        var requestTimeoutSeconds = 10.0
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
    private let timer: any DispatchSourceTimer
    /// Devices with a delivery in flight: their other due jobs wait, so one device never gets two
    /// pushes racing each other.
    private let inFlight = Mutex<Set<String>>([])
    /// The chat server's event webhook, if configured.
    private let eventsURL: URL?
    private let eventsInFlight = Mutex<Set<Int64>>([])

    init(
        store: any RelayStore, settings: Settings, signer: WebhookSignature, allowList: HostAllowList, metrics: Metrics,
        logger: Logger, events: any RelayEventSink, eventsURL: URL?, now: @escaping @Sendable () -> Timestamp
    ) {
        self.eventsURL = eventsURL
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
        session = URLSession(configuration: configuration)
        timer = DispatchSource.makeTimerSource(queue: queue)
    }

    func start() {
        let interval = DispatchTimeInterval.milliseconds(settings.pollIntervalMs)
        timer.schedule(deadline: .now() + interval, repeating: interval, leeway: .milliseconds(10))
        timer.setEventHandler { [self] in poll() }
        timer.resume()
    }

    func stop() {
        timer.cancel()
        queue.sync {}
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
        for batch in batches.prefix(room) {
            guard inFlight.withLock({ $0.insert(batch.deviceKey).inserted }) else { continue }
            deliver(batch)
        }
    }

    private func deliver(_ batch: PushBatch) {
        let started = now()
        guard let url = URL(string: batch.pushURL), let target = try? PushURL(batch.pushURL) else {
            finish(batch, .dead(error: "push URL is malformed"), started: started)
            return
        }
        if let refusal = ssrfRefusal(host: target.host) {
            finish(batch, .dead(error: refusal), started: started)
            return
        }
        post(url, body: Self.body(of: batch), webhookId: batch.webhookId, at: started) { [self] outcome in
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

    /// Sends a signed POST; `done` gets the classified answer.
    private func post(
        _ url: URL, body: [UInt8], webhookId: String, at time: Timestamp,
        done: @escaping @Sendable (DeliveryOutcome) -> Void
    ) {
        var request = URLRequest(url: url)
        request.httpMethod = "POST"
        request.httpBody = Data(body)
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        request.setValue("PushRelay", forHTTPHeaderField: "User-Agent")
        for (name, value) in signer.headers(id: webhookId, timestampSeconds: time.seconds, body: body) {
            request.setValue(value, forHTTPHeaderField: name)
        }
        session.dataTask(with: request) { _, response, error in
            if let http = response as? HTTPURLResponse {
                done(.classify(status: http.statusCode, retryAfter: http.value(forHTTPHeaderField: "Retry-After")))
            } else {
                done(
                    .retry(
                        reason: error.map { "\($0.localizedDescription)" } ?? "no response", notBeforeMilliseconds: nil)
                )
            }
        }.resume()
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
            let started = now()
            guard let target = try? PushURL(eventsURL.absoluteString), ssrfRefusal(host: target.host) == nil else {
                finishEvent(job, .dead(error: "events URL is not allowed"))
                continue
            }
            post(eventsURL, body: job.body, webhookId: job.webhookId, at: started) { [self] outcome in
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

    private func finish(_ batch: PushBatch, _ result: PushResult, started: Timestamp) {
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

    /// Checks the push host again at delivery: still allowed by configuration, and — for a
    /// name — resolving only to addresses that are public or explicitly allowed.
    private func ssrfRefusal(host: String) -> String? {
        guard allowList.allows(host: host) else { return "push host is no longer allowed" }
        if IPAddress(host) != nil { return nil }  // a literal, allowed above
        for address in Self.resolve(host) where !allowList.allows(address: address) && address.isSpecialPurpose {
            return "push host resolved to a non-public address"
        }
        return nil
    }

    static func resolve(_ host: String) -> [IPAddress] {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(host, nil, &hints, &list) == 0, let first = list else { return [] }
        defer { freeaddrinfo(list) }
        var addresses: [IPAddress] = []
        var cursor: UnsafeMutablePointer<addrinfo>? = first
        while let entry = cursor {
            var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
            if entry.pointee.ai_family == AF_INET, let raw = entry.pointee.ai_addr {
                var address = raw.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { $0.pointee.sin_addr }
                inet_ntop(AF_INET, &address, &buffer, socklen_t(buffer.count))
            } else if entry.pointee.ai_family == AF_INET6, let raw = entry.pointee.ai_addr {
                var address = raw.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { $0.pointee.sin6_addr }
                inet_ntop(AF_INET6, &address, &buffer, socklen_t(buffer.count))
            }
            let text = String(decoding: buffer.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self)
            if let address = IPAddress(text) { addresses.append(address) }
            cursor = entry.pointee.ai_next
        }
        return addresses
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
