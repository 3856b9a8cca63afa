import CNGHTTP2
import RelayTransport
import Testing

/// `HTTP2Session` (the client) against an nghttp2 server session in the same process
/// (`HTTP2TestServer`): the bytes are carried in memory, so every frame is real but no socket is.
@Suite struct HTTP2SessionTests {
    private static let refused = NGHTTP2_REFUSED_STREAM.rawValue

    /// A client whose preface and the server's SETTINGS have been exchanged.
    private func connected(
        _ server: HTTP2TestServer, _ settings: HTTP2Session.Settings = .init()
    ) throws
        -> HTTP2Session
    {
        let client = try HTTP2Session(settings: settings)
        _ = server.exchange(with: client)
        return client
    }

    private func post(
        _ client: HTTP2Session, _ path: String, body: String = "{}"
    ) throws(HTTP2Session.Failure)
        -> Int32
    {
        try client.submit(
            method: "POST", authority: "api.push.apple.com", path: path,
            headers: [("apns-topic", "org.example.app")], body: Array(body.utf8))
    }

    /// The code `submit` refused with; nil if it accepted.
    private func refusal(_ submit: () throws(HTTP2Session.Failure) -> Int32) -> HTTP2Session.Failure.Code? {
        do {
            _ = try submit()
            return nil
        } catch {
            return error.code
        }
    }

    @Test func oneRequestGetsItsAnswer() throws {
        let server = try HTTP2TestServer { _ in
            .respond(
                status: 200, headers: [("apns-id", "EC1BF194-B3B2-424A-89A9-5A918A6E6B5D")], body: Array("ok".utf8))
        }
        let client = try HTTP2Session()
        #expect(client.wantsWrite)
        let id = try client.submit(
            method: "POST", authority: "api.push.apple.com", path: "/3/device/abcd",
            headers: [("APNs-Topic", "org.example.app"), ("apns-push-type", "alert")],
            body: Array(#"{"aps":{"alert":"hi"}}"#.utf8))
        #expect(id == 1)
        #expect(client.openStreams == 1)

        let events = server.exchange(with: client)
        #expect(events.contains(.peerSettings(maxConcurrentStreams: Int(UInt32.max))))
        let response = HTTP2Session.Response(
            streamId: id, status: 200, headers: [("apns-id", "EC1BF194-B3B2-424A-89A9-5A918A6E6B5D")],
            body: Array("ok".utf8))
        #expect(events.filter { $0.terminalStreamId != nil } == [.response(response)])

        let request = try #require(server.requests.first)
        #expect(request.header(":method") == "POST")
        #expect(request.header(":scheme") == "https")
        #expect(request.header(":authority") == "api.push.apple.com")
        #expect(request.header(":path") == "/3/device/abcd")
        #expect(request.header("apns-topic") == "org.example.app")
        #expect(request.header("apns-push-type") == "alert")
        #expect(request.body == Array(#"{"aps":{"alert":"hi"}}"#.utf8))
        #expect(client.openStreams == 0)
        #expect(client.wantsRead && !client.wantsWrite)
    }

    @Test func concurrentStreamsAreMatchedToTheirIds() throws {
        let server = try HTTP2TestServer()
        let client = try connected(server)
        var paths: [Int32: String] = [:]
        for index in 0..<20 {
            let path = "/3/device/\(index)"
            paths[try post(client, path)] = path
        }
        #expect(Set(paths.keys).count == 20)
        #expect(server.exchange(with: client).isEmpty)
        #expect(server.requests.count == 20)
        // Answered out of order, each with its own path as the body.
        for request in server.requests.reversed() {
            server.respond(to: request.streamId, status: 200, body: Array((request.header(":path") ?? "").utf8))
        }
        let events = server.exchange(with: client)
        #expect(events.count == 20)
        for event in events {
            guard case .response(let response) = event else {
                Issue.record("unexpected \(event)")
                continue
            }
            #expect(paths[response.streamId].map { Array($0.utf8) } == response.body)
        }
        #expect(client.openStreams == 0)
    }

    @Test func thePeersStreamLimitIsKept() throws {
        let server = try HTTP2TestServer(maxConcurrentStreams: 2)
        let client = try HTTP2Session()
        // Until the server's SETTINGS arrive, one stream is assumed.
        #expect(client.availableStreams == 1)
        #expect(server.exchange(with: client).contains(.peerSettings(maxConcurrentStreams: 2)))
        #expect(client.availableStreams == 2)
        let first = try post(client, "/3/device/a")
        _ = try post(client, "/3/device/b")
        #expect(client.availableStreams == 0)
        #expect(refusal { () throws(HTTP2Session.Failure) in try post(client, "/3/device/c") } == .streamLimit)
        _ = server.exchange(with: client)
        server.respond(to: first, status: 200)
        let events = server.exchange(with: client)
        #expect(events.map(\.terminalStreamId) == [first])
        #expect(client.availableStreams == 1)
        _ = try post(client, "/3/device/c")
        #expect(client.availableStreams == 0)
    }

    @Test func aRefusedStreamIsReportedRefused() throws {
        let server = try HTTP2TestServer { request in
            request.header(":path") == "/refuse"
                ? .reset(errorCode: NGHTTP2_REFUSED_STREAM.rawValue)
                : .reset(errorCode: NGHTTP2_INTERNAL_ERROR.rawValue)
        }
        let client = try connected(server)
        let refused = try post(client, "/refuse")
        let failed = try post(client, "/fail")
        let events = server.exchange(with: client)
        #expect(
            events == [
                .streamReset(streamId: refused, errorCode: Self.refused, refused: true),
                .streamReset(streamId: failed, errorCode: NGHTTP2_INTERNAL_ERROR.rawValue, refused: false),
            ])
        // A reset stream costs the connection nothing.
        #expect(client.availableStreams > 0 && client.wantsRead)
    }

    @Test func goAwayRefusesTheStreamsAboveItsLastId() throws {
        let server = try HTTP2TestServer()
        let client = try connected(server)
        let ids = try (0..<3).map { try post(client, "/3/device/\($0)") }
        _ = server.exchange(with: client)
        server.goAway(lastStreamId: ids[0], debug: "shutting down")
        let events = server.exchange(with: client)
        #expect(
            events == [
                .goAway(lastStreamId: ids[0], errorCode: 0, debug: "shutting down"),
                .streamReset(streamId: ids[1], errorCode: Self.refused, refused: true),
                .streamReset(streamId: ids[2], errorCode: Self.refused, refused: true),
            ])
        #expect(client.isGoingAway && client.availableStreams == 0)
        #expect(refusal { () throws(HTTP2Session.Failure) in try post(client, "/3/device/late") } == .goingAway)
        // The stream at the last id still gets its answer; then the connection is done.
        #expect(client.wantsRead)
        server.respond(to: ids[0], status: 200)
        #expect(server.exchange(with: client).map(\.terminalStreamId) == [ids[0]])
        #expect(!client.wantsRead && !client.wantsWrite)
    }

