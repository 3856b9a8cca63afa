internal import CNGHTTP2

/// The client side of one HTTP/2 connection (RFC 9113), framed by libnghttp2: requests and
/// received bytes go in, bytes to send and events come out. It owns one `nghttp2_session` and
/// no socket, so the loop that owns the (TLS) connection drives it:
///
/// - bytes read from the connection go to `receive(_:)`;
/// - while `wantsWrite`, `pendingOutput()` gives the bytes to write (the preface and SETTINGS
///   first, then requests, acknowledgements and window updates);
/// - after any call, `takeEvents()` says what happened (a connection error can surface while
///   sending too: nghttp2 finds the peer at fault while reading and says so in a GOAWAY);
/// - when `wantsRead` and `wantsWrite` are both false (and the last output is written), or
///   the connection fails or times out, the loop calls `close()` and drops the connection.
///
/// Every stream id `submit` returns gets exactly one terminal event (`.response`,
/// `.streamReset`, `.streamFailed`), so a caller can keep its requests by stream id and never
/// lose one. nghttp2 does flow control (it acknowledges what it hands over: window updates are
/// automatic) and answers the peer's PINGs and SETTINGS.
///
/// Not `Sendable`: it belongs to the thread of the loop that drives its connection.
package final class HTTP2Session {
    /// What this side announces and keeps. Every default suits APNs, whose answers are a
    /// status, an `apns-id` and at most a small JSON reason.
    package struct Settings: Sendable {
        /// SETTINGS_INITIAL_WINDOW_SIZE: how much of one answer the peer may send ahead of our
        /// window updates. 64 KiB - 1 (the protocol's default), well above an APNs answer.
        package var initialWindowSize: UInt32 = 65_535
        /// The largest answer body kept; a larger one resets its stream (`.responseTooLarge`).
        package var maxResponseBodyBytes = 64 * 1024
        /// The largest final header list kept (name + value + 32 per field, as RFC 9113
        /// counts); also announced as SETTINGS_MAX_HEADER_LIST_SIZE.
        package var maxResponseHeaderBytes = 16 * 1024
        /// The peer's MAX_CONCURRENT_STREAMS until its SETTINGS arrive: 1 lets a first request
        /// leave with the preface without risking a refusal by a stricter server.
        package var assumedMaxConcurrentStreams: UInt32 = 1

        package init() {}
    }

    /// Why `submit`, `ping` or `init` refused.
    package struct Failure: Error, Equatable, CustomStringConvertible {
        package enum Code: Sendable, Equatable {
            /// The peer's MAX_CONCURRENT_STREAMS streams are in flight: wait for a terminal
            /// event or use another connection.
            case streamLimit
            /// The peer sent GOAWAY, or stream ids ran out: new requests need a new connection.
            case goingAway
            /// The session is closed (connection error or `close()`).
            case closed
            /// A header HTTP/2 cannot carry (not a token, connection-specific, control bytes).
            case invalidHeader
            /// libnghttp2 refused (out of memory, a setting out of range).
            case library
        }

        package var code: Code
        package var message: String
        package var description: String { message }
    }

    package let settings: Settings
    private let session: OpaquePointer
    private let state: HTTP2SessionState

    /// Creates the session and queues the client preface and our SETTINGS (no server push,
    /// `settings`' window and header list size).
    package init(settings: Settings = Settings()) throws(Failure) {
        self.settings = settings
        let state = HTTP2SessionState(
            maxHeaderBytes: max(0, settings.maxResponseHeaderBytes),
            maxBodyBytes: max(0, settings.maxResponseBodyBytes))
        self.state = state
        session = try Self.clientSession(state, peerStreams: settings.assumedMaxConcurrentStreams)
        let entries = [
            nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_ENABLE_PUSH.rawValue), value: 0),
            nghttp2_settings_entry(
                settings_id: Int32(NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE.rawValue), value: settings.initialWindowSize),
            nghttp2_settings_entry(
                settings_id: Int32(NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE.rawValue),
                value: UInt32(clamping: settings.maxResponseHeaderBytes)),
        ]
        // Throwing here still runs deinit (every stored property is set), which deletes the session.
        try Self.check(nghttp2_submit_settings(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), entries, entries.count))
    }

    deinit { nghttp2_session_del(session) }

    private static func clientSession(_ state: HTTP2SessionState, peerStreams: UInt32) throws(Failure) -> OpaquePointer
    {
        var callbacks: OpaquePointer?
        try check(nghttp2_session_callbacks_new(&callbacks))
        guard let callbacks else { throw Failure(code: .library, message: "nghttp2: no callbacks") }
        defer { nghttp2_session_callbacks_del(callbacks) }
        HTTP2SessionState.install(into: callbacks)
        var options: OpaquePointer?
        try check(nghttp2_option_new(&options))
        guard let options else { throw Failure(code: .library, message: "nghttp2: no options") }
        defer { nghttp2_option_del(options) }
        nghttp2_option_set_peer_max_concurrent_streams(options, peerStreams)
        var session: OpaquePointer?
        let context = Unmanaged.passUnretained(state).toOpaque()
        try check(nghttp2_session_client_new2(&session, callbacks, context, options))
        guard let session else { throw Failure(code: .library, message: "nghttp2: no session") }
        return session
    }

    private static func check(_ result: Int32) throws(Failure) {
        guard result == 0 else {
            throw Failure(code: .library, message: "nghttp2: \(String(cString: nghttp2_strerror(result)))")
        }
    }

    // MARK: State

    /// Requests `submit` accepts now: the peer's MAX_CONCURRENT_STREAMS (assumed until its
    /// SETTINGS arrive) minus the streams in flight (sent or still queued); 0 once going away.
    package var availableStreams: Int {
        guard state.phase == .open else { return 0 }
        let limit = Int(nghttp2_session_get_remote_settings(session, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS))
        return max(0, limit - state.streams.count)
    }

    /// Streams submitted and not yet ended by a terminal event.
    package var openStreams: Int { state.streams.count }

    /// The highest stream id handed out so far (0 before the first request).
    package private(set) var lastStreamId: Int32 = 0

    /// The peer sent GOAWAY: no new requests here (those in flight may still end normally).
    package var isGoingAway: Bool { state.phase == .goingAway }

    package var isClosed: Bool { state.phase == .closed }

    /// The session still expects bytes from the peer.
    package var wantsRead: Bool { state.phase != .closed && nghttp2_session_want_read(session) != 0 }

    /// The session has bytes to send (`pendingOutput()`).
    package var wantsWrite: Bool { state.phase != .closed && nghttp2_session_want_write(session) != 0 }

    /// A PING is out and its ACK has not come back.
    package var awaitingPingAck: Bool {
        if case .awaiting = state.ping { return true }
        return false
    }

    // MARK: Driving

    /// Queues a request and returns its stream id (its bytes leave with `pendingOutput()`).
    /// Header names are lower-cased (HTTP/2 needs it); a field HTTP/2 cannot carry is refused
    /// (`.invalidHeader`) here rather than reset by the peer; pseudo-headers come from the
    /// arguments. An empty `body` ends the stream with the HEADERS frame. Refused with
    /// `.streamLimit` while `availableStreams` is 0, `.goingAway` after a GOAWAY.
    package func submit(
        method: String, authority: String, path: String, scheme: String = "https",
        headers: [(name: String, value: String)] = [], body: [UInt8] = []
    ) throws(Failure) -> Int32 {
        switch state.phase {
        case .open: break
        case .goingAway: throw Failure(code: .goingAway, message: "the peer is closing the connection")
        case .closed: throw Failure(code: .closed, message: "the connection is closed")
        }
        guard availableStreams > 0 else {
            throw Failure(code: .streamLimit, message: "the peer's concurrent stream limit is reached")
        }
        let fields = try HTTP2HeaderBlock(
            method: method, scheme: scheme, authority: authority, path: path, headers: headers)
        var provider = HTTP2SessionState.bodyProvider()
        let id = fields.withFields { nva in
            body.isEmpty
                ? nghttp2_submit_request(session, nil, nva.baseAddress, nva.count, nil, nil)
                : nghttp2_submit_request(session, nil, nva.baseAddress, nva.count, &provider, nil)
        }
        guard id > 0 else {
            if id == NGHTTP2_ERR_STREAM_ID_NOT_AVAILABLE.rawValue {
                // 2^31 streams later: this connection is done, like after a GOAWAY.
                state.phase = .goingAway
                throw Failure(code: .goingAway, message: "stream ids are exhausted")
            }
            throw Failure(code: .library, message: "nghttp2: \(String(cString: nghttp2_strerror(id)))")
        }
        state.streams[id] = .init(body: body)
        lastStreamId = id
        return id
    }

    /// Feeds bytes read from the connection. Events follow in `takeEvents()`; answers the peer
    /// expects (SETTINGS and PING acknowledgements, window updates) in `pendingOutput()`.
    package func receive(_ bytes: UnsafeRawBufferPointer) {
        guard state.phase != .closed, let base = bytes.baseAddress, !bytes.isEmpty else { return }
        // mem_recv consumes everything unless it fails (we never pause it).
        let result = nghttp2_session_mem_recv(session, base.assumingMemoryBound(to: UInt8.self), bytes.count)
        if result < 0 {
            let code = Int32(clamping: result)
            state.close(.library(code: code, message: String(cString: nghttp2_strerror(code))))
        }
    }

    /// The bytes to write next, at most about `limit` of them (nghttp2 hands out whole frames,
    /// so the last one may pass it); nil when there is nothing to send.
    package func pendingOutput(limit: Int = 64 * 1024) -> [UInt8]? {
        var output: [UInt8] = []
        // A GOAWAY that closes the state is still returned: the peer should learn why.
        while state.phase != .closed, output.count < limit {
            var data: UnsafePointer<UInt8>?
            let count = nghttp2_session_mem_send(session, &data)
            if count < 0 {
                let code = Int32(clamping: count)
                state.close(.library(code: code, message: String(cString: nghttp2_strerror(code))))
                return nil
            }
            guard count > 0, let data else { break }
            output.append(contentsOf: UnsafeBufferPointer(start: data, count: count))
        }
        return output.isEmpty ? nil : output
    }

    /// The events since the last call, in order.
    package func takeEvents() -> [Event] {
        defer { state.events = [] }
        return state.events
    }

    /// Sends a PING unless one is already awaiting its ACK (a `.pingAck` event, and
    /// `awaitingPingAck` false again). An idle connection's way to find a dead peer.
    package func ping() throws(Failure) {
        guard state.phase != .closed else { throw Failure(code: .closed, message: "the connection is closed") }
        if case .awaiting = state.ping { return }
        // A fresh payload per PING, so a late ACK of an earlier one is not taken for this one.
        state.pingPayload &+= 1
        let payload = state.pingPayload
        let result = withUnsafeBytes(of: payload) { bytes in
            nghttp2_submit_ping(
                session, UInt8(NGHTTP2_FLAG_NONE.rawValue), bytes.baseAddress?.assumingMemoryBound(to: UInt8.self))
        }
        try Self.check(result)
        state.ping = .awaiting(payload)
    }

    /// The connection is gone or being dropped (end of input, an I/O error, a timeout): every
    /// stream in flight ends as `.connectionLost`, and nghttp2 is not called again. (After a
    /// connection error the streams have already ended; this only stops the session.)
    package func close() {
        state.close(nil)
    }
}
