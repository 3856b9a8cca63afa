import Glibc
import RelayCore
package import RelayHTTP
import RelayLocks
package import RelayPoll
import Synchronization
package import WebSocketCodec

/// What the loop reports about its connections. Called on the loop thread: keep it short and
/// hand real work (store reads, fan-out) to other threads.
package protocol WebSocketLoopDelegate: AnyObject, Sendable {
    func webSocket(_ connection: WebSocketHandle, received message: WebSocketConnection.Message)
    /// The connection is gone (closed by either side, failed, or dropped as dead); called once.
    func webSocketClosed(_ connection: WebSocketHandle, code: UInt16)
}

/// A connection as other threads see it: an id and thread-safe commands.
///
/// Frames are written by the sending thread itself when the socket takes them (`Outbound`), in
/// the order of the calls; what it does not take, what a sender leaves to the loop
/// (`Writer.loop`), and closes go through the loop.
package struct WebSocketHandle: Sendable, Hashable {
    package let id: UInt64
    let loop: WebSocketLoop
    let outbound: Outbound

    package static func == (lhs: WebSocketHandle, rhs: WebSocketHandle) -> Bool { lhs.id == rhs.id }
    package func hash(into hasher: inout Hasher) { hasher.combine(id) }

    /// Sends a text message (from any thread).
    package func send(text: String) {
        send(frames: WebSocketFrame(opcode: .text, payload: Array(text.utf8)).encoded())
    }

    /// Which thread writes a sender's frames to the socket.
    package enum Writer: Sendable {
        /// The sender's own, if the socket takes them now.
        case caller
        /// The loop's: for a sender that must not spend a system call per socket (the store's
        /// writer fanning a message out to many).
        case loop
    }

    /// Sends bytes that are already whole server frames (several messages in one write).
    package func send(frames: [UInt8], by writer: Writer = .caller) {
        loop.send(id, outbound, frames, by: writer, onFlushed: nil)
    }

    /// Sends frames and calls `onFlushed` once they, and everything sent before them, reached
    /// the socket (on whichever thread wrote the last of them): flow control for senders of large
    /// batches (catch-up). Not called if the connection closes first.
    package func send(frames: [UInt8], onFlushed: @escaping @Sendable () -> Void) {
        loop.send(id, outbound, frames, by: .caller, onFlushed: onFlushed)
    }

    /// Starts the close handshake with `code` (from any thread); frames sent after it are dropped.
    package func close(code: UInt16, reason: String) {
        outbound.stopAccepting()
        loop.enqueue(id, .close(code, reason))
    }
}

