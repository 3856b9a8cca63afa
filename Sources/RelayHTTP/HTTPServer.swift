internal import CMicroHTTPD
import Dispatch
import Glibc
import RelayCore
import RelayLocks
import Synchronization

/// An HTTP/1.1 server on libmicrohttpd: epoll, an internal thread pool, suspend/resume so that
/// a handler may answer later (after a group commit) without holding an MHD thread.
///
/// `@unchecked Sendable`: the daemon pointer is written once in `start()` and once in
/// `shutdown()`, both from the owning thread; MHD's threads only read the immutable settings.
package final class HTTPServer: @unchecked Sendable {
    package struct Configuration: Sendable {
        /// `host:port`; port 0 picks a free port (read it back from `port`).
        package var listen = "127.0.0.1:8080"
        /// MHD worker threads; each runs handlers synchronously.
        package var threads = 2
        /// Larger bodies are refused with 413 without being buffered.
        package var maxBodyBytes = 1 << 20
        /// Open connections at most, upgraded WebSockets included; more are refused at accept.
        package var maxConnections = 10_000
        /// Connections per client address, upgraded WebSockets included; 0 for no cap (behind a
        /// proxy every client has the proxy's address).
        package var maxConnectionsPerIP = 256
        /// An idle connection is closed after this many seconds without a byte; 0 never.
        package var connectionTimeoutSeconds = 60
        /// Time for a request head to arrive in full, from accept or from the previous answer.
        package var headerTimeoutMs: Int64 = 20_000
        /// Time for a declared body to arrive in full, from the end of its head.
        package var bodyTimeoutMs: Int64 = 60_000
        /// libmicrohttpd's memory pool per connection: it holds the request head (so it bounds the
        /// header size) and the read buffer for bodies. Upgraded sockets give theirs back at once.
        package var connectionMemoryBytes = 16_384
        /// libmicrohttpd's own error lines (aborted requests and the like); dropped when nil.
        package var errorLog: (@Sendable (String) -> Void)?
        /// Writes the answer to a request this layer refuses (the API's error shape lives above).
        package var render: @Sendable (HTTPRefusal) -> HTTPResponse = { HTTPResponse(status: $0.status) }

        package init() {}
    }

    package typealias Handler = @Sendable (HTTPRequest, HTTPResponder) -> Void
    /// Sees a request that declares a body with its head only (empty body); an answer it returns
    /// goes out at once and the body is never read (authentication before buffering).
    package typealias HeadCheck = @Sendable (HTTPRequest) -> HTTPResponse?

    let configuration: Configuration
    let handler: Handler
    let headCheck: HeadCheck?
    let connections: ConnectionTable
    /// Ends connections that miss their deadlines; armed while connections are open (an idle
    /// server sleeps).
    let sweeper = DemandTimer()
    static let sweepIntervalMs: Int64 = 500
    /// Handed to libmicrohttpd for its error lines; lives as long as the daemon.
    private let logger: UnsafeMutablePointer<pr_mhd_logger>
    private var daemon: OpaquePointer?
    private var socket: ListenSocket?
    /// Requests begun and not yet completed, and those whose handler still owes its answer;
    /// shutdown waits for them to drain.
    let inFlight = LockedValue(InFlight())
    struct InFlight {
        var count = 0
        var draining = false
        /// Past the drain deadline: a request that reaches its handler is answered 503 instead.
        var overdue = false
        /// Requests handed to the handler and not yet completed (a completed one was answered).
        var owed: [ObjectIdentifier: HTTPResponder] = [:]
    }
    /// After the drain deadline, the time the 503s owed then get to go out before MHD stops
    /// (a 503 fits in the socket buffer; only a client that reads nothing takes it all).
    static let overdueAnswerMs: Int64 = 2000
    private let requestCounter = Atomic<UInt64>(0)
    private let requestIdPrefix: String

    package init(configuration: Configuration, headCheck: HeadCheck? = nil, handler: @escaping Handler) {
        self.configuration = configuration
        self.handler = handler
        self.headCheck = headCheck
        connections = ConnectionTable(
            limits: .init(
                maxConnections: configuration.maxConnections, maxPerAddress: configuration.maxConnectionsPerIP,
                headerTimeoutMs: configuration.headerTimeoutMs, bodyTimeoutMs: configuration.bodyTimeoutMs))
        logger = .allocate(capacity: 1)
        var generator = SystemRandomNumberGenerator()
        requestIdPrefix = String(UInt32.random(in: 0x1000_0000...0xFFFF_FFFF, using: &generator), radix: 16)
        logger.initialize(to: pr_mhd_logger(line: errorLine, ctx: Unmanaged.passUnretained(self).toOpaque()))
    }

    deinit { logger.deallocate() }

    /// Open connections, upgraded WebSockets included.
    package var connectionCount: Int { connections.count }

    /// The bound port (after `start()`).
    package var port: Int { socket?.port ?? 0 }
    package var url: String { socket?.url ?? "" }

    package func start() throws(ListenSocket.Error) {
        let socket = try ListenSocket(address: configuration.listen)
        self.socket = socket
        let flags =
            MHD_USE_INTERNAL_POLLING_THREAD.rawValue | MHD_USE_EPOLL.rawValue | MHD_ALLOW_SUSPEND_RESUME.rawValue
            | MHD_ALLOW_UPGRADE.rawValue | MHD_USE_ERROR_LOG.rawValue
        let context = Unmanaged.passUnretained(self).toOpaque()
        // The caps are the connection table's (it counts WebSockets); MHD's own limit stays as a
        // backstop and its per-address limit off.
        let settings = pr_mhd_settings(
            flags: UInt32(flags), listen_fd: socket.fd, thread_pool_size: UInt32(max(1, configuration.threads)),
            connection_limit: UInt32(configuration.maxConnections),
            connection_timeout_s: UInt32(configuration.connectionTimeoutSeconds),
            per_ip_connection_limit: 0, connection_memory_limit: configuration.connectionMemoryBytes,
            accept_policy: acceptPolicy, accept_policy_cls: context, notify_connection: connectionNotified,
            notify_connection_cls: context, logger: logger)
        guard let daemon = pr_mhd_start(settings, accessHandler, context, completedHandler, context) else {
            close(socket.fd)
            throw .system("MHD_start_daemon", EINVAL)
        }
        self.daemon = daemon
        let connections = self.connections
        let sweeper = self.sweeper
        sweeper.start {
            connections.expire(now: MonotonicClock.milliseconds())
            if connections.count > 0 { sweeper.arm(afterMilliseconds: Self.sweepIntervalMs) }
        }
    }

    /// Stops taking new connections (each is closed as soon as it is accepted); requests on open
    /// connections still get answers. Not `MHD_quiesce_daemon`: on an epoll daemon with its own
    /// threads it races the workers' removal of the listening socket from their epoll sets, and
    /// the loser's `ENOENT` aborts the process (seen as SIGABRT after SIGTERM under load, "Failed
    /// to remove listen FD from epoll set"). The socket closes with the daemon.
    package func quiesce() { quiesced.store(true, ordering: .relaxed) }

    /// Set by `quiesce`; read by the accept policy.
    let quiesced = Atomic<Bool>(false)

    /// Stops accepting, lets in-flight requests finish (up to `drainMs`), answers 503 those
    /// still unanswered, then stops MHD. Upgraded sockets must have been closed before (MHD cannot
    /// stop with them open).
    package func shutdown(drainMs: Int64 = 10_000) {
        quiesce()
        guard let daemon else { return }
        // From here a new request on an open connection is refused at once, never suspended:
        // MHD cannot stop with a suspended connection, and one could follow the last answer.
        inFlight.withLock { $0.draining = true }
        inFlight.withLock(when: { $0.count == 0 }, waitingAtMost: drainMs) { _ in }
        // A handler still working (a long write) would leave its connection suspended, and MHD
        // aborts the process when stopped with one: each gets its 503 now (the handler's own
        // answer, later, is dropped), and the 503s get a moment to go out.
        let owed = inFlight.withLock { state -> [HTTPResponder] in
            state.overdue = true
            return Array(state.owed.values)
        }
        let overdue = configuration.render(.unfinishedAtShutdown)
        for responder in owed { responder.send(overdue) }
        inFlight.withLock(when: { $0.count == 0 }, waitingAtMost: Self.overdueAnswerMs) { _ in }
        MHD_stop_daemon(daemon)
        self.daemon = nil
        sweeper.stop()
    }

    func nextRequestId() -> String {
        let number = requestCounter.add(1, ordering: .relaxed).newValue
        return requestIdPrefix + "-" + String(number, radix: 16)
    }
}

