import Dispatch
import RelayCore
import RelayLocks
import RelayStore
import RelayTelemetry
import RelayWebSocket
import Synchronization
import WebSocketCodec

/// One client's WebSocket session: `welcome`, the catch-up after its cursor, `synced`, then live
/// messages; and the client's `ack`, `background`, `foreground` frames.
///
/// Every step runs on the session's own serial queue, which is what makes catch-up and live
/// delivery race-free: the session is registered for live messages *before* the catch-up is
/// read, so a message committed meanwhile is either in the catch-up or queued behind it; the
/// `lastSent` cursor drops the ones seen twice, and a gap (never expected) is filled from the
/// store before the next message goes out.
///
/// `@unchecked Sendable`: the mutable cursor is only touched on `queue`.
final class LiveSession: @unchecked Sendable {
    let handle: WebSocketHandle
    let userId: String
    let deviceId: String
    private let queue: DispatchQueue
    private let store: any RelayStore
    /// Carries `user.id` and `device.id`.
    let logger: Logger
    /// When the socket was opened (monotonic milliseconds), for the close line.
    let openedAt = MonotonicClock.milliseconds()
    /// The highest seq this client has been sent (or had when it connected).
    private var lastSent: Int64 = 0
    /// True while the catch-up runs; live messages then only raise `newestLive`, and the
    /// catch-up reads them from the store before `synced`.
    private var syncing = true
    private var newestLive: Int64 = 0
    private var closed = false
    /// Decides when the pushes of what this device was sent fall due (it waits for the ack).
    private let delivery: DeliveryPolicy
    /// When the client's token stops being valid (seconds, leeway included); the socket is
    /// closed then unless a `refresh` frame moved it. `Int64.max` once the close was ordered.
    private let tokenExpiresAt: Atomic<Int64>

    /// Session work (catch-up reads, fan-out) runs on a few serial queues rather than the global
    /// pool, so that thousands of sessions starting at once do not spawn a thread each.
    static let workers = (0..<4).map { DispatchQueue(label: "pushrelay-sessions-\($0)") }

    /// Messages per catch-up read; each page goes out as one batch, the next one only once the
    /// previous reached the socket (so a long backlog never piles up in memory).
    static let pageSize = 500
    static let pageBytes = 1 << 20

    private let now: @Sendable () -> Timestamp

    /// Signals a socket may send: 10 per second, bursts of 20; the rest are dropped.
    private let signalBudget: LockedValue<TokenBucket>
    static let signalsPerSecond = 10.0

    init(
        handle: WebSocketHandle, userId: String, deviceId: String, store: any RelayStore, logger: Logger,
        delivery: DeliveryPolicy, tokenExpiresAt: Int64, now: @escaping @Sendable () -> Timestamp
    ) {
        self.now = now
        signalBudget = LockedValue(
            TokenBucket(ratePerSecond: Self.signalsPerSecond, burst: Self.signalsPerSecond * 2, now: now()))
        self.tokenExpiresAt = Atomic(tokenExpiresAt)
        self.delivery = delivery
        self.handle = handle
        self.userId = userId
        self.deviceId = deviceId
        self.store = store
        self.logger = logger
        queue = DispatchQueue(
            label: "pushrelay-session", target: Self.workers[Int(handle.id % UInt64(Self.workers.count))])
    }

    /// Sends `welcome`, every message after `after` page by page, then `synced`.
    func start(after: Int64, clientEpoch: String?) {
        queue.async { [self] in
            do {
                let page = try store.catchUp(
                    userId: userId, after: after, epoch: clientEpoch, limit: Self.pageSize, maxBytes: Self.pageBytes)
                var writer = JSONWriter()
                writer.beginObject()
                writer.member("type", "welcome")
                writer.member("userId", userId)
                writer.member("deviceId", deviceId)
                writer.member("epoch", page.head.epoch)
                writer.member("headSeq", page.head.headSeq)
                writer.member("complete", page.window.complete)
                writer.member("firstAvailableSeq", page.head.prunedSeq + 1)
                writer.endObject()
                // Without a usable cursor there is nothing to replay: the client resyncs from the
                // chat server and continues from the head.
                lastSent = page.window.readAfter ?? page.head.headSeq
                send(page, prefix: WebSocketFrame(opcode: .text, payload: writer.bytes).encoded(), startedAfter: after)
            } catch {
                fail(error)
            }
        }
    }

