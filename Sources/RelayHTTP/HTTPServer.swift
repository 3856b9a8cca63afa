internal import CMicroHTTPD
import Glibc
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
        /// Open connections at most; MHD refuses more at accept.
        package var maxConnections = 10_000
        /// Connections per client IP; 0 for no cap.
        package var maxConnectionsPerIP = 0
        /// An idle (or trickling) connection is closed after this many seconds; 0 never.
        package var connectionTimeoutSeconds = 60
        /// libmicrohttpd's memory pool per connection: it holds the request head (so it bounds the
        /// header size) and the read buffer for bodies. Upgraded sockets give theirs back at once.
        package var connectionMemoryBytes = 16_384

        package init() {}
    }

    package typealias Handler = @Sendable (HTTPRequest, HTTPResponder) -> Void

    let configuration: Configuration
    let handler: Handler
    private var daemon: OpaquePointer?
    private var socket: ListenSocket?
    /// Requests begun and not yet completed; shutdown waits for it to drain.
    let inFlight = Atomic<Int>(0)
    private let requestCounter = Atomic<UInt64>(0)
    private let requestIdPrefix: String

    package init(configuration: Configuration, handler: @escaping Handler) {
        self.configuration = configuration
        self.handler = handler
        var generator = SystemRandomNumberGenerator()
        requestIdPrefix = String(UInt32.random(in: 0x1000_0000...0xFFFF_FFFF, using: &generator), radix: 16)
    }

    /// The bound port (after `start()`).
    package var port: Int { socket?.port ?? 0 }
    package var url: String { socket?.url ?? "" }

    package func start() throws(ListenSocket.Error) {
        let socket = try ListenSocket(address: configuration.listen)
        self.socket = socket
        let flags =
            MHD_USE_INTERNAL_POLLING_THREAD.rawValue | MHD_USE_EPOLL.rawValue | MHD_ALLOW_SUSPEND_RESUME.rawValue
            | MHD_ALLOW_UPGRADE.rawValue | MHD_USE_ERROR_LOG.rawValue
        let settings = pr_mhd_settings(
            flags: UInt32(flags), listen_fd: socket.fd, thread_pool_size: UInt32(max(1, configuration.threads)),
            connection_limit: UInt32(configuration.maxConnections),
            connection_timeout_s: UInt32(configuration.connectionTimeoutSeconds),
            per_ip_connection_limit: UInt32(configuration.maxConnectionsPerIP),
            connection_memory_limit: configuration.connectionMemoryBytes)
        let context = Unmanaged.passUnretained(self).toOpaque()
        guard let daemon = pr_mhd_start(settings, accessHandler, context, completedHandler, context) else {
            close(socket.fd)
            throw .system("MHD_start_daemon", EINVAL)
        }
        self.daemon = daemon
    }

    /// Stops accepting new connections; requests on open connections still get answers.
    package func quiesce() {
        guard let daemon, let socket, !quiesced else { return }
        quiesced = true
        let listenFD = MHD_quiesce_daemon(daemon)
        if listenFD >= 0 { close(listenFD) } else { close(socket.fd) }
    }

    private var quiesced = false

    /// Stops accepting, lets in-flight requests finish (up to `drainSeconds`), then stops MHD.
    /// Upgraded sockets must have been closed before (MHD cannot stop with them open).
    package func shutdown(drainSeconds: Double = 10) {
        quiesce()
        guard let daemon else { return }
        var waited = 0.0
        while inFlight.load(ordering: .acquiring) > 0 && waited < drainSeconds {
            usleep(10_000)
            waited += 0.01
        }
        MHD_stop_daemon(daemon)
        self.daemon = nil
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

    // First call: headers only. Never queue a response here (MHD would answer `Connection: close`).
    guard let existing = contextSlot.pointee else {
        let context = RequestContext(
            method: method.map { String(cString: $0) } ?? "GET", path: url.map { String(cString: $0) } ?? "/",
            id: server.nextRequestId())
        if let length = MHD_lookup_connection_value(connection, .HEADER_KIND, "Content-Length"),
            let declared = Int(String(cString: length)), declared > server.configuration.maxBodyBytes
        {
            context.bodyTooLarge = true
        }
        server.inFlight.add(1, ordering: .relaxed)
        contextSlot.pointee = Unmanaged.passRetained(context).toOpaque()
        return .YES
    }
    let context = Unmanaged<RequestContext>.fromOpaque(existing).takeUnretainedValue()

    // Body chunks.
    if uploadDataSize.pointee > 0 {
        if !context.bodyTooLarge, let uploadData {
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

    // Resumed after an asynchronous answer.
    if context.dispatched {
        guard let response = context.takeResponse() else { return .NO }
        return queue(response, requestId: context.id, on: connection)
    }
    context.dispatched = true

    if context.bodyTooLarge {
        let limit = server.configuration.maxBodyBytes
        return queue(
            .error(413, code: "body_too_large", message: "the request body is larger than \(limit) bytes"),
            requestId: context.id, on: connection)
    }

    let request = HTTPRequest(
        method: context.method, path: context.path, query: collect(connection, .GET_ARGUMENT_KIND, lowercased: false),
        headers: collect(connection, .HEADER_KIND, lowercased: true), body: context.body, id: context.id,
        remoteAddress: describe(address: pr_mhd_client_address(connection)))
    context.body = []
    let responder = HTTPResponder(context: context, connection: connection)
    server.handler(request, responder)
    if let response = context.responseOrSuspend({ MHD_suspend_connection(connection) }) {
        return queue(response, requestId: context.id, on: connection)
    }
    return .YES
}

private let completedHandler: MHD_RequestCompletedCallback = { serverPointer, _, contextSlot, _ in
    guard let serverPointer, let contextSlot, let pointer = contextSlot.pointee else { return }
    let server = Unmanaged<HTTPServer>.fromOpaque(serverPointer).takeUnretainedValue()
    Unmanaged<RequestContext>.fromOpaque(pointer).release()
    contextSlot.pointee = nil
    server.inFlight.subtract(1, ordering: .releasing)
}

private func queue(_ response: HTTPResponse, requestId: String, on connection: OpaquePointer) -> MHD_Result {
    let created: OpaquePointer?
    var upgradeBox: UnsafeMutableRawPointer?
    if let upgrade = response.upgrade {
        let box = Unmanaged.passRetained(UpgradeBox(upgrade)).toOpaque()
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
    let iterator: MHD_KeyValueIterator = { pointer, _, key, value in
        guard let pointer, let key else { return .YES }
        let collector = Unmanaged<Collector>.fromOpaque(pointer).takeUnretainedValue()
        let name = String(cString: key)
        collector.pairs.append(
            (collector.lowercased ? name.lowercased() : name, value.map { String(cString: $0) } ?? ""))
        return .YES
    }
    withExtendedLifetime(collector) {
        _ = MHD_get_connection_values(connection, kind, iterator, Unmanaged.passUnretained(collector).toOpaque())
    }
    return collector.pairs
}
