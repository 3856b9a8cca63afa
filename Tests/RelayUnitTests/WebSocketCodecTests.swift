import RelayPrimitives
import Testing
import WebSocketCodec

@Suite struct WebSocketHandshakeTests {
    @Test func acceptKeyFromTheRFC() {
        #expect(WebSocketHandshake.acceptValue(forKey: "dGhlIHNhbXBsZSBub25jZQ==") == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")
    }

    func headers(_ pairs: [String: String]) -> (String) -> String? { { pairs[$0] } }

    let good: [String: String] = [
        "upgrade": "websocket", "connection": "keep-alive, Upgrade", "sec-websocket-version": "13",
        "sec-websocket-key": "dGhlIHNhbXBsZSBub25jZQ==",
    ]

    @Test func acceptsAValidRequest() throws {
        #expect(
            try WebSocketHandshake.validate(method: "GET", header: headers(good)).get()
                == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")
    }

    @Test func refusesBadRequests() {
        func status(
            _ method: String = "GET", origins: Set<String>? = nil, _ change: (inout [String: String]) -> Void
        ) -> Int? {
            var pairs = good
            change(&pairs)
            if case .failure(let refusal) = WebSocketHandshake.validate(
                method: method, header: headers(pairs), allowedOrigins: origins)
            {
                return refusal.status
            }
            return nil
        }
        #expect(status("POST") { _ in } == 405)
        #expect(status { $0["upgrade"] = nil } == 400)
        #expect(status { $0["connection"] = "keep-alive" } == 400)
        #expect(status { $0["sec-websocket-version"] = "8" } == 426)
        #expect(status { $0["sec-websocket-key"] = "short" } == 400)
        #expect(status { $0["sec-websocket-key"] = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA" } == 400)  // 24 bytes
        #expect(status(origins: ["https://app.example"]) { $0["origin"] = "https://evil.example" } == 403)
        #expect(status(origins: ["https://app.example"]) { $0["origin"] = "https://app.example" } == nil)
        #expect(status(origins: ["https://app.example"]) { _ in } == nil)  // native clients send no Origin
        // Scheme, host and port compare case-insensitively; a default port is the same origin.
        #expect(status(origins: ["https://app.example"]) { $0["origin"] = "HTTPS://App.Example:443" } == nil)
        #expect(status(origins: ["http://localhost:8000"]) { $0["origin"] = "http://LOCALHOST:8000" } == nil)
        #expect(status(origins: ["http://localhost:8000"]) { $0["origin"] = "http://localhost:8001" } == 403)
        #expect(WebSocketHandshake.normalizedOrigin("HTTPS://Chat.Example:443/") == "https://chat.example")
    }

    @Test func clientSideParsesAndChecksTheResponse() throws {
        let key = "dGhlIHNhbXBsZSBub25jZQ=="
        let bytes =
            Array(
                "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n"
                    .utf8) + [0x81, 0x00]
        let response = try #require(WebSocketHandshake.parseResponse(bytes))
        #expect(WebSocketHandshake.accepts(response, key: key))
        #expect(response.rest == [0x81, 0x00])
        #expect(WebSocketHandshake.parseResponse(Array("HTTP/1.1 101 Switching".utf8)) == nil)
        var wrong = response
        wrong.headers["sec-websocket-accept"] = "nope"
        #expect(!WebSocketHandshake.accepts(wrong, key: key))
    }
}

