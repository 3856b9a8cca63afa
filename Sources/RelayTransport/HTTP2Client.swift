import Foundation
package import RelayCore
import RelayLocks
package import RelayPoll
import Synchronization

/// The HTTP/2 client for push services that speak nothing else (APNs): long-lived TLS
/// connections (ALPN `h2`) per origin, each multiplexing requests up to the server's
/// `SETTINGS_MAX_CONCURRENT_STREAMS`, a second connection when those run out, a PING on an idle
/// connection to find a dead one, a fresh connection after a GOAWAY. Framing is
/// `HTTP2Session`'s (nghttp2); sockets, TLS and epoll are the webhook client's primitives
/// (`Socket`, `WireConnection`, `TLSContext`, `Poller`), driven by this client's own thread.
///
/// A request that the server cannot have processed (refused, above a GOAWAY's last stream, never
/// sent) fails `.unprocessed`, so the caller may send it again at once; any other failure is
/// `.failed`. A request not answered within `requestTimeoutMs` takes its connection down with
/// it: a server that sits on a stream that long is not to be trusted with the next ones.
///
/// `@unchecked Sendable`: `send` and `stop` may be called from any thread (the inbox is locked,
/// the poller's wake is thread-safe); every other property belongs to the loop thread.
package final class HTTP2Client: @unchecked Sendable {
    package typealias Response = HTTP2Session.Response

    /// `https://host:port` of a service (an operator's setting, not a client's choice), with
    /// the key its connections are kept under and its `:authority`, worked out once: a request
    /// is built per push.
    package struct Endpoint: Sendable {
        package let url: PushURL
        let key: String
        let authority: String

        /// - Parameter partition: requests of another partition never share a connection with
        ///   these (APNs: a connection carries one team's provider tokens only).
        package init(_ url: PushURL, partition: String = "") {
            self.url = url
            key = partition.isEmpty ? url.origin : "\(url.origin) \(partition)"
            authority = url.hostHeader
        }
    }

    package struct Request: Sendable {
        package var endpoint: Endpoint
        package var path: String
        package var headers: [(name: String, value: String)]
        package var body: [UInt8]

        package init(endpoint: Endpoint, path: String, headers: [(name: String, value: String)], body: [UInt8]) {
            self.endpoint = endpoint
            self.path = path
            self.headers = headers
            self.body = body
        }
    }

    package enum Failure: Error, Sendable, CustomStringConvertible {
        /// The server said it did not act on it (REFUSED_STREAM, above a GOAWAY's last
        /// stream): safe to send again at once.
        case unprocessed(String)
        /// No connection could be made (resolve, connect, TLS, ALPN): it never left.
        case unreachable(String)
        /// It may or may not have been acted on (a connection lost, a timeout, a reset).
        case failed(String)

        package var description: String {
            switch self {
            case .unprocessed(let reason), .unreachable(let reason), .failed(let reason): return reason
            }
        }
    }

    package struct Settings: Sendable {
        package var connectTimeoutMs = 5000
        package var requestTimeoutMs = 10_000
        /// An idle connection is pinged after this long; no ACK within `connectTimeoutMs` drops it.
        package var idlePingMs = 60_000
        package var maxConnectionsPerOrigin = 4

        package init() {}
    }

    private struct Pending {
        let request: Request
        let deadline: Int64
        let done: @Sendable (Result<Response, Failure>) -> Void
    }

    private enum Message {
        case send(Pending)
        case resolved(origin: String, addresses: [IPAddress], failure: String?)
    }

    /// One connection to an origin.
    private final class Connection {
        enum Phase {
            case connecting(until: Int64)
            case handshaking(until: Int64)
            case open
        }

        let wire: WireConnection
        let origin: String
        var phase: Phase
        var session: HTTP2Session?
        var streams: [Int32: Pending] = [:]
        /// Bytes of the session's output the socket did not take yet.
        var unsent: [UInt8] = []
        var interest: Poller.Interest = .writable
        var lastActivity: Int64
        var pingSentAt: Int64?
        /// In `unflushed`.
        var submitted = false

        init(wire: WireConnection, origin: String, phase: Phase, now: Int64) {
            self.wire = wire
            self.origin = origin
            self.phase = phase
            lastActivity = now
        }

        var isOpen: Bool {
            if case .open = phase, let session, !session.isGoingAway, !session.isClosed { return true }
            return false
        }
    }

    /// Everything known about one origin.
    private struct Origin {
        var url: PushURL
        var addresses: [IPAddress] = []
        var resolving = false
        var connections: [Connection] = []
        /// Requests waiting for a stream.
        var waiting: [Pending] = []
    }

    private let settings: Settings
    private let tls: TLSContext
    private let poller: Poller
    private let resolver: WorkerPool
    private let inbox = LockedValue<[Message]>([])
    private let running = Atomic<Bool>(true)
    private let finished = LockedValue(false)

    // The loop thread's own state.
    private var origins: [String: Origin] = [:]
    private var connections: [Int32: Connection] = [:]
    /// Connections with requests submitted this loop turn: written once at the turn's end, so
    /// that the requests of one scheduler pass leave in one TLS record run, not a write each.
    private var unflushed: [Connection] = []
    /// When the loop next looks at deadlines (`tick`).
    private var nextTick: Int64 = 0
    private let readBuffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 16_384, alignment: 8)

    /// - Parameter tls: a context offering ALPN `h2`.
    package init(tls: TLSContext, settings: Settings) throws(Poller.Failure) {
        self.tls = tls
        self.settings = settings
        poller = try Poller()
        resolver = WorkerPool(threads: 1, name: "h2-resolver")
        ServiceThread.start("relay-http2") { [self] in run() }
    }

    deinit { readBuffer.deallocate() }

    /// Sends `request`; `done` runs on the client's thread (it must not block), once.
    package func send(_ request: Request, done: @escaping @Sendable (Result<Response, Failure>) -> Void) {
        let pending = Pending(
            request: request, deadline: MonotonicClock.milliseconds() + Int64(settings.requestTimeoutMs), done: done)
        post(.send(pending))
    }

    /// Ends the thread; requests in flight get no answer (their jobs stay pending in the store).
    package func stop() {
        running.store(false, ordering: .releasing)
        poller.wake()
        finished.withLock(when: { $0 }) { _ in }
        resolver.stop()
    }

    private func post(_ message: Message) {
        let wasEmpty = inbox.withLock { inbox in
            defer { inbox.append(message) }
            return inbox.isEmpty
        }
        if wasEmpty { poller.wake() }
    }

    // MARK: The loop

    private func run() {
        while running.load(ordering: .acquiring) {
            guard poller.wait(timeoutMs: nextTimeout(), { event in handle(event) }) else { break }
            for message in inbox.withLock({ inbox in
                defer { inbox.removeAll(keepingCapacity: true) }
                return inbox
            }) {
                switch message {
                case .send(let pending): dispatch(pending)
                case .resolved(let origin, let addresses, let failure): resolved(origin, addresses, failure)
                }
            }
            flushSubmitted()
            // Deadlines are seconds long: looking at every stream's on each turn (a turn per
            // answer read under load) would cost more than the answers.
            let now = MonotonicClock.milliseconds()
            if now >= nextTick {
                nextTick = now + 100
                tick(now)
            }
        }
        for connection in Array(connections.values) { drop(connection, "the relay is stopping") }
        finished.withLock { $0 = true }
        finished.broadcast()
    }

    /// Wakes for the earliest deadline: a connect, a request, an idle connection's ping.
    private func nextTimeout() -> Int32 {
        guard !connections.isEmpty || origins.values.contains(where: { !$0.waiting.isEmpty }) else { return -1 }
        return 250
    }

    private func handle(_ event: Poller.Event) {
        poller.assertOnLoopThread()
        let fd = Int32(truncatingIfNeeded: event.token - 1)
        guard let connection = connections[fd] else { return }
        advance(connection)
    }

    // MARK: Requests

    private func dispatch(_ pending: Pending) {
        let endpoint = pending.request.endpoint
        origins[endpoint.key, default: Origin(url: endpoint.url)].waiting.append(pending)
        serve(endpoint.key)
    }

    /// Hands waiting requests to open connections with streams free; opens a connection when
    /// they have none (up to the limit).
    private func serve(_ key: String) {
        // Taken out while it changes: a copy still in the dictionary would make every change
        // to `waiting` copy it.
        guard var origin = origins.removeValue(forKey: key) else { return }
        var taken = 0
        waiting: while taken < origin.waiting.count {
            guard
                let connection = origin.connections.first(where: {
                    $0.isOpen && ($0.session?.availableStreams ?? 0) > 0
                }), let session = connection.session
            else { break }
            let pending = origin.waiting[taken]
            let request = pending.request
            do {
                let id = try session.submit(
                    method: "POST", authority: request.endpoint.authority, path: request.path,
                    headers: request.headers, body: request.body)
                taken += 1
                connection.streams[id] = pending
                if !connection.submitted {
                    connection.submitted = true
                    unflushed.append(connection)
                }
            } catch {
                switch error.code {
                case .streamLimit, .goingAway, .closed:
                    // (availableStreams said otherwise: wait for the next event instead of spinning.)
                    break waiting
                default:
                    taken += 1
                    pending.done(.failure(.failed("HTTP/2: \(error.message)")))
                }
            }
        }
        origin.waiting.removeFirst(taken)
        let opening = origin.connections.contains { if case .open = $0.phase { return false } else { return true } }
        let needMore =
            !origin.waiting.isEmpty && !opening && origin.connections.count < settings.maxConnectionsPerOrigin
        origins[key] = origin
        if needMore { open(key) }
    }

    private func flushSubmitted() {
        while let connection = unflushed.popLast() {
            connection.submitted = false
            if connections[connection.wire.fd] === connection { flush(connection) }
        }
    }

    private func open(_ key: String) {
        guard var origin = origins[key] else { return }
        if IPAddress(origin.url.host) != nil {
            origin.addresses = IPAddress(origin.url.host).map { [$0] } ?? []
        } else if origin.addresses.isEmpty || origin.connections.isEmpty {
            // (Resolved again for each first connection: the service's addresses move.)
            guard !origin.resolving else { return }
            origin.resolving = true
            origins[key] = origin
            let host = origin.url.host
            resolver.submit { [self] in
                let addresses = SSRFGuard.resolve(host)
                post(
                    .resolved(
                        origin: key, addresses: addresses, failure: addresses.isEmpty ? "host does not resolve" : nil))
            }
            return
        }
        origins[key] = origin
        connect(key)
    }

    private func resolved(_ key: String, _ addresses: [IPAddress], _ failure: String?) {
        guard var origin = origins[key] else { return }
        origin.resolving = false
        origin.addresses = addresses
        origins[key] = origin
        if let failure {
            failWaiting(key, .unreachable(failure))
        } else {
            connect(key)
        }
    }

    private func connect(_ key: String) {
        guard var origin = origins[key] else { return }
        var failure = "no address to connect to"
        for address in origin.addresses {
            switch Socket.connect(address, port: origin.url.port) {
            case .failure(let error):
                failure = error.description
            case .success(let (fd, inProgress)):
                let now = MonotonicClock.milliseconds()
                let connection = Connection(
                    wire: WireConnection(fd: fd, key: key), origin: key,
                    phase: .connecting(until: now + Int64(settings.connectTimeoutMs)), now: now)
                guard poller.add(fd, token: UInt64(fd) + 1, interest: .writable) else {
                    failure = "epoll_ctl failed"
                    continue
                }
                connections[fd] = connection
                origin.connections.append(connection)
                origins[key] = origin
                if !inProgress { advance(connection) }
                return
            }
        }
        origins[key] = origin
        failWaiting(key, .unreachable("cannot connect to \(key): \(failure)"))
    }

    private func failWaiting(_ key: String, _ failure: Failure) {
        guard var origin = origins[key] else { return }
        let waiting = origin.waiting
        origin.waiting = []
        origins[key] = origin
        for pending in waiting { pending.done(.failure(failure)) }
    }

    // MARK: A connection

    private func advance(_ connection: Connection) {
        switch connection.phase {
        case .connecting(let until):
            let error = Socket.pendingError(connection.wire.fd)
            guard error == 0 else { return drop(connection, "connect failed: \(String(cString: strerror(error)))") }
            do {
                try connection.wire.startTLS(tls, host: origins[connection.origin]?.url.host ?? "")
            } catch {
                return drop(connection, error.description)
            }
            connection.phase = .handshaking(until: until)
            advance(connection)
        case .handshaking:
            switch connection.wire.handshake() {
            case .done:
                guard connection.wire.negotiatedProtocol == "h2" else {
                    return drop(connection, "the server did not agree to HTTP/2 (ALPN h2)")
                }
                do {
                    connection.session = try HTTP2Session()
                } catch {
                    return drop(connection, "HTTP/2: \(error.message)")
                }
                connection.phase = .open
                connection.lastActivity = MonotonicClock.milliseconds()
                // Read (then flush the preface) rather than wait for epoll: the handshake may have
                // read ahead the server's first records (`TLSContext` reads ahead for HTTP/2).
                read(connection)
                serve(connection.origin)
            case .wouldBlock(let wantsWrite): watch(connection, wantsWrite ? .writable : .readable)
            case .closed: drop(connection, "TLS handshake failed: connection closed")
            case .failed(let reason): drop(connection, reason)
            }
        case .open:
            read(connection)
        }
    }

    /// Reads what the socket has, feeds the session, and acts on its events.
    private func read(_ connection: Connection) {
        guard let session = connection.session else { return }
        while true {
            switch connection.wire.receive(into: readBuffer) {
            case .done(let count):
                connection.lastActivity = MonotonicClock.milliseconds()
                session.receive(UnsafeRawBufferPointer(rebasing: readBuffer[0..<count]))
                events(connection)
                if connections[connection.wire.fd] !== connection { return }
            case .wouldBlock:
                flush(connection)
                return
            case .closed:
                return drop(connection, "the server closed the connection")
            case .failed(let reason):
                return drop(connection, reason)
            }
        }
    }

    private func events(_ connection: Connection) {
        guard let session = connection.session else { return }
        var streamsFreed = false
        for event in session.takeEvents() {
            switch event {
            case .response(let response):
                connection.streams.removeValue(forKey: response.streamId)?.done(.success(response))
                streamsFreed = true
            case .streamReset(let id, let code, let refused):
                let failure: Failure =
                    refused
                    ? .unprocessed("HTTP/2 stream refused (error \(code))")
                    : .failed("HTTP/2 stream reset (error \(code))")
                connection.streams.removeValue(forKey: id)?.done(.failure(failure))
                streamsFreed = true
            case .streamFailed(let id, let reason):
                let failure: Failure
                switch reason {
                case .connectionLost: failure = .failed("connection lost")
                case .responseTooLarge: failure = .failed("the answer was too large")
                case .requestRejected(let why): failure = .failed("HTTP/2 request rejected: \(why)")
                }
                connection.streams.removeValue(forKey: id)?.done(.failure(failure))
                streamsFreed = true
            case .goAway:
                streamsFreed = true
            case .peerSettings:
                streamsFreed = true
            case .pingAck:
                connection.pingSentAt = nil
            case .connectionError(let failure):
                return drop(connection, "HTTP/2 connection error: \(failure)")
            }
        }
        if session.isGoingAway && connection.streams.isEmpty {
            // Done: the waiting requests go to another (new) connection.
            return drop(connection, "GOAWAY")
        }
        if streamsFreed { serve(connection.origin) }
    }

    /// Writes the session's output until the socket would block.
    private func flush(_ connection: Connection) {
        guard let session = connection.session else { return }
        while true {
            if connection.unsent.isEmpty {
                guard let output = session.pendingOutput() else { break }
                connection.unsent = output
            }
            switch connection.wire.send(connection.unsent[...]) {
            case .done(let count):
                connection.unsent.removeFirst(min(count, connection.unsent.count))
            case .wouldBlock(let wantsWrite):
                return watch(connection, wantsWrite ? .writable : .readable)
            case .closed:
                return drop(connection, "the server closed the connection")
            case .failed(let reason):
                return drop(connection, reason)
            }
        }
        events(connection)
        if connections[connection.wire.fd] === connection { watch(connection, .readable) }
    }

    private func watch(_ connection: Connection, _ interest: Poller.Interest) {
        guard connection.interest != interest else { return }
        connection.interest = interest
        let fd = connection.wire.fd
        if !poller.modify(fd, token: UInt64(fd) + 1, interest: interest) { drop(connection, "epoll_ctl failed") }
    }

    /// Closes a connection: its requests in flight fail (unprocessed when they never left),
    /// and the origin's waiting requests get another connection.
    private func drop(_ connection: Connection, _ reason: String) {
        let fd = connection.wire.fd
        guard connections[fd] === connection else { return }
        connections[fd] = nil
        poller.remove(fd)
        connection.session?.close()
        if let session = connection.session {
            // close() ends every stream in flight as `.connectionLost`.
            for case .streamFailed(let id, .connectionLost(let sent)) in session.takeEvents() {
                connection.streams.removeValue(forKey: id)?.done(
                    .failure(sent ? .failed("connection lost: \(reason)") : .unreachable("connection lost: \(reason)")))
            }
        }
        for (_, pending) in connection.streams { pending.done(.failure(.failed("connection lost: \(reason)"))) }
        connection.streams = [:]
        guard var origin = origins[connection.origin] else { return }
        origin.connections.removeAll { $0 === connection }
        origins[connection.origin] = origin
        let opened = { if case .open = connection.phase { return true } else { return false } }()
        if !opened {
            // It never opened: the waiting requests learn why instead of waiting for the next try.
            failWaiting(connection.origin, .unreachable("cannot connect to \(connection.origin): \(reason)"))
        } else if !origin.waiting.isEmpty {
            serve(connection.origin)
        }
    }

    /// Deadlines: connects, requests, idle pings.
    private func tick(_ now: Int64) {
        for connection in Array(connections.values) {
            switch connection.phase {
            case .connecting(let until), .handshaking(let until):
                if now >= until { drop(connection, "connect timed out") }
            case .open:
                if connection.streams.values.contains(where: { $0.deadline <= now }) {
                    drop(connection, "no answer within \(settings.requestTimeoutMs) ms")
                } else if let sentAt = connection.pingSentAt, now - sentAt > Int64(settings.connectTimeoutMs) {
                    drop(connection, "no PING acknowledgement")
                } else if connection.streams.isEmpty, connection.pingSentAt == nil,
                    now - connection.lastActivity > Int64(settings.idlePingMs)
                {
                    try? connection.session?.ping()
                    connection.pingSentAt = now
                    connection.lastActivity = now
                    flush(connection)
                }
            }
        }
        // Requests still waiting for a connection past their deadline.
        for key in Array(origins.keys) {
            guard var origin = origins[key] else { continue }
            let late = origin.waiting.filter { $0.deadline <= now }
            guard !late.isEmpty else { continue }
            origin.waiting.removeAll { $0.deadline <= now }
            origins[key] = origin
            for pending in late { pending.done(.failure(.unreachable("no connection within the deadline"))) }
        }
    }
}