// MARK: - C callbacks (kept out of main.swift: MHD threads must not land in main-actor code)

private let accessHandler: MHD_AccessHandlerCallback = {
    serverPointer, connection, url, method, _, uploadData, uploadDataSize, contextSlot in
    guard let serverPointer, let connection, let contextSlot, let uploadDataSize else { return .NO }
    let server = Unmanaged<HTTPServer>.fromOpaque(serverPointer).takeUnretainedValue()

    // First call: headers only. A normal answer is never queued here (MHD would answer
    // `Connection: close`); a refusal is, on purpose: the body is then never read.
    guard let existing = contextSlot.pointee else {
        let connectionId = HTTPServer.connectionId(connection)
        let context = RequestContext(
            method: method.map { String(cString: $0) } ?? "GET", path: url.map { String(cString: $0) } ?? "/",
            id: server.nextRequestId(), connectionId: connectionId)
        let draining = server.inFlight.withLock { state -> Bool in
            state.count += 1
            return state.draining
        }
        contextSlot.pointee = Unmanaged.passRetained(context).toOpaque()
        if draining {
            context.dispatched = true
            return queue(
                server.configuration.render(.shuttingDown), requestId: context.id, on: connection, server: server)
        }
        let length = MHD_lookup_connection_value(connection, .HEADER_KIND, "Content-Length").map { String(cString: $0) }
        let chunked = MHD_lookup_connection_value(connection, .HEADER_KIND, "Transfer-Encoding") != nil
        let expectsBody = chunked || (length.flatMap { Int($0) } ?? 0) > 0
        server.connections.headReceived(connectionId, expectsBody: expectsBody, now: MonotonicClock.milliseconds())
        if chunked, length != nil {
            // RFC 9112 §6.3: a request with both is a smuggling attempt or a broken proxy.
            context.dispatched = true
            return queue(
                server.configuration.render(.conflictingFraming), requestId: context.id, on: connection, server: server)
        }
        if let length, let declared = Int(length), declared > server.configuration.maxBodyBytes {
            context.bodyTooLarge = true
        }
        if expectsBody, let headCheck = server.headCheck {
            let head = HTTPRequest(
                method: context.method, path: context.path,
                query: collect(connection, .GET_ARGUMENT_KIND, lowercased: false),
                headers: collect(connection, .HEADER_KIND, lowercased: true),
                id: context.id, remoteAddress: describe(address: pr_mhd_client_address(connection)))
            if let refusal = headCheck(head) {
                context.dispatched = true
                return queue(refusal, requestId: context.id, on: connection, server: server)
            }
        }
        return .YES
    }
    let context = Unmanaged<RequestContext>.fromOpaque(existing).takeUnretainedValue()

    // Body chunks.
    if uploadDataSize.pointee > 0 {
        if !context.bodyTooLarge, !context.dispatched, let uploadData {
            let count = uploadDataSize.pointee
            if context.body.count + count > server.configuration.maxBodyBytes {
                context.bodyTooLarge = true
                context.body = []
            } else {
                uploadData.withMemoryRebound(to: UInt8.self, capacity: count) {
                    context.body.append(contentsOf: UnsafeBufferPointer(start: $0, count: count))
                }
            }
        }
        uploadDataSize.pointee = 0
        return .YES
    }

    // Resumed after an asynchronous answer (or a refused request's body: ignored, MHD closes).
    if context.dispatched {
        guard let response = context.takeResponse() else { return .YES }
        return queue(response, requestId: context.id, on: connection, server: server)
    }
    context.dispatched = true
    server.connections.requestReceived(context.connectionId)

    if context.bodyTooLarge {
        return queue(
            server.configuration.render(.bodyTooLarge(limit: server.configuration.maxBodyBytes)), requestId: context.id,
            on: connection, server: server)
    }

    let query = collect(connection, .GET_ARGUMENT_KIND, lowercased: false)
    guard !query.contains(where: { $0.name.utf8.contains(0) || $0.value.utf8.contains(0) }) else {
        return queue(server.configuration.render(.nulInQuery), requestId: context.id, on: connection, server: server)
    }
    let request = HTTPRequest(
        method: context.method, path: context.path, query: query,
        headers: collect(connection, .HEADER_KIND, lowercased: true), body: context.body, id: context.id,
        remoteAddress: describe(address: pr_mhd_client_address(connection)))
    context.body = []
    let responder = HTTPResponder(context: context, connection: connection)
    let overdue = server.inFlight.withLock { state -> Bool in
        guard !state.overdue else { return true }
        state.owed[ObjectIdentifier(context)] = responder
        return false
    }
    if overdue {
        return queue(
            server.configuration.render(.unfinishedAtShutdown), requestId: context.id, on: connection, server: server)
    }
    server.handler(request, responder)
    if let response = context.responseOrSuspend({ MHD_suspend_connection(connection) }) {
        return queue(response, requestId: context.id, on: connection, server: server)
    }
    return .YES
}

