import CNGHTTP2
import RelayTransport

/// The server side of an HTTP/2 connection on an nghttp2 server session, in memory: the peer
/// `HTTP2Session`'s tests talk to. It records every request and answers as `answer` says, at
/// once or (`.hold`) when the test calls `respond`; `exchange(with:)` carries the bytes.
final class HTTP2TestServer {
    struct Request {
        var streamId: Int32
        var headers: [(name: String, value: String)] = []
        var body: [UInt8] = []

        func header(_ name: String) -> String? { headers.first { $0.name == name }?.value }
    }

    enum Answer {
        case respond(status: Int, headers: [(String, String)] = [], body: [UInt8] = [])
        case reset(errorCode: UInt32)
        /// No answer yet: the test calls `respond` or `reset` later.
        case hold
    }

    struct SetupFailed: Error {}

    /// What the callbacks share; `user_data` of the session, unretained (the server holds it
    /// and deletes the session in deinit).
    final class State {
        let answer: (Request) -> Answer
        var partial: [Int32: Request] = [:]
        /// Complete requests in arrival order.
        var requests: [Request] = []
        /// Answer bodies being served: bytes and how many have left.
        var bodies: [Int32: (bytes: [UInt8], sent: Int)] = [:]
        /// How each stream closed on this side (error code).
        var closes: [Int32: UInt32] = [:]

        init(answer: @escaping (Request) -> Answer) { self.answer = answer }

        static func from(_ pointer: UnsafeMutableRawPointer?) -> State? {
            pointer.map { Unmanaged<State>.fromOpaque($0).takeUnretainedValue() }
        }

        /// Calls `body` with `fields` as nghttp2 takes them (valid during the call).
        static func withFields(_ fields: [(String, String)], _ body: (UnsafeBufferPointer<nghttp2_nv>) -> Void) {
            var storage: [UInt8] = []
            var spans: [(name: Range<Int>, value: Range<Int>)] = []
            for (name, value) in fields {
                let nameStart = storage.count
                storage += name.utf8
                let valueStart = storage.count
                storage += value.utf8
                spans.append((nameStart..<valueStart, valueStart..<storage.count))
            }
            storage.withUnsafeBufferPointer { bytes in
                let nva = spans.map {
                    pr_nghttp2_nv(
                        bytes.baseAddress?.advanced(by: $0.name.lowerBound), $0.name.count,
                        bytes.baseAddress?.advanced(by: $0.value.lowerBound), $0.value.count)
                }
                nva.withUnsafeBufferPointer(body)
            }
        }

        func respond(
            _ session: OpaquePointer?, _ streamId: Int32, status: Int, headers: [(String, String)], body: [UInt8]
        ) {
            guard !body.isEmpty else {
                State.withFields([(":status", String(status))] + headers) { nva in
                    _ = nghttp2_submit_response(session, streamId, nva.baseAddress, nva.count, nil)
                }
                return
            }
            bodies[streamId] = (body, 0)
            var provider = nghttp2_data_provider(source: nghttp2_data_source(ptr: nil)) {
                _, streamId, buffer, length, flags, _, user in
                guard let buffer, let state = State.from(user), let body = state.bodies[streamId] else {
                    return Int(NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue)
                }
                let count = min(length, body.bytes.count - body.sent)
                body.bytes.withUnsafeBufferPointer { bytes in
                    if let base = bytes.baseAddress, count > 0 { buffer.update(from: base + body.sent, count: count) }
                }
                state.bodies[streamId]?.sent = body.sent + count
                if body.sent + count == body.bytes.count { flags?.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue }
                return count
            }
            State.withFields([(":status", String(status))] + headers) { nva in
                _ = nghttp2_submit_response(session, streamId, nva.baseAddress, nva.count, &provider)
            }
        }

