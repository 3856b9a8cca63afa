internal import CNGHTTP2

/// What `HTTP2Session`'s nghttp2 callbacks read and write: the streams in flight, the events
/// not yet taken, the connection's phase. nghttp2 gets it as `user_data`, unretained: the
/// session object holds it in a `let` and deletes the `nghttp2_session` in its `deinit`, before
/// its stored properties are released, and nghttp2 only calls back from inside calls that
/// object makes (`nghttp2_session_del` calls none), so the pointer outlives every callback.
final class HTTP2SessionState {
    enum Phase {
        case open
        /// The peer sent GOAWAY (or stream ids ran out): streams in flight may finish, no new ones.
        case goingAway
        /// A connection error or `close()`: nghttp2 is not called again.
        case closed
    }

    enum Ping {
        case idle
        /// Sent with this payload; an ACK must echo it.
        case awaiting(UInt64)
    }

    /// One request in flight, from `submit` to its terminal event. A class: the callbacks change
    /// it field by field, several times per response, and each would otherwise be a lookup.
    final class Stream {
        /// The request body; emptied once nghttp2 has read all of it.
        var body: [UInt8]
        var bodyOffset = 0
        /// nghttp2 has serialized the request's HEADERS (handed out by `pendingOutput`).
        var requestSent = false
        var status: Int?
        /// A response head is being read (not trailers): its fields are kept.
        var readingHead = false
        var headers: [(name: String, value: String)] = []
        /// RFC 9113 §6.5.2 accounting of the final head: name + value + 32 per field.
        var headerBytes = 0
        var responseBody: [UInt8] = []
        /// END_STREAM arrived: the answer is complete.
        var ended = false
        /// A verdict of this side that wins over the close's error code.
        var failure: HTTP2Session.StreamFailure?

        init(body: [UInt8]) { self.body = body }
    }

    let maxHeaderBytes: Int
    let maxBodyBytes: Int
    var phase = Phase.open
    var ping = Ping.idle
    var pingPayload: UInt64 = 0
    var streams: [Int32: Stream] = [:]
    var events: [HTTP2Session.Event] = []
    /// nghttp2's last complaint (error callback), the reason of a connection error when its
    /// GOAWAY carries none.
    var lastComplaint = ""

    init(maxHeaderBytes: Int, maxBodyBytes: Int) {
        self.maxHeaderBytes = maxHeaderBytes
        self.maxBodyBytes = maxBodyBytes
    }

    /// The connection is over: reports `failure` (if any), then every stream still in flight as
    /// `.connectionLost`, lowest id first.
    func close(_ failure: HTTP2Session.ConnectionFailure?) {
        guard phase != .closed else { return }
        phase = .closed
        if let failure { events.append(.connectionError(failure)) }
        for (id, stream) in streams.sorted(by: { $0.key < $1.key }) {
            events.append(.streamFailed(streamId: id, .connectionLost(requestSent: stream.requestSent)))
        }
        streams = [:]
    }

    // MARK: Callbacks (each runs inside an nghttp2 call made by HTTP2Session)

    private func beginHeaders(_ frame: nghttp2_frame) {
        let id = frame.hd.stream_id
        guard frame.hd.type == UInt8(NGHTTP2_HEADERS.rawValue), let stream = streams[id] else { return }
        // nghttp2 files the first head under HCAT_RESPONSE and any later block under HCAT_HEADERS:
        // after a 1xx head that is the final head, otherwise trailers (not kept).
        let informational = stream.status.map { (100..<200).contains($0) } ?? false
        guard frame.headers.cat == NGHTTP2_HCAT_RESPONSE || informational else { return }
        stream.readingHead = true
        stream.status = nil
        stream.headers = []
        stream.headerBytes = 0
    }

    /// Returns 0, or NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE to have nghttp2 reset the stream.
    private func header(_ id: Int32, name: UnsafeBufferPointer<UInt8>, value: UnsafeBufferPointer<UInt8>) -> Int32 {
        guard let stream = streams[id], stream.readingHead else { return 0 }
        let used = stream.headerBytes
        // `used` never exceeds the limit, so `room` is not negative and nothing below overflows.
        let room = maxHeaderBytes - used
        guard name.count <= room, value.count <= room - name.count, 32 <= room - name.count - value.count else {
            stream.failure = .responseTooLarge
            return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue
        }
        stream.headerBytes = used + name.count + value.count + 32
        if name.first == UInt8(ascii: ":") {
            // (nghttp2 lets no other pseudo-header through in a response.)
            if name.elementsEqual(":status".utf8) { stream.status = Self.statusCode(value) }
        } else {
            stream.headers.append((String(decoding: name, as: UTF8.self), String(decoding: value, as: UTF8.self)))
        }
        return 0
    }