private let completedHandler: MHD_RequestCompletedCallback = { serverPointer, connection, contextSlot, _ in
    guard let serverPointer, let contextSlot, let pointer = contextSlot.pointee else { return }
    let server = Unmanaged<HTTPServer>.fromOpaque(serverPointer).takeUnretainedValue()
    let context = Unmanaged<RequestContext>.fromOpaque(pointer).takeRetainedValue()
    contextSlot.pointee = nil
    server.connections.requestCompleted(context.connectionId, now: MonotonicClock.milliseconds())
    let left = server.inFlight.withLock { state -> Int in
        state.count -= 1
        state.owed[ObjectIdentifier(context)] = nil
        return state.count
    }
    if left == 0 { server.inFlight.broadcast() }  // a draining shutdown waits for this
}

/// Admission at accept: the caps count upgraded WebSockets too.
private let acceptPolicy: MHD_AcceptPolicyCallback = { serverPointer, address, _ in
    guard let serverPointer else { return .NO }
    let server = Unmanaged<HTTPServer>.fromOpaque(serverPointer).takeUnretainedValue()
    guard !server.quiesced.load(ordering: .relaxed) else { return .NO }
    return server.connections.admits(describe(address: address)) ? .YES : .NO
}

/// Connection start and end: the table's entry, its id kept in MHD's per-connection slot.
private let connectionNotified: MHD_NotifyConnectionCallback = { serverPointer, connection, slot, event in
    guard let serverPointer, let connection, let slot else { return }
    let server = Unmanaged<HTTPServer>.fromOpaque(serverPointer).takeUnretainedValue()
    switch event.rawValue {
    case 0:  // MHD_CONNECTION_NOTIFY_STARTED
        let id = server.connections.opened(
            fd: pr_mhd_connection_fd(connection), address: describe(address: pr_mhd_client_address(connection)),
            now: MonotonicClock.milliseconds())
        slot.pointee = UnsafeMutableRawPointer(bitPattern: UInt(id))
        server.sweeper.arm(afterMilliseconds: HTTPServer.sweepIntervalMs)
    default:
        server.connections.closed(HTTPServer.connectionId(slot.pointee))
        slot.pointee = nil
    }
}