@Suite struct WebSocketFrameTests {
    /// RFC 6455 §5.7 examples.
    @Test func examplesFromTheRFC() throws {
        var client = FrameParser(role: .client, maxFrameSize: 1 << 20)
        client.append([0x81, 0x05, 0x48, 0x65, 0x6C, 0x6C, 0x6F])
        #expect(try client.next() == WebSocketFrame(opcode: .text, payload: Array("Hello".utf8)))

        var server = FrameParser(role: .server, maxFrameSize: 1 << 20)
        server.append([0x81, 0x85, 0x37, 0xFA, 0x21, 0x3D, 0x7F, 0x9F, 0x4D, 0x51, 0x58])
        #expect(try server.next() == WebSocketFrame(opcode: .text, payload: Array("Hello".utf8)))

        #expect(
            WebSocketFrame(opcode: .pong, payload: Array("Hello".utf8)).encoded(maskKey: [0x37, 0xFA, 0x21, 0x3D])
                == [0x8A, 0x85, 0x37, 0xFA, 0x21, 0x3D, 0x7F, 0x9F, 0x4D, 0x51, 0x58])
        let medium = WebSocketFrame(opcode: .binary, payload: [UInt8](repeating: 7, count: 256)).encoded()
        #expect(Array(medium.prefix(4)) == [0x82, 0x7E, 0x01, 0x00])
        let large = WebSocketFrame(opcode: .binary, payload: [UInt8](repeating: 7, count: 65536)).encoded()
        #expect(Array(large.prefix(10)) == [0x82, 0x7F, 0, 0, 0, 0, 0, 1, 0, 0])
    }

    @Test func parsesAnySplitOfTheStream() throws {
        let frames = [
            WebSocketFrame(opcode: .text, payload: Array("first".utf8)),
            WebSocketFrame(opcode: .binary, payload: [UInt8](repeating: 1, count: 300)),
            WebSocketFrame(opcode: .ping, payload: [9]),
            WebSocketFrame(opcode: .binary, payload: [UInt8](repeating: 2, count: 70_000)),
        ]
        let stream = frames.flatMap { $0.encoded(maskKey: [1, 2, 3, 4]) }
        for chunk in [1, 2, 3, 7, 125, 4096] {
            var parser = FrameParser(role: .server, maxFrameSize: 1 << 20)
            var parsed: [WebSocketFrame] = []
            var offset = 0
            while offset < stream.count {
                parser.append(stream[offset..<min(stream.count, offset + chunk)])
                offset += chunk
                while let frame = try parser.next() { parsed.append(frame) }
            }
            #expect(parsed == frames, "chunk \(chunk)")
            #expect(parser.bufferedCount == 0)
        }
    }

    @Test(
        arguments: [
            ([0x81, 0x05, 0x48, 0x65, 0x6C, 0x6C, 0x6F], UInt16(1002)),  // unmasked from a client
            ([0xC1, 0x80, 0, 0, 0, 0], 1002),  // RSV1 without an extension
            ([0x83, 0x80, 0, 0, 0, 0], 1002),  // reserved opcode 3
            ([0x8B, 0x80, 0, 0, 0, 0], 1002),  // reserved control opcode 0xB
            ([0x09, 0x80, 0, 0, 0, 0], 1002),  // fragmented ping
            ([0x89, 0xFE, 0x00, 0x7E], 1002),  // ping with 126 bytes
            ([0x82, 0xFF, 0x80, 0, 0, 0, 0, 0, 0, 0], 1002),  // 64-bit length with the top bit set
            ([0x82, 0xFF, 0, 0, 0, 0, 0, 0x10, 0, 0], 1009),  // 1 MiB frame over the limit
        ] as [([UInt8], UInt16)])
    func rejectsBadFrames(_ bytes: [UInt8], _ code: UInt16) {
        var parser = FrameParser(role: .server, maxFrameSize: 65536)
        parser.append(bytes)
        #expect(throws: WebSocketError.self) { _ = try parser.next() }
        do {
            _ = try parser.next()
        } catch {
            #expect(error.code == code)
        }
    }
}

@Suite struct WebSocketConnectionTests {
    func masked(_ frame: WebSocketFrame) -> [UInt8] { frame.encoded(maskKey: [0xA1, 0xB2, 0xC3, 0xD4]) }

    func server() -> WebSocketConnection { WebSocketConnection(role: .server, maxMessageSize: 1000) }