/// The relay's own event loop for upgraded sockets: one thread, edge-triggered epoll, an eventfd
/// to take commands from other threads, per-connection write queues with a bound (`Outbound`,
/// which senders write through themselves), and the ping / dead-peer timers.
///
/// `@unchecked Sendable`: `connections` and the epoll set are touched only by the loop thread;
/// other threads talk to it through `inbox` (a mutex) and the eventfd, and write to a socket
/// through its `Outbound`.
package final class WebSocketLoop: @unchecked Sendable {
    package struct Configuration: Sendable {
        /// Largest message from a client (close 1009 beyond).
        package var maxMessageBytes = 65_536
        /// A ping goes out after this much silence from the peer.
        package var pingIntervalMs: Int64 = 25_000
        /// A peer silent this long (no data, no pong) is dropped.
        package var deadAfterMs: Int64 = 60_000
        /// Bytes queued for a slow reader before it is closed with 1008 (it catches up on reconnect).
        /// One batch is always accepted on an empty queue, so memory stays within the larger of
        /// this and one batch. The server's pongs count too: a client that pings and never reads
        /// is closed like any slow reader.
        package var maxQueuedBytes = 4 << 20
        /// Frames a client may send per second, control frames included (burst 3×); beyond it
        /// the socket is closed with 1008. 0 for no limit.
        package var maxFramesPerSecond = 0
        /// Bytes read from one socket per loop turn, so that a flooding client cannot starve the
        /// others (the rest is read on the next turn).
        package var readBudgetBytes = 65_536
        /// How long a close handshake may take before the socket is closed anyway.
        package var closeTimeoutMs: Int64 = 5_000

        package init() {}
    }

    enum Command {
        case adopt(UpgradedSocket, Outbound)
        case close(UInt16, String)
        /// A sender's write failed: the connection ends.
        case failed
        /// Frames were left to the loop to write.
        case flush
    }

    /// Loop-thread state of one connection.
    final class Connection {
        let socket: UpgradedSocket
        let outbound: Outbound
        var protocolState: WebSocketConnection
        var lastHeard: Int64
        var pingOutstanding = false
        /// Set when we sent our close frame; the socket closes when the peer answers or time runs out.
        var closeDeadline: Int64?
        /// Close once the output is flushed (after a failure or the peer's close).
        var closeWhenFlushed = false
        var closeCode: UInt16 = CloseCode.noStatus
        /// The client's frame budget; nil for no limit.
        var frameBudget: TokenBucket?
        /// The codec's end of the connection (its close frame, then `.closed`), held until the
        /// commands queued so far are taken: what the delegate answered to the messages before
        /// the failure or the peer's close goes out first.
        var closing: [WebSocketConnection.Output] = []

        init(socket: UpgradedSocket, outbound: Outbound, configuration: Configuration, now: Int64) {
            self.socket = socket
            self.outbound = outbound
            protocolState = WebSocketConnection(role: .server, maxMessageSize: configuration.maxMessageBytes)
            lastHeard = now
            if configuration.maxFramesPerSecond > 0 {
                let rate = Double(configuration.maxFramesPerSecond)
                frameBudget = TokenBucket(ratePerSecond: rate, burst: rate * 3, now: Timestamp(milliseconds: now))
            }
        }
    }

    package let configuration: Configuration
    private weak var delegate: (any WebSocketLoopDelegate)?
    private let poller: Poller
    private let inbox = LockedValue<[(UInt64, Command)]>([])
    private let nextId = Atomic<UInt64>(1)
    private let running = Atomic<Bool>(true)
    private let openCount = LockedValue(0)
    private var connections: [UInt64: Connection] = [:]
    /// Connections with input left to read after their budget ran out (epoll is edge-triggered:
    /// it will not report them again).
    private var unread: Set<UInt64> = []
    /// Connections whose `closing` waits for the next inbox drain.
    private var ending: Set<UInt64> = []
    private var thread: ServiceThread?
    private let stopped = Atomic<Bool>(false)
    private let turnCount = Atomic<UInt64>(0)

    package init(configuration: Configuration) throws(Poller.Failure) {
        self.configuration = configuration
        poller = try Poller()
    }

    /// Open connections (for metrics and tests).
    package var connectionCount: Int { openCount.withLock { $0 } }

    /// How often the loop's thread woke (an event, a command, its timer check): what the tests
    /// count to see that a live message does not wake it.
    package var turns: UInt64 { turnCount.load(ordering: .relaxed) }

    package func start(delegate: any WebSocketLoopDelegate) {
        self.delegate = delegate
        thread = ServiceThread.start("relay-websocket", joinable: true) { [self] in run() }
    }

    /// Takes ownership of an upgraded socket; returns its handle at once (frames sent to it
    /// before the loop registered it are kept in order).
    package func adopt(_ socket: UpgradedSocket) -> WebSocketHandle {
        let id = nextId.add(1, ordering: .relaxed).newValue
        let outbound = Outbound()
        enqueue(id, .adopt(socket, outbound))
        return WebSocketHandle(id: id, loop: self, outbound: outbound)
    }

    /// Sends 1001 to everyone, gives the close handshakes a moment, closes every socket and
    /// ends the thread.
    package func stop(drainMs: Int64 = 1000) {
        guard running.load(ordering: .acquiring) else { return }
        inbox.withLock { $0.append((0, .close(CloseCode.goingAway, "server shutting down"))) }
        wake()
        openCount.withLock(when: { $0 == 0 }, waitingAtMost: drainMs) { _ in }
        running.store(false, ordering: .releasing)
        wake()
        thread?.join()
    }

    func enqueue(_ id: UInt64, _ command: Command) {
        inbox.withLock { $0.append((id, command)) }
        wake()
    }

    /// A sender's frames, written on its thread; the loop hears only of what it must act on. A
    /// slow consumer: what is queued still goes out, then 1008 (it resumes from its last seq
    /// when it reconnects).
    func send(
        _ id: UInt64, _ outbound: Outbound, _ frames: [UInt8], by writer: WebSocketHandle.Writer,
        onFlushed: (@Sendable () -> Void)?
    ) {
        switch outbound.send(
            frames, bound: configuration.maxQueuedBytes, write: writer == .caller, onFlushed: onFlushed)
        {
        case .accepted, .dropped: break
        case .handedOver: enqueue(id, .flush)
        case .overflow: enqueue(id, .close(CloseCode.policyViolation, "slow consumer"))
        case .failed: enqueue(id, .failed)
        }
    }

    private func wake() { poller.wake() }

    static func nowMs() -> Int64 { MonotonicClock.milliseconds() }

    // MARK: The loop

    private func run() {
        var nextTimerCheck = Self.nowMs() + 1000
        while running.load(ordering: .acquiring) {
            // Timers (pings, dead peers, close handshakes) only matter while sockets are open:
            // with none, sleep until a command arrives (no idle wake-ups).
            let timeout =
                !unread.isEmpty || !ending.isEmpty
                ? 0 : connections.isEmpty ? -1 : Int32(max(0, min(1000, nextTimerCheck - Self.nowMs())))
            let waited = poller.wait(timeoutMs: timeout) { event in
                guard let connection = connections[event.token] else { return }
                if event.readable { readAvailable(event.token, connection) }
                if event.writable, connections[event.token] != nil { flush(event.token, connection) }
            }
            guard waited else { break }
            turnCount.add(1, ordering: .relaxed)
            if !unread.isEmpty {
                let pending = unread
                unread = []
                for id in pending {
                    if let connection = connections[id] { readAvailable(id, connection) }
                }
            }
            // The delegate answers on this thread through the inbox: take those answers, then
            // carry out the closes that were waiting for them (those held during this drain,
            // by a socket's first bytes, wait for the next one).
            let ended = ending
            ending = []
            drainInbox()
            for id in ended {
                if let connection = connections[id] { endNow(id, connection) }
            }
            let now = Self.nowMs()
            if now >= nextTimerCheck {
                checkTimers(now)
                nextTimerCheck = now + 1000
            }
        }
        for (id, connection) in connections { finish(id, connection, code: CloseCode.goingAway) }
    }

    private func drainInbox() {
        let commands = inbox.withLock { commands -> [(UInt64, Command)] in
            defer { commands.removeAll(keepingCapacity: true) }
            return commands
        }
        for (id, command) in commands {
            switch command {
            case .adopt(let socket, let outbound):
                register(id, socket, outbound)
            case .failed:
                if let connection = connections[id] { finish(id, connection, code: CloseCode.abnormal) }
            case .flush:
                if let connection = connections[id] { flush(id, connection) }
            case .close(let code, let reason):
                if id == 0 {
                    for (connectionId, connection) in connections {
                        startClose(connectionId, connection, code: code, reason: reason)
                    }
                } else if let connection = connections[id] {
                    startClose(id, connection, code: code, reason: reason)
                }
            }
        }
    }

    private func register(_ id: UInt64, _ socket: UpgradedSocket, _ outbound: Outbound) {
        let connection = Connection(socket: socket, outbound: outbound, configuration: configuration, now: Self.nowMs())
        guard poller.add(socket.fd, token: id, interest: [.readable, .writable, .edgeTriggered]) else {
            outbound.close(socket.close)
            delegate?.webSocketClosed(
                WebSocketHandle(id: id, loop: self, outbound: outbound), code: CloseCode.internalError)
            return
        }
        connections[id] = connection
        openCount.withLock { $0 += 1 }
        outbound.attach(socket.fd)
        flush(id, connection)  // what was sent before this
        if connections[id] != nil, !socket.extraInput.isEmpty { process(id, connection, socket.extraInput) }
    }

    private func readAvailable(_ id: UInt64, _ connection: Connection) {
        poller.assertOnLoopThread()
        var buffer = [UInt8](repeating: 0, count: 16_384)
        var budget = configuration.readBudgetBytes
        while connections[id] != nil {
            guard budget > 0 else {
                unread.insert(id)
                return
            }
            let count = buffer.withUnsafeMutableBytes { recv(connection.socket.fd, $0.baseAddress, $0.count, 0) }
            if count > 0 {
                budget -= count
                process(id, connection, buffer[0..<count])
                continue
            }
            if count < 0, errno == EAGAIN || errno == EWOULDBLOCK { return }
            if count < 0, errno == EINTR { continue }
            // EOF or error: the peer is gone without a close handshake (or half-closed after a
            // failing frame: its answers go out, as far as they can).
            if !connection.closing.isEmpty {
                endNow(id, connection)
                return
            }
            finish(id, connection, code: connection.closeDeadline == nil ? CloseCode.abnormal : connection.closeCode)
            return
        }
    }

    private func process(_ id: UInt64, _ connection: Connection, _ bytes: some Sequence<UInt8>) {
        let now = Self.nowMs()
        connection.lastHeard = now
        connection.pingOutstanding = false
        var outputs = connection.protocolState.receive(bytes)[...]
        if case .closed = outputs.last {
            // The codec ends with its close frame (if it sends one) and `.closed`.
            var tail = outputs.endIndex - 1
            if tail > outputs.startIndex, case .write = outputs[tail - 1] { tail -= 1 }
            connection.closing = Array(outputs[tail...])
            outputs = outputs[..<tail]
            ending.insert(id)
        }
        carryOut(id, connection, outputs, now: now)
    }

    /// The codec's end of a connection, after the answers queued before it.
    private func endNow(_ id: UInt64, _ connection: Connection) {
        let closing = connection.closing
        connection.closing = []
        ending.remove(id)
        connection.outbound.stopAccepting()  // (before the close frame: no sender's frame after it)
        carryOut(id, connection, closing[...], now: Self.nowMs())
    }

    private func carryOut(
        _ id: UInt64, _ connection: Connection, _ outputs: ArraySlice<WebSocketConnection.Output>, now: Int64
    ) {
        for output in outputs {
            if case .closed = output {
            } else if connection.frameBudget?.take(now: Timestamp(milliseconds: now)) != nil {
                startClose(id, connection, code: CloseCode.policyViolation, reason: "rate limited")
                return
            }
            switch output {
            case .write(let frame):
                // A pong (or the echo of a close): it counts against the same bound as data.
                guard connection.closeDeadline == nil, !connection.closeWhenFlushed else { continue }
                guard connection.outbound.queuedBytes + frame.count <= configuration.maxQueuedBytes else {
                    startClose(id, connection, code: CloseCode.policyViolation, reason: "slow consumer")
                    return
                }
                connection.outbound.append(frame)
            case .message(let message):
                delegate?.webSocket(
                    WebSocketHandle(id: id, loop: self, outbound: connection.outbound), received: message)
            case .pong:
                break
            case .closed(let code, _):
                connection.closeCode = code
                connection.closeWhenFlushed = true
                connection.outbound.stopAccepting()
            }
        }
        flush(id, connection)
    }

    private func startClose(_ id: UInt64, _ connection: Connection, code: UInt16, reason: String) {
        // A connection the codec ended already has its close on the way.
        guard connection.closeDeadline == nil, !connection.closeWhenFlushed, connection.closing.isEmpty else { return }
        connection.outbound.stopAccepting()
        connection.outbound.append(connection.protocolState.close(code: code, reason: reason))
        connection.closeCode = code
        connection.closeDeadline = Self.nowMs() + configuration.closeTimeoutMs
        flush(id, connection)
    }

    private func flush(_ id: UInt64, _ connection: Connection) {
        poller.assertOnLoopThread()
        switch connection.outbound.flush() {
        case .pending:
            return
        case .failed:
            finish(id, connection, code: CloseCode.abnormal)
        case .drained:
            if connection.closeWhenFlushed { finish(id, connection, code: connection.closeCode) }
        }
    }

    private func checkTimers(_ now: Int64) {
        for (id, connection) in connections {
            if let deadline = connection.closeDeadline {
                if now >= deadline { finish(id, connection, code: connection.closeCode) }
                continue
            }
            let silent = now - connection.lastHeard
            if silent >= configuration.deadAfterMs {
                finish(id, connection, code: CloseCode.abnormal)
            } else if silent >= configuration.pingIntervalMs, !connection.pingOutstanding {
                connection.pingOutstanding = true
                connection.outbound.append(connection.protocolState.ping())
                flush(id, connection)
            }
        }
    }

    /// Removes the socket from epoll and closes it (it is ours since the upgrade); tells the
    /// delegate once.
    private func finish(_ id: UInt64, _ connection: Connection, code: UInt16) {
        guard connections.removeValue(forKey: id) != nil else { return }
        poller.remove(connection.socket.fd)
        connection.outbound.close(connection.socket.close)
        let left = openCount.withLock { count -> Int in
            count -= 1
            return count
        }
        if left == 0 { openCount.broadcast() }  // `stop()` waits for this
        delegate?.webSocketClosed(WebSocketHandle(id: id, loop: self, outbound: connection.outbound), code: code)
    }
}