    @Test func requestsStillQueuedWhenGoAwayArrivesAreRefused() throws {
        var settings = HTTP2Session.Settings()
        settings.assumedMaxConcurrentStreams = 2
        let server = try HTTP2TestServer()
        server.goAway(lastStreamId: 0)
        let client = try HTTP2Session(settings: settings)
        let first = try post(client, "/3/device/a")
        let second = try post(client, "/3/device/b")
        // The server's SETTINGS and GOAWAY arrive before the client has sent anything.
        server.pendingOutput().withUnsafeBytes { client.receive($0) }
        _ = client.pendingOutput()
        #expect(
            client.takeEvents().filter { $0.terminalStreamId != nil } == [
                .streamReset(streamId: first, errorCode: Self.refused, refused: true),
                .streamReset(streamId: second, errorCode: Self.refused, refused: true),
            ])
        #expect(server.requests.isEmpty)
    }

    @Test func garbageIsAConnectionErrorAndEndsEveryStream() throws {
        let client = try HTTP2Session()
        let id = try post(client, "/3/device/a")
        _ = client.pendingOutput()
        Array("HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n".utf8).withUnsafeBytes { client.receive($0) }
        // nghttp2 answers with a GOAWAY, which is where the error surfaces.
        let goAway = try #require(client.pendingOutput())
        #expect(goAway.count >= 17 && goAway[3] == UInt8(NGHTTP2_GOAWAY.rawValue))
        #expect(
            client.takeEvents() == [
                .connectionError(
                    .protocolError(errorCode: NGHTTP2_PROTOCOL_ERROR.rawValue, reason: "SETTINGS expected")),
                .streamFailed(streamId: id, .connectionLost(requestSent: true)),
            ])
        #expect(client.isClosed && !client.wantsRead && !client.wantsWrite && client.pendingOutput() == nil)
        #expect(refusal { () throws(HTTP2Session.Failure) in try post(client, "/3/device/b") } == .closed)
    }

    @Test func aBadFrameAfterTheHandshakeIsAConnectionError() throws {
        let server = try HTTP2TestServer()
        let client = try connected(server)
        let id = try post(client, "/3/device/a")
        _ = server.exchange(with: client)
        // A DATA frame on stream 0 is a connection error (RFC 9113 §6.1).
        [0, 0, 1, 0, 0, 0, 0, 0, 0, 0x41].withUnsafeBytes { client.receive($0) }
        _ = client.pendingOutput()
        let events = client.takeEvents()
        guard case .connectionError(.protocolError(let code, _)) = events.first else {
            Issue.record("no connection error: \(events)")
            return
        }
        #expect(code == NGHTTP2_PROTOCOL_ERROR.rawValue)
        #expect(events.dropFirst() == [.streamFailed(streamId: id, .connectionLost(requestSent: true))])
    }

    /// Random bytes, or random frames (valid headers, random payloads), at the start or after
    /// a valid handshake: never a crash, and the connection either survives or says why it failed.
    @Test func randomBytesNeverCrash() throws {
        var generator = SplitMix(seed: 0x4854_5450_32)
        var closed = 0
        for round in 0..<600 {
            let server = try HTTP2TestServer()
            let client = try HTTP2Session()
            let id = try post(client, "/3/device/x")
            // Every fourth round, the noise is the first thing the client hears.
            if round % 4 != 0 {
                _ = server.exchange(with: client)
            }
            var noise: [UInt8] = []
            if round.isMultiple(of: 2) {
                noise = (0..<generator.next() % 200 + 1).map { _ in UInt8(truncatingIfNeeded: generator.next()) }
            } else {
                for _ in 0..<generator.next() % 4 + 1 {
                    let payload = (0..<generator.next() % 40).map { _ in UInt8(truncatingIfNeeded: generator.next()) }
                    let type = UInt8(generator.next() % 10)
                    let flags = UInt8(truncatingIfNeeded: generator.next())
                    let stream = [0, 1, 3][Int(generator.next() % 3)]
                    noise += [0, 0, UInt8(payload.count), type, flags, 0, 0, 0, UInt8(stream)] + payload
                }
            }
            noise.withUnsafeBytes { client.receive($0) }
            _ = client.pendingOutput()
            let events = client.takeEvents()
            if client.isClosed {
                closed += 1
                #expect(events.contains { if case .connectionError = $0 { true } else { false } })
            }
            // The stream ended at most once, and if it is still open, the session says so.
            let ends = events.filter { $0.terminalStreamId == id }.count
            #expect(ends == (client.openStreams == 0 ? 1 : 0))
        }
        // Most noise is a protocol error (the rest waits for a frame's end, or is harmless).
        #expect(closed > 300)
    }

    @Test func pingIsAcknowledged() throws {
        let server = try HTTP2TestServer()
        let client = try connected(server)
        #expect(!client.awaitingPingAck)
        try client.ping()
        #expect(client.awaitingPingAck && client.wantsWrite)
        // A second ping while one is out sends nothing more.
        try client.ping()
        #expect(server.exchange(with: client) == [.pingAck])
        #expect(!client.awaitingPingAck)
    }

    @Test func anOversizedAnswerResetsItsStreamOnly() throws {
        var settings = HTTP2Session.Settings()
        settings.maxResponseBodyBytes = 1000
        settings.maxResponseHeaderBytes = 200
        let server = try HTTP2TestServer { request in
            switch request.header(":path") {
            // Larger than the window, so the server is still sending when the reset arrives.
            case "/big-body": .respond(status: 200, body: Array(repeating: 0x61, count: 100_000))
            case "/big-head": .respond(status: 200, headers: [("x-filler", String(repeating: "b", count: 300))])
            default: .respond(status: 200, body: Array(repeating: 0x61, count: 1000))
            }
        }
        let client = try connected(server, settings)
        let bigBody = try post(client, "/big-body")
        let bigHead = try post(client, "/big-head")
        let fits = try post(client, "/fits")
        let events = server.exchange(with: client)
        #expect(events.contains(.streamFailed(streamId: bigBody, .responseTooLarge)))
        #expect(events.contains(.streamFailed(streamId: bigHead, .responseTooLarge)))
        #expect(
            events.contains(
                .response(.init(streamId: fits, status: 200, headers: [], body: Array(repeating: 0x61, count: 1000)))))
        #expect(events.count == 3)
        #expect(server.closes[bigBody] == NGHTTP2_CANCEL.rawValue)
        #expect(client.wantsRead && !client.isClosed)
    }

    /// A body larger than every window crosses on flow control (the server's window updates).
    @Test func aLargeRequestBodyCrossesTheWindows() throws {
        let body = (0..<300_000).map { UInt8(truncatingIfNeeded: $0 * 7) }
        let server = try HTTP2TestServer { _ in .respond(status: 202) }
        let client = try connected(server)
        let id = try client.submit(method: "POST", authority: "example.org", path: "/upload", body: body)
        let events = server.exchange(with: client)
        #expect(events.map(\.terminalStreamId) == [id])
        #expect(server.requests.first?.body == body)
    }

    @Test func informationalHeadsAreSkipped() throws {
        let server = try HTTP2TestServer()
        let client = try connected(server)
        let id = try post(client, "/3/device/a")
        _ = server.exchange(with: client)
        server.inform(id, status: 103)
        server.respond(to: id, status: 410, headers: [("apns-id", "x")], body: Array("gone".utf8))
        #expect(
            server.exchange(with: client) == [
                .response(.init(streamId: id, status: 410, headers: [("apns-id", "x")], body: Array("gone".utf8)))
            ])
    }

    /// A header block nghttp2 will not send ends the stream as not sent, not as refused: a
    /// refusal would be retried forever.
    @Test func aRequestNghttp2CannotSendIsNotReportedRefused() throws {
        let server = try HTTP2TestServer { _ in .respond(status: 200) }
        let client = try connected(server)
        let id = try client.submit(
            method: "POST", authority: "example.org", path: "/",
            headers: [("x-huge", String(repeating: "a", count: 70_000))], body: [1])
        let events = server.exchange(with: client)
        guard case .streamFailed(id, .requestRejected) = events.first else {
            Issue.record("not reported as not sent: \(events)")
            return
        }
        #expect(events.count == 1 && server.requests.isEmpty)
        // The connection goes on.
        _ = try post(client, "/3/device/a")
        #expect(server.exchange(with: client).count == 1)
    }

    @Test func closeEndsTheStreamsInFlight() throws {
        let server = try HTTP2TestServer()
        let client = try connected(server)
        let ids = try (0..<3).map { try post(client, "/3/device/\($0)") }
        _ = server.exchange(with: client)
        let unsent = try post(client, "/3/device/unsent")
        client.close()
        // What never left is safe to send again; what left may have been acted on.
        #expect(
            client.takeEvents()
                == ids.map { .streamFailed(streamId: $0, .connectionLost(requestSent: true)) } + [
                    .streamFailed(streamId: unsent, .connectionLost(requestSent: false))
                ])
        #expect(client.isClosed && client.openStreams == 0 && client.availableStreams == 0)
        #expect(client.pendingOutput() == nil)
    }

    @Test func headersHTTP2CannotCarryAreRefused() throws {
        let client = try HTTP2Session()
        let refused: [[(String, String)]] = [
            [("connection", "keep-alive")], [("Transfer-Encoding", "chunked")], [("te", "gzip")],
            [("x-bad name", "1")], [(":path", "/other")], [("x-newline", "a\r\nb")], [("x-space", " padded")],
            [("", "empty")],
        ]
        for headers in refused {
            let code = refusal { () throws(HTTP2Session.Failure) in
                try client.submit(method: "POST", authority: "example.org", path: "/", headers: headers)
            }
            #expect(code == .invalidHeader, "\(headers)")
        }
        for (method, authority, path) in [("", "a.org", "/"), ("GET", "", "/"), ("GET", "a.org", "/x y")] {
            let code = refusal { () throws(HTTP2Session.Failure) in
                try client.submit(method: method, authority: authority, path: path)
            }
            #expect(code == .invalidHeader, "\(method) \(authority) \(path)")
        }
        #expect(client.openStreams == 0)
        _ = try client.submit(method: "GET", authority: "example.org", path: "/", headers: [("te", "trailers")])
    }
}

/// A small seeded generator: the same noise on every run.
private struct SplitMix {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