    @Test func reassemblesFragmentsWithInterleavedPings() {
        var connection = server()
        let euro = Array("€".utf8)  // 3 bytes, split across fragments
        let outputs = connection.receive(
            masked(WebSocketFrame(fin: false, opcode: .text, payload: Array("a".utf8) + euro.prefix(1)))
                + masked(WebSocketFrame(opcode: .ping, payload: [1, 2]))
                + masked(WebSocketFrame(fin: false, opcode: .continuation, payload: Array(euro.dropFirst())))
                + masked(WebSocketFrame(opcode: .continuation, payload: Array("b".utf8))))
        #expect(
            outputs == [
                .write(WebSocketFrame(opcode: .pong, payload: [1, 2]).encoded()), .message(.text("a€b")),
            ])
    }

    @Test func invalidUTF8FailsFastWith1007() {
        var connection = server()
        let outputs = connection.receive(masked(WebSocketFrame(fin: false, opcode: .text, payload: [0x61, 0xFF])))
        #expect(outputs.last == .closed(code: 1007, reason: "invalid UTF-8 in a text message"))
        #expect(connection.state == .closed)
        // A text message that ends inside a character fails too.
        var other = server()
        let result1 = other.receive(masked(WebSocketFrame(opcode: .text, payload: [0xE2, 0x82])))
        #expect(result1.last?.isClosed(1007) == true)
    }

    /// The answers to the frames before a bad one stay in the outputs, in order, before the
    /// close; nothing after the bad frame is answered.
    @Test func answersBeforeAFailureAreKept() {
        var connection = server()
        let outputs = connection.receive(
            masked(WebSocketFrame(opcode: .ping, payload: [1])) + masked(WebSocketFrame(opcode: .text, payload: [0x61]))
                + [0xA1, 0x80, 0, 0, 0, 0]  // RSV2 set
                + masked(WebSocketFrame(opcode: .ping, payload: [2])))
        #expect(
            outputs == [
                .write(WebSocketFrame(opcode: .pong, payload: [1]).encoded()), .message(.text("a")),
                .write(
                    WebSocketFrame(opcode: .close, payload: [0x03, 0xEA] + Array("reserved bits set".utf8)).encoded()),
                .closed(code: 1002, reason: "reserved bits set"),
            ])
    }

    /// One text frame arriving in pieces fails with 1007 at the piece that cannot become UTF-8,
    /// not when the frame is whole (Autobahn 6.4.3 and 6.4.4); a continuation that cannot fit
    /// fails with 1009 from its header.
    @Test func aTextFrameFailsOnItsFirstInvalidPiece() {
        let valid: [UInt8] = [0xCE, 0xBA, 0xE1, 0xBD, 0xB9, 0xCF, 0x83, 0xCE, 0xBC, 0xCE, 0xB5]
        for (second, third) in [
            ([0xF4, 0x90, 0x80, 0x80], Array("edited".utf8)), ([0x90], [0x80, 0x80] + Array("edited".utf8)),
        ] as [([UInt8], [UInt8])] {
            let first = second.count == 1 ? valid + [0xF4] : valid
            let frame = masked(WebSocketFrame(opcode: .text, payload: first + second + third))
            let cut = frame.count - third.count - second.count
            var connection = server()
            #expect(connection.receive(frame[..<cut]).isEmpty)
            #expect(connection.receive(frame[cut..<(cut + second.count)]).last?.isClosed(1007) == true)
            // The same bytes in one piece, or in any two, end the same way.
            for split in 0...frame.count {
                var whole = server()
                var pieces = server()
                #expect(whole.receive(frame) == pieces.receive(frame[..<split]) + pieces.receive(frame[split...]))
            }
        }
        var continued = server()
        let started = continued.receive(masked(WebSocketFrame(fin: false, opcode: .text, payload: [0x61])))
        #expect(started.isEmpty)
        let next = masked(WebSocketFrame(opcode: .continuation, payload: [0x62, 0xC0, 0x63]))
        #expect(continued.receive(next.prefix(8)).last?.isClosed(1007) == true)
        var big = server()
        _ = big.receive(
            masked(WebSocketFrame(fin: false, opcode: .text, payload: [UInt8](repeating: 0x61, count: 600))))
        let tooMuch = masked(WebSocketFrame(opcode: .continuation, payload: [UInt8](repeating: 0x61, count: 600)))
        #expect(big.receive(tooMuch.prefix(10)).last?.isClosed(1009) == true)
    }

    @Test func fragmentationRules() {
        var stray = server()
        let result2 = stray.receive(masked(WebSocketFrame(opcode: .continuation, payload: [1])))
        #expect(result2.last?.isClosed(1002) == true)
        var nested = server()
        let outputs = nested.receive(
            masked(WebSocketFrame(fin: false, opcode: .text, payload: [0x61]))
                + masked(WebSocketFrame(opcode: .text, payload: [0x62])))
        #expect(outputs.last?.isClosed(1002) == true)
    }

    @Test func messageSizeLimitAcrossFragments() {
        var connection = server()
        let outputs = connection.receive(
            masked(WebSocketFrame(fin: false, opcode: .binary, payload: [UInt8](repeating: 0, count: 600)))
                + masked(WebSocketFrame(opcode: .continuation, payload: [UInt8](repeating: 0, count: 600))))
        #expect(outputs.last?.isClosed(1009) == true)
        #expect(
            outputs.first
                == .write(
                    WebSocketFrame(opcode: .close, payload: [0x03, 0xF1] + Array("message too big".utf8)).encoded()))
    }

    @Test func closeHandshake() {
        var connection = server()
        let outputs = connection.receive(
            masked(WebSocketFrame(opcode: .close, payload: [0x03, 0xE8] + Array("bye".utf8))))
        #expect(
            outputs == [
                .write(WebSocketFrame(opcode: .close, payload: [0x03, 0xE8]).encoded()),
                .closed(code: 1000, reason: "bye"),
            ])
        let result3 = connection.receive(masked(WebSocketFrame(opcode: .text, payload: [0x61])))
        #expect(result3.isEmpty)

        var empty = server()
        let result4 = empty.receive(masked(WebSocketFrame(opcode: .close)))
        #expect(result4 == [.write(WebSocketFrame(opcode: .close).encoded()), .closed(code: 1005, reason: "")])
        var badCode = server()
        let result5 = badCode.receive(masked(WebSocketFrame(opcode: .close, payload: [0x03, 0xED])))
        #expect(result5.last?.isClosed(1002) == true)
        var oneByte = server()
        let result6 = oneByte.receive(masked(WebSocketFrame(opcode: .close, payload: [0x03])))
        #expect(result6.last?.isClosed(1002) == true)
        var badReason = server()
        let result7 = badReason.receive(masked(WebSocketFrame(opcode: .close, payload: [0x03, 0xE8, 0xFF])))
        #expect(result7.last?.isClosed(1007) == true)

        // We start it: our close goes out, the peer's answer ends it without another echo.
        var initiator = server()
        let result8 = initiator.close(code: 1001, reason: "shutdown")
        #expect(result8 == WebSocketFrame(opcode: .close, payload: [0x03, 0xE9] + Array("shutdown".utf8)).encoded())
        let result9 = initiator.receive(masked(WebSocketFrame(opcode: .close, payload: [0x03, 0xE9])))
        #expect(result9 == [.closed(code: 1001, reason: "")])
    }

    @Test func clientRoleMasksAndRequiresUnmasked() {
        var client = WebSocketConnection(role: .client, maxMessageSize: 1000, maskKey: { [1, 2, 3, 4] })
        #expect(
            client.text("hi")
                == WebSocketFrame(opcode: .text, payload: Array("hi".utf8)).encoded(maskKey: [1, 2, 3, 4]))
        let result10 = client.receive(WebSocketFrame(opcode: .text, payload: Array("yo".utf8)).encoded())
        #expect(result10 == [.message(.text("yo"))])
        let result11 = client.receive(masked(WebSocketFrame(opcode: .text, payload: [0x61])))
        #expect(result11.last?.isClosed(1002) == true)
    }

    @Test func longCloseReasonsAreCutOnACharacterBoundary() {
        var connection = server()
        let frame = connection.close(code: 1000, reason: String(repeating: "é", count: 100))
        var parser = FrameParser(role: .client, maxFrameSize: 1000)
        parser.append(frame)
        let parsed = try? parser.next()
        #expect(parsed?.payload.count == 124)  // 2 + 61 × 2 bytes
    }

    @Test func utf8StreamAcrossAnySplit() {
        let text = Array("héllo wörld 😀 ✓ 𝄞".utf8)
        for split in 0...text.count {
            var stream = UTF8Stream()
            let result12 = stream.feed(text[..<split])
            #expect(result12)
            let result13 = stream.feed(text[split...])
            #expect(result13)
            #expect(stream.isComplete)
        }
        var bad = UTF8Stream()
        let surrogate = bad.feed([0xED, 0xA0, 0x80])
        #expect(!surrogate)
        var overlong = UTF8Stream()
        let overlongAccepted = overlong.feed([0xC0, 0x80])
        #expect(!overlongAccepted)
    }
}