        func complete(_ session: OpaquePointer?, _ streamId: Int32) {
            guard let request = partial.removeValue(forKey: streamId) else { return }
            requests.append(request)
            switch answer(request) {
            case .respond(let status, let headers, let body):
                respond(session, streamId, status: status, headers: headers, body: body)
            case .reset(let errorCode):
                _ = nghttp2_submit_rst_stream(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), streamId, errorCode)
            case .hold:
                break
            }
        }
    }

    private let session: OpaquePointer
    private let state: State

    /// `maxConcurrentStreams`: announced in the server's SETTINGS (none: unlimited).
    init(maxConcurrentStreams: UInt32? = nil, answer: @escaping (Request) -> Answer = { _ in .hold }) throws {
        state = State(answer: answer)
        var callbacks: OpaquePointer?
        guard nghttp2_session_callbacks_new(&callbacks) == 0, let callbacks else { throw SetupFailed() }
        defer { nghttp2_session_callbacks_del(callbacks) }
        nghttp2_session_callbacks_set_on_begin_headers_callback(callbacks) { _, frame, user in
            if let frame, let state = State.from(user), frame.pointee.headers.cat == NGHTTP2_HCAT_REQUEST {
                state.partial[frame.pointee.hd.stream_id] = Request(streamId: frame.pointee.hd.stream_id)
            }
            return 0
        }
        nghttp2_session_callbacks_set_on_header_callback(callbacks) {
            _, frame, name, nameLength, value, valueLength, _, user in
            guard let frame, let state = State.from(user) else { return 0 }
            let field = (
                name: String(decoding: UnsafeBufferPointer(start: name, count: nameLength), as: UTF8.self),
                value: String(decoding: UnsafeBufferPointer(start: value, count: valueLength), as: UTF8.self)
            )
            state.partial[frame.pointee.hd.stream_id]?.headers.append(field)
            return 0
        }
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks) { _, _, streamId, data, length, user in
            State.from(user)?.partial[streamId]?.body += UnsafeBufferPointer(start: data, count: length)
            return 0
        }
        nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks) { session, frame, user in
            guard let frame, let state = State.from(user) else { return 0 }
            let type = UInt32(frame.pointee.hd.type)
            let endStream = frame.pointee.hd.flags & UInt8(NGHTTP2_FLAG_END_STREAM.rawValue) != 0
            if endStream, type == NGHTTP2_HEADERS.rawValue || type == NGHTTP2_DATA.rawValue {
                state.complete(session, frame.pointee.hd.stream_id)
            }
            return 0
        }
        nghttp2_session_callbacks_set_on_stream_close_callback(callbacks) { _, streamId, errorCode, user in
            State.from(user)?.closes[streamId] = errorCode
            return 0
        }
        var session: OpaquePointer?
        guard nghttp2_session_server_new(&session, callbacks, Unmanaged.passUnretained(state).toOpaque()) == 0,
            let session
        else { throw SetupFailed() }
        self.session = session
        let entries = maxConcurrentStreams.map {
            [nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS.rawValue), value: $0)]
        }
        guard nghttp2_submit_settings(session, 0, entries ?? [], entries?.count ?? 0) == 0 else { throw SetupFailed() }
    }

    deinit { nghttp2_session_del(session) }

    /// Complete requests in arrival order.
    var requests: [Request] { state.requests }

    /// The error code each stream closed with on the server's side (CANCEL when the client reset it).
    var closes: [Int32: UInt32] { state.closes }

    /// Feeds the client's bytes; nghttp2's result (negative: it gave up).
    @discardableResult
    func receive(_ bytes: [UInt8]) -> Int {
        nghttp2_session_mem_recv(session, bytes, bytes.count)
    }

    func pendingOutput() -> [UInt8] {
        var output: [UInt8] = []
        while true {
            var data: UnsafePointer<UInt8>?
            let count = nghttp2_session_mem_send(session, &data)
            guard count > 0, let data else { return output }
            output += UnsafeBufferPointer(start: data, count: count)
        }
    }

    func respond(to streamId: Int32, status: Int, headers: [(String, String)] = [], body: [UInt8] = []) {
        state.respond(session, streamId, status: status, headers: headers, body: body)
    }

    /// An informational (1xx) head before the answer.
    func inform(_ streamId: Int32, status: Int) {
        State.withFields([(":status", String(status))]) { nva in
            _ = nghttp2_submit_headers(
                session, UInt8(NGHTTP2_FLAG_NONE.rawValue), streamId, nil, nva.baseAddress, nva.count, nil)
        }
    }

    func reset(_ streamId: Int32, errorCode: UInt32) {
        _ = nghttp2_submit_rst_stream(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), streamId, errorCode)
    }

    func goAway(lastStreamId: Int32, errorCode: UInt32 = NGHTTP2_NO_ERROR.rawValue, debug: String = "") {
        let bytes = Array(debug.utf8)
        _ = nghttp2_submit_goaway(
            session, UInt8(NGHTTP2_FLAG_NONE.rawValue), lastStreamId, errorCode, bytes, bytes.count)
    }

    /// Carries bytes both ways until neither side has any to send; the client's events meanwhile.
    func exchange(with client: HTTP2Session) -> [HTTP2Session.Event] {
        var events: [HTTP2Session.Event] = []
        for _ in 0..<1000 {
            let request = client.pendingOutput()
            if let request { receive(request) }
            let answer = pendingOutput()
            answer.withUnsafeBytes { client.receive($0) }
            events += client.takeEvents()
            if request == nil && answer.isEmpty { break }
        }
        return events
    }
}
