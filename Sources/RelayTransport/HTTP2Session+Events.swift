extension HTTP2Session {
    /// What happened on the connection; `takeEvents()` hands them out in the order they happened.
    ///
    /// `.response`, `.streamReset` and `.streamFailed` are terminal: each stream id `submit`
    /// returned gets exactly one of them.
    package enum Event: Sendable, Equatable {
        /// The stream ended normally with a final answer.
        case response(Response)
        /// The stream was reset (RST_STREAM from the peer, or by nghttp2 for a malformed answer).
        /// `refused`: the server did not process the request — REFUSED_STREAM, a stream above a
        /// GOAWAY's last stream id, or a request that never left — so it is safe to send again.
        case streamReset(streamId: Int32, errorCode: UInt32, refused: Bool)
        /// The stream ended for a reason of this side (see `StreamFailure`).
        case streamFailed(streamId: Int32, StreamFailure)
        /// The peer is closing the connection: streams up to `lastStreamId` may still end
        /// normally; those above it come as refused `.streamReset`s right after this event.
        /// `submit` refuses from now on.
        case goAway(lastStreamId: Int32, errorCode: UInt32, debug: String)
        /// The peer's SETTINGS arrived (the first one follows its preface): `availableStreams`
        /// may have changed.
        case peerSettings(maxConcurrentStreams: Int)
        /// The peer acknowledged our outstanding PING.
        case pingAck
        /// The connection is unusable; streams still in flight follow as `.connectionLost`
        /// (`close()` still belongs to the caller).
        case connectionError(ConnectionFailure)

        /// The stream a terminal event ends; nil for connection-level events.
        package var terminalStreamId: Int32? {
            switch self {
            case .response(let response): response.streamId
            case .streamReset(let streamId, _, _), .streamFailed(let streamId, _): streamId
            case .goAway, .peerSettings, .pingAck, .connectionError: nil
            }
        }
    }

    /// A final answer (informational 1xx heads are skipped; trailers are not kept).
    package struct Response: Sendable, Equatable {
        package var streamId: Int32
        package var status: Int
        /// Regular header fields in arrival order; names are lower case (HTTP/2 requires it).
        package var headers: [(name: String, value: String)]
        package var body: [UInt8]

        package init(streamId: Int32, status: Int, headers: [(name: String, value: String)], body: [UInt8]) {
            self.streamId = streamId
            self.status = status
            self.headers = headers
            self.body = body
        }

        /// The first value of header `name` (lower case).
        package func header(_ name: String) -> String? {
            headers.first { $0.name == name }?.value
        }

        package static func == (lhs: Response, rhs: Response) -> Bool {
            lhs.streamId == rhs.streamId && lhs.status == rhs.status && lhs.body == rhs.body
                && lhs.headers.elementsEqual(rhs.headers) { $0.name == $1.name && $0.value == $1.value }
        }
    }

    /// Why a stream ended without an answer, on this side's account.
    package enum StreamFailure: Sendable, Equatable {
        /// The answer's header list or body passed `Settings`' limits; the stream was reset
        /// (CANCEL). The server did process the request.
        case responseTooLarge
        /// nghttp2 could not send the request's HEADERS (e.g. a header block larger than it
        /// sends); the server never saw it, but sending it again would fail the same way.
        case requestRejected(String)
        /// The connection ended first (`close()` or a connection error). `requestSent` false:
        /// the request's HEADERS never left this side, so the server cannot have acted on it.
        /// True: it may or may not have (the bytes may also have died in the caller's hands).
        case connectionLost(requestSent: Bool)
    }

    /// Why the connection is unusable.
    package enum ConnectionFailure: Sendable, Equatable {
        /// The peer broke the protocol (RFC 9113 connection error); this side sent a GOAWAY
        /// with `errorCode` and `reason`, as nghttp2 worded it.
        case protocolError(errorCode: UInt32, reason: String)
        /// libnghttp2 gave up on the session (a fatal error code: flooding, out of memory).
        case library(code: Int32, message: String)
    }
}