/// libmicrohttpd's error lines, formatted by the shim.
private let errorLine: @convention(c) (UnsafeMutableRawPointer?, UnsafePointer<CChar>?) -> Void = {
    serverPointer, text in
    guard let serverPointer, let text else { return }
    let server = Unmanaged<HTTPServer>.fromOpaque(serverPointer).takeUnretainedValue()
    server.configuration.errorLog?(String(cString: text).trimmingTrailingNewlines())
}

extension HTTPServer {
    /// The connection table's id for an MHD connection (0 when unknown).
    static func connectionId(_ connection: OpaquePointer) -> UInt64 {
        connectionId(pr_mhd_socket_context(connection))
    }

    static func connectionId(_ slot: UnsafeMutableRawPointer?) -> UInt64 {
        UInt64(UInt(bitPattern: slot))
    }
}

extension String {
    fileprivate func trimmingTrailingNewlines() -> String {
        var text = self
        while text.last?.isNewline == true { text.removeLast() }
        return text
    }
}

private func queue(
    _ response: HTTPResponse, requestId: String, on connection: OpaquePointer, server: HTTPServer
) -> MHD_Result {
    let created: OpaquePointer?
    var upgradeBox: UnsafeMutableRawPointer?
    if let upgrade = response.upgrade {
        let box = Unmanaged.passRetained(UpgradeBox(upgrade, connections: server.connections)).toOpaque()
        upgradeBox = box
        created = MHD_create_response_for_upgrade(upgradeCallback, box)
    } else {
        created = response.body.withUnsafeBytes { pr_mhd_response_copy($0.count, $0.baseAddress) }
    }
    guard let mhdResponse = created else {
        if let upgradeBox { Unmanaged<UpgradeBox>.fromOpaque(upgradeBox).release() }
        return .NO
    }
    defer { MHD_destroy_response(mhdResponse) }
    for (name, value) in response.headers { MHD_add_response_header(mhdResponse, name, value) }
    MHD_add_response_header(mhdResponse, "X-Request-Id", requestId)
    let result = MHD_queue_response(connection, UInt32(response.status), mhdResponse)
    // Not queued: the callback will never run, so its box is ours to release.
    if result != .YES, let upgradeBox { Unmanaged<UpgradeBox>.fromOpaque(upgradeBox).release() }
    return result
}