extension WebSocketConnection.Output {
    func isClosed(_ code: UInt16) -> Bool {
        if case .closed(let closedCode, _) = self { return closedCode == code }
        return false
    }
}

/// The one base64 codec, both variants, on RFC 4648's vectors; strict decoding.
@Suite struct Base64Tests {
    @Test func rfc4648Vectors() {
        let vectors = [
            "": "", "f": "Zg==", "fo": "Zm8=", "foo": "Zm9v", "foob": "Zm9vYg==", "fooba": "Zm9vYmE=",
            "foobar": "Zm9vYmFy",
        ]
        for (plain, encoded) in vectors {
            #expect(Base64.encode(Array(plain.utf8)) == encoded)
            #expect(Base64.decode(encoded) == Array(plain.utf8))
            let url = String(encoded.filter { $0 != "=" })
            #expect(Base64.encode(Array(plain.utf8), .url) == url)
            #expect(Base64.decode(url, .url) == Array(plain.utf8))
        }
        #expect(Base64.encode([0xFB, 0xFF], .url) == "-_8")
        #expect(Base64.encode([0xFB, 0xFF]) == "+/8=")
    }

    @Test func malformedInputIsRefused() {
        for bad in ["Zg=", "Zg", "Z===", "Zh==", "Zm9v!", "=Zg="] { #expect(Base64.decode(bad) == nil, "\(bad)") }
        for bad in ["Z", "Zh", "Zg==", "+/8", "Zm9v!"] { #expect(Base64.decode(bad, .url) == nil, "\(bad)") }
    }
}