    /// Three digits, as nghttp2 has checked them to be (read without making a string of them).
    private static func statusCode(_ digits: UnsafeBufferPointer<UInt8>) -> Int? {
        guard digits.count == 3, digits.allSatisfy({ (0x30...0x39).contains($0) }) else { return nil }
        return digits.reduce(0) { $0 * 10 + Int($1 - 0x30) }
    }

    private func dataChunk(_ session: OpaquePointer?, streamId: Int32, _ data: UnsafeBufferPointer<UInt8>) {
        guard let stream = streams[streamId], stream.failure == nil else { return }
        // The body never exceeds the limit, so the subtraction cannot go negative.
        guard data.count <= maxBodyBytes - stream.responseBody.count else {
            stream.failure = .responseTooLarge
            stream.responseBody = []
            // Refusing more is all a client can do; the close reports `.responseTooLarge`.
            _ = nghttp2_submit_rst_stream(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), streamId, NGHTTP2_CANCEL.rawValue)
            return
        }
        stream.responseBody.append(contentsOf: data)
    }

    private func frameReceived(_ session: OpaquePointer?, _ frame: nghttp2_frame) {
        let endStream = frame.hd.flags & UInt8(NGHTTP2_FLAG_END_STREAM.rawValue) != 0
        let ack = frame.hd.flags & UInt8(NGHTTP2_FLAG_ACK.rawValue) != 0
        switch UInt32(frame.hd.type) {
        case NGHTTP2_HEADERS.rawValue, NGHTTP2_DATA.rawValue:
            guard let stream = streams[frame.hd.stream_id] else { break }
            stream.readingHead = false
            if endStream { stream.ended = true }
        case NGHTTP2_SETTINGS.rawValue where !ack:
            // nghttp2 has applied the SETTINGS before it reports them.
            let limit = nghttp2_session_get_remote_settings(session, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS)
            events.append(.peerSettings(maxConcurrentStreams: Int(limit)))
        case NGHTTP2_PING.rawValue where ack:
            let payload = withUnsafeBytes(of: frame.ping.opaque_data) { $0.loadUnaligned(as: UInt64.self) }
            // An ACK that does not echo our PING proves nothing about the path.
            if case .awaiting(let sent) = ping, sent == payload {
                ping = .idle
                events.append(.pingAck)
            }
        case NGHTTP2_GOAWAY.rawValue:
            if phase == .open { phase = .goingAway }
            let debug = frame.goaway.opaque_data.map {
                String(decoding: UnsafeBufferPointer(start: $0, count: frame.goaway.opaque_data_len), as: UTF8.self)
            }
            events.append(
                .goAway(
                    lastStreamId: frame.goaway.last_stream_id, errorCode: frame.goaway.error_code, debug: debug ?? ""))
        default:
            break
        }
    }

    private func frameSent(_ frame: nghttp2_frame) {
        if frame.hd.type == UInt8(NGHTTP2_HEADERS.rawValue), let stream = streams[frame.hd.stream_id] {
            stream.requestSent = true
            return
        }
        // A client sends GOAWAY only when nghttp2 terminates the session over a peer's
        // protocol error; with it sent, nghttp2 wants neither to read nor to write.
        guard frame.hd.type == UInt8(NGHTTP2_GOAWAY.rawValue), frame.goaway.error_code != NGHTTP2_NO_ERROR.rawValue
        else { return }
        let debug = frame.goaway.opaque_data.map {
            String(decoding: UnsafeBufferPointer(start: $0, count: frame.goaway.opaque_data_len), as: UTF8.self)
        }
        close(.protocolError(errorCode: frame.goaway.error_code, reason: debug ?? lastComplaint))
    }

    private func frameNotSent(_ frame: nghttp2_frame, error: Int32) {
        // After GOAWAY nghttp2 refuses to open streams: the close that follows says REFUSED_STREAM,
        // which is true. Any other reason would be retried forever under that code.
        guard frame.hd.type == UInt8(NGHTTP2_HEADERS.rawValue), error != NGHTTP2_ERR_START_STREAM_NOT_ALLOWED.rawValue,
            let stream = streams[frame.hd.stream_id]
        else { return }
        stream.failure = .requestRejected(String(cString: nghttp2_strerror(error)))
    }

    private func streamClosed(_ id: Int32, errorCode: UInt32) {
        guard let stream = streams.removeValue(forKey: id) else { return }
        if let failure = stream.failure {
            events.append(.streamFailed(streamId: id, failure))
        } else if errorCode == NGHTTP2_NO_ERROR.rawValue, stream.ended, let status = stream.status {
            events.append(
                .response(.init(streamId: id, status: status, headers: stream.headers, body: stream.responseBody)))
        } else {
            events.append(
                .streamReset(streamId: id, errorCode: errorCode, refused: errorCode == NGHTTP2_REFUSED_STREAM.rawValue))
        }
    }

    /// Serves a request body to nghttp2 (the data provider's read callback).
    private func readBody(streamId: Int32, into buffer: UnsafeMutablePointer<UInt8>, length: Int) -> (Int, eof: Bool)? {
        guard let stream = streams[streamId], stream.bodyOffset <= stream.body.count else { return nil }
        let count = min(length, stream.body.count - stream.bodyOffset)
        stream.body.withUnsafeBufferPointer { body in
            guard let base = body.baseAddress, count > 0 else { return }
            buffer.update(from: base + stream.bodyOffset, count: count)
        }
        let offset = stream.bodyOffset + count
        let eof = offset == stream.body.count
        // The body is not needed once it has left: keep no copy for the rest of the stream's life.
        if eof { stream.body = [] }
        stream.bodyOffset = eof ? 0 : offset
        return (count, eof)
    }

    // MARK: Wiring into C

    private static func from(_ pointer: UnsafeMutableRawPointer?) -> HTTP2SessionState? {
        pointer.map { Unmanaged<HTTP2SessionState>.fromOpaque($0).takeUnretainedValue() }
    }

    /// Sets the callbacks that feed this type.
    static func install(into callbacks: OpaquePointer) {
        nghttp2_session_callbacks_set_on_begin_headers_callback(callbacks) { _, frame, user in
            if let frame, let state = HTTP2SessionState.from(user) { state.beginHeaders(frame.pointee) }
            return 0
        }
        nghttp2_session_callbacks_set_on_header_callback(callbacks) {
            _, frame, name, nameLength, value, valueLength, _, user in
            guard let frame, let state = HTTP2SessionState.from(user) else { return 0 }
            return state.header(
                frame.pointee.hd.stream_id, name: UnsafeBufferPointer(start: name, count: nameLength),
                value: UnsafeBufferPointer(start: value, count: valueLength))
        }
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks) {
            session, _, streamId, data, length, user in
            HTTP2SessionState.from(user)?.dataChunk(
                session, streamId: streamId, UnsafeBufferPointer(start: data, count: length))
            return 0
        }
        nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks) { session, frame, user in
            if let frame, let state = HTTP2SessionState.from(user) { state.frameReceived(session, frame.pointee) }
            return 0
        }
        nghttp2_session_callbacks_set_on_frame_send_callback(callbacks) { _, frame, user in
            if let frame, let state = HTTP2SessionState.from(user) { state.frameSent(frame.pointee) }
            return 0
        }
        nghttp2_session_callbacks_set_on_frame_not_send_callback(callbacks) { _, frame, error, user in
            if let frame, let state = HTTP2SessionState.from(user) { state.frameNotSent(frame.pointee, error: error) }
            return 0
        }
        nghttp2_session_callbacks_set_on_stream_close_callback(callbacks) { _, streamId, errorCode, user in
            HTTP2SessionState.from(user)?.streamClosed(streamId, errorCode: errorCode)
            return 0
        }
        nghttp2_session_callbacks_set_error_callback2(callbacks) { _, _, message, length, user in
            if let message, let state = HTTP2SessionState.from(user) {
                let bytes = UnsafeRawBufferPointer(start: message, count: length)
                state.lastComplaint = String(decoding: bytes, as: UTF8.self)
            }
            return 0
        }
    }

    /// The data provider for a request body; the stream id finds the body.
    static func bodyProvider() -> nghttp2_data_provider {
        nghttp2_data_provider(source: nghttp2_data_source(ptr: nil)) { _, streamId, buffer, length, flags, _, user in
            guard let buffer, let state = HTTP2SessionState.from(user),
                let (count, eof) = state.readBody(streamId: streamId, into: buffer, length: length)
            else { return Int(NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue) }
            if eof { flags?.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue }
            return count
        }
    }
}