/// Collects headers or query arguments through MHD's iterator.
private func collect(
    _ connection: OpaquePointer, _ kind: MHD_ValueKind, lowercased: Bool
) -> [(name: String, value: String)] {
    final class Collector {
        var pairs: [(name: String, value: String)] = []
        let lowercased: Bool
        init(lowercased: Bool) { self.lowercased = lowercased }
    }
    let collector = Collector(lowercased: lowercased)
    // The sized iterator: a decoded `%00` stays in the value (a C string would end there, and
    // the handler would validate a shorter value than the client sent).
    let iterator: MHD_KeyValueIteratorN = { pointer, _, key, keySize, value, valueSize in
        guard let pointer, let key else { return .YES }
        let collector = Unmanaged<Collector>.fromOpaque(pointer).takeUnretainedValue()
        let name = key.withMemoryRebound(to: UInt8.self, capacity: keySize) {
            String(decoding: UnsafeBufferPointer(start: $0, count: keySize), as: UTF8.self)
        }
        let text =
            value.map { value in
                value.withMemoryRebound(to: UInt8.self, capacity: valueSize) {
                    String(decoding: UnsafeBufferPointer(start: $0, count: valueSize), as: UTF8.self)
                }
            } ?? ""
        collector.pairs.append((collector.lowercased ? name.lowercased() : name, text))
        return .YES
    }
    withExtendedLifetime(collector) {
        _ = MHD_get_connection_values_n(connection, kind, iterator, Unmanaged.passUnretained(collector).toOpaque())
    }
    return collector.pairs
}
