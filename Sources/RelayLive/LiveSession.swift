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
/// The session is registered for live messages *before* the catch-up is read, so a message
/// committed meanwhile is either in the catch-up or noted and read after it; the `lastSent`
/// cursor drops the ones seen twice, and a gap (never expected) is filled from the store before
/// the next message goes out. Every message frame is handed to the socket under the cursor's
/// lock, together with the cursor's move, so frames leave in seq order whichever thread sends
/// them. A live message that is simply the next one is written to the socket at once by the
/// thread that saw its commit become durable (the writer's, or the HTTP thread that led the
/// commit), with no hop to another thread — or, for a message to many sockets, handed to the
/// socket loop (`LiveHub.directFanOut`); store reads (catch-up, gaps) run on the session's serial
/// queue.
package final class LiveSession: Sendable {
    let handle: WebSocketHandle
    let userId: String
    let deviceId: String
    private let queue: DispatchQueue
    private let store: any RelayStore
    /// Carries `user.id` and `device.id`.
    let logger: Logger
    /// When the socket was opened (monotonic milliseconds), for the close line.
    let openedAt: Int64
    private struct Cursor {
        /// The highest seq this client has been sent (or had when it connected).
        var lastSent: Int64 = 0
        /// True while the catch-up runs; live messages then only raise `newestLive`, and the
        /// catch-up reads them from the store before `synced`.
        var syncing = true
        var newestLive: Int64 = 0
        var closed = false
    }

    private let cursor = LockedValue(Cursor())
    /// Decides when the pushes of what this device was sent fall due (it waits for the ack).
    private let delivery: DeliveryPolicy
    /// When the client's token stops being valid (seconds, leeway included); the socket is
    /// closed then unless a `refresh` frame moved it. `Int64.max` once the close was ordered.
    private let tokenExpiresAt: Atomic<Int64>
    /// A live read failed (the store was unreachable): when to read again (monotonic ms);
    /// `Int64.max` when none failed. The socket stays open meanwhile: nothing newer can be stored
    /// while the store is down. Atomic, like `tokenExpiresAt`: the hub's tick looks at every
    /// session.
    private let retryAt = Atomic<Int64>(Int64.max)

    /// Session work (catch-up reads, fan-out) runs on a few serial queues rather than the global
    /// pool, so that thousands of sessions starting at once do not spawn a thread each.
    static let workers = (0..<4).map { DispatchQueue(label: "pushrelay-sessions-\($0)") }

    /// Messages per catch-up read; each page goes out as one batch, the next one only once the
    /// previous reached the socket (so a long backlog never piles up in memory).
    static let pageSize = 500
    static let pageBytes = 1 << 20

    private let clock: RelayClock

    init(
        handle: WebSocketHandle, userId: String, deviceId: String, store: any RelayStore, logger: Logger,
        delivery: DeliveryPolicy, tokenExpiresAt: Int64, clock: RelayClock
    ) {
        self.clock = clock
        openedAt = clock.uptimeMs()
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

    /// Sends `welcome`, every message after `after` page by page, then `synced`. The welcome
    /// tells the client the ping interval, from which it judges a silent link dead.
    func start(after: Int64, clientEpoch: String?, pingIntervalMs: Int64) {
        queue.async { [self] in
            do {
                let page = try store.catchUp(
                    userId: userId, after: after, epoch: clientEpoch, limit: Self.pageSize, maxBytes: Self.pageBytes)
                var writer = JSONWriter()
                writer.beginObject()
                writer.member("type", "welcome")
                writer.member("userId", userId)
                writer.member("deviceId", deviceId)
                writer.inboxHead(page)
                writer.member("pingIntervalMs", pingIntervalMs)
                writer.endObject()
                // Without a usable cursor there is nothing to replay: the client resyncs from the
                // chat server and continues from the head.
                let start = page.window.readAfter ?? page.head.headSeq
                cursor.withLock { $0.lastSent = start }
                send(page, prefix: WebSocketFrame(opcode: .text, payload: writer.bytes).encoded(), startedAfter: after)
            } catch {
                fail(error)
            }
        }
    }

    /// Sends one catch-up page; asks for the next once it is flushed, or finishes the sync.
    /// (While syncing, nothing else sends message frames.)
    private func send(_ page: CatchUpPage, prefix: [UInt8] = [], startedAfter after: Int64) {
        var frames = prefix
        for message in page.messages { frames += Self.frame(for: message) }
        guard page.hasMore else {
            cursor.withLock { cursor in
                cursor.lastSent = page.messages.last?.seq ?? cursor.lastSent
                handle.send(frames: frames)
            }
            finishSync(startedAfter: after)
            return
        }
        cursor.withLock { position in
            position.lastSent = page.messages.last?.seq ?? position.lastSent
            handle.send(frames: frames) { [self] in
                queue.async { [self] in
                    guard let last = cursor.withLock({ $0.closed ? nil : $0.lastSent }) else { return }
                    do {
                        let next = try store.catchUp(
                            userId: userId, after: last, epoch: nil, limit: Self.pageSize, maxBytes: Self.pageBytes)
                        send(next, startedAfter: after)
                    } catch {
                        fail(error)
                    }
                }
            }
        }
    }

    private func finishSync(startedAfter after: Int64) {
        // Messages committed during the catch-up were only noted: send them now, then `synced`
        // in the same step that ends the sync (so no live message can slip in before it).
        while let behind = cursor.withLock({ cursor -> Int64? in
            if cursor.newestLive > cursor.lastSent { return cursor.newestLive }
            cursor.syncing = false
            if cursor.lastSent > after { caughtUp(to: cursor.lastSent) }
            handle.send(frames: Self.synced(cursor.lastSent))
            return nil
        }) {
            do {
                try fillGap(upTo: behind)
            } catch {
                return fail(error)
            }
        }
    }

    /// The device was sent everything up to `lastSent`: recorded, and its pushes for it now wait
    /// for the ack (and still go out if none comes, whatever happens to this socket). Queued
    /// before `synced` leaves, so before any ack the client sends for it.
    private func caughtUp(to lastSent: Int64) {
        store.markFetched(userId: userId, seq: lastSent)
        let now = clock.now()
        store.apply(
            delivery.caughtUp(userId: userId, deviceId: deviceId, through: lastSent, now: now.milliseconds), now: now)
    }

    /// A message committed for this user (called in commit order, on the committing thread;
    /// `writer` says who writes the frame to the socket).
    func deliver(seq: Int64, frame: [UInt8], by writer: WebSocketHandle.Writer) {
        let gap = cursor.withLock { cursor -> Bool in
            guard !cursor.closed else { return false }
            if cursor.syncing {
                cursor.newestLive = max(cursor.newestLive, seq)
                return false
            }
            guard seq > cursor.lastSent else { return false }
            guard seq == cursor.lastSent + 1 else { return true }
            handle.send(frames: frame, by: writer)
            cursor.lastSent = seq
            return false
        }
        // A gap: read what is missing, this message included, from the store (in order, on the
        // queue; later messages find the gap too until it is filled, and follow it there).
        if gap { queue.async { [self] in catchUpLive(upTo: seq) } }
    }

    /// Another node committed `seq` for this user: it is read from the store, with anything
    /// before it not sent yet (as a gap is).
    func committedElsewhere(seq: Int64) {
        let behind = cursor.withLock { cursor -> Bool in
            guard !cursor.closed else { return false }
            if cursor.syncing {
                cursor.newestLive = max(cursor.newestLive, seq)
                return false
            }
            return seq > cursor.lastSent
        }
        if behind { queue.async { [self] in catchUpLive(upTo: seq) } }
    }

    /// Reads whatever the store has after `lastSent` (other nodes' notifications may have been
    /// missed). During the catch-up, this only sends sooner what the catch-up reads anyway.
    func resync() {
        queue.async { [self] in catchUpLive(upTo: Int64.max) }
    }

    /// Whether a live read failed and is due again at `now` (monotonic ms).
    func readsAgain(at now: Int64) -> Bool { now >= retryAt.load(ordering: .relaxed) }

    /// Reads again after a failed live read, once `retryIntervalMs` has passed (the hub's tick).
    func retryIfStalled(now: Int64) {
        let due = retryAt.load(ordering: .relaxed)
        guard now >= due,
            retryAt.compareExchange(expected: due, desired: now + Self.retryIntervalMs, ordering: .relaxed).exchanged
        else { return }
        queue.async { [self] in catchUpLive(upTo: Int64.max) }
    }

    static let retryIntervalMs: Int64 = 1000

    /// A live read (a gap, another node's commit, a resync). If the store fails, the socket stays
    /// open and the read is tried again (`retryIfStalled`): during a database outage, open
    /// sockets stay open.
    private func catchUpLive(upTo last: Int64) {
        do {
            try fillGap(upTo: last)
            retryAt.store(Int64.max, ordering: .relaxed)
        } catch {
            let first = retryAt.compareExchange(
                expected: Int64.max, desired: clock.uptimeMs() + Self.retryIntervalMs, ordering: .relaxed
            ).exchanged
            if first { logger.warning("live read failed; the socket stays open, reading again", ("error", "\(error)")) }
        }
    }

    /// Sends the messages after `lastSent` up to `last` from the store.
    private func fillGap(upTo last: Int64) throws {
        while let after = cursor.withLock({ $0.closed || $0.lastSent >= last ? nil : $0.lastSent }) {
            let page = try store.catchUp(
                userId: userId, after: after, epoch: nil, limit: Int(min(last - after, Int64(Self.pageSize))),
                maxBytes: Self.pageBytes)
            let messages = page.messages.filter { $0.seq <= last }
            guard !messages.isEmpty else { return }
            cursor.withLock { cursor in
                let fresh = messages.filter { $0.seq > cursor.lastSent }
                guard let newest = fresh.last?.seq else { return }
                handle.send(frames: fresh.flatMap { Self.frame(for: $0) })
                cursor.lastSent = newest
            }
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

    /// Sends an ephemeral WebSocket frame (a signal) after whatever the session queued before it (so never
    /// before `welcome`); nothing is stored, and a closed session drops it.
    func sendEphemeral(_ frame: [UInt8]) {
        queue.async { [self] in
            guard !cursor.withLock({ $0.closed }) else { return }
            handle.send(frames: frame)
        }
    }

    func markClosed() { cursor.withLock { $0.closed = true } }

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