    /// Sends one catch-up page; asks for the next once it is flushed, or finishes the sync.
    private func send(_ page: CatchUpPage, prefix: [UInt8] = [], startedAfter after: Int64) {
        var frames = prefix
        for message in page.messages { frames += Self.frame(for: message) }
        lastSent = page.messages.last?.seq ?? lastSent
        guard page.hasMore else {
            handle.send(frames: frames)
            finishSync(startedAfter: after)
            return
        }
        handle.send(frames: frames) { [self] in
            queue.async { [self] in
                guard !closed else { return }
                do {
                    let next = try store.catchUp(
                        userId: userId, after: lastSent, epoch: nil, limit: Self.pageSize, maxBytes: Self.pageBytes)
                    send(next, startedAfter: after)
                } catch {
                    fail(error)
                }
            }
        }
    }

    private func finishSync(startedAfter after: Int64) {
        syncing = false
        // Messages committed during the catch-up were only noted: send them now, before `synced`.
        if newestLive > lastSent { fillGap(upTo: newestLive) }
        if lastSent > after {
            store.markFetched(userId: userId, seq: lastSent)
            // The device was sent everything up to here: its pushes for it now wait for the ack
            // (and still go out if none comes, whatever happens to this socket).
            let time = now().milliseconds
            for case .waitForAck(let until) in delivery.decide(.caughtUp(currentDue: time), now: time) {
                store.awaitAck(
                    userId: userId, deviceId: deviceId, upTo: lastSent, until: Timestamp(milliseconds: until))
            }
        }
        handle.send(frames: Self.synced(lastSent))
    }

    /// A message committed for this user (in commit order).
    func deliver(seq: Int64, frame: [UInt8]) {
        queue.async { [self] in
            guard !closed else { return }
            if syncing {
                newestLive = max(newestLive, seq)
                return
            }
            guard seq > lastSent else { return }
            if seq > lastSent + 1 { fillGap(upTo: seq - 1) }
            handle.send(frames: frame)
            lastSent = seq
        }
    }

    /// Sends the messages after `lastSent` up to `last` from the store.
    private func fillGap(upTo last: Int64) {
        do {
            while lastSent < last {
                let page = try store.catchUp(
                    userId: userId, after: lastSent, epoch: nil, limit: Int(min(last - lastSent, Int64(Self.pageSize))),
                    maxBytes: Self.pageBytes)
                let messages = page.messages.filter { $0.seq <= last }
                guard !messages.isEmpty else { return }
                handle.send(frames: messages.flatMap { Self.frame(for: $0) })
                lastSent = messages.last?.seq ?? lastSent
            }
        } catch {
            fail(error)
        }
    }

    private func fail(_ error: any Error) {
        logger.error("catch-up failed", ("error", "\(error)"))
        handle.close(code: CloseCode.internalError, reason: "store unavailable")
    }

    /// True once, when the token has expired at `now`.
    func tokenExpired(at now: Timestamp) -> Bool {
        let expiresAt = tokenExpiresAt.load(ordering: .relaxed)
        guard expiresAt != Int64.max, now.seconds >= expiresAt else { return false }
        return tokenExpiresAt.compareExchange(expected: expiresAt, desired: Int64.max, ordering: .relaxed).exchanged
    }

    /// A `refresh` frame carried a valid token for this user and device.
    func refreshToken(expiresAt: Int64) {
        var current = tokenExpiresAt.load(ordering: .relaxed)
        while current != Int64.max, current < expiresAt {
            let (exchanged, original) = tokenExpiresAt.compareExchange(
                expected: current, desired: expiresAt, ordering: .relaxed)
            if exchanged { return }
            current = original
        }
    }

    /// Whether this socket may send another signal now (it takes one from the budget).
    func takeSignal() -> Bool {
        let time = now()
        return signalBudget.withLock { $0.take(now: time) == nil }
    }

    /// Sends an ephemeral WebSocket frame (a signal) after whatever the session queued before it (so never
    /// before `welcome`); nothing is stored, and a closed session drops it.
    func sendEphemeral(_ frame: [UInt8]) {
        queue.async { [self] in
            guard !closed else { return }
            handle.send(frames: frame)
        }
    }

    func markClosed() { queue.async { [self] in closed = true } }

    // MARK: Frames

    static func frame(for message: InboxMessage) -> [UInt8] {
        var writer = JSONWriter(capacity: message.payload.count + 160)
        writer.inboxMessage(message, type: "message")
        return WebSocketFrame(opcode: .text, payload: writer.bytes).encoded()
    }

    static func synced(_ seq: Int64) -> [UInt8] {
        var writer = JSONWriter()
        writer.beginObject()
        writer.member("type", "synced")
        writer.member("seq", seq)
        writer.endObject()
        return WebSocketFrame(opcode: .text, payload: writer.bytes).encoded()
    }
}
