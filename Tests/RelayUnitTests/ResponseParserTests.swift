import RelayTransport
import Testing

@Suite struct ResponseParserTests {
    /// Feeds `text` in pieces of `piece` bytes and returns the first answer that is not `needMore`.
    private func parse(_ text: String, piece: Int = 1) -> ResponseParser.Progress {
        var parser = ResponseParser()
        let bytes = Array(text.utf8)
        var offset = 0
        while offset < bytes.count {
            let progress = parser.feed(bytes[offset..<min(bytes.count, offset + piece)])
            if progress != .needMore { return progress }
            offset += piece
        }
        return .needMore
    }

    private func complete(
        _ status: Int, retryAfter: String? = nil, body: String = "", keepAlive: Bool
    ) -> ResponseParser.Progress {
        .complete(.init(status: status, retryAfter: retryAfter, body: Array(body.utf8)), keepAlive: keepAlive)
    }

    @Test func framingsEndWhereTheAnswerEnds() {
        for piece in [1, 7, 4096] {
            #expect(parse("HTTP/1.1 204 No Content\r\n\r\n", piece: piece) == complete(204, keepAlive: true))
            #expect(
                parse("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", piece: piece)
                    == complete(200, body: "hello", keepAlive: true))
            #expect(
                parse(
                    "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;x=y\r\nhello\r\n3\r\n!!!\r\n0\r\nT: v\r\n\r\n",
                    piece: piece)
                    == complete(200, body: "hello!!!", keepAlive: true))
            #expect(
                parse(
                    "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 429 Slow\r\nRetry-After: 7\r\nContent-Length: 0\r\n\r\n",
                    piece: piece)
                    == complete(429, retryAfter: "7", keepAlive: true))
            #expect(parse("HTTP/1.1 204 No Content\n\n", piece: piece) == complete(204, keepAlive: true))
        }
    }

    @Test func answersNotWorthReadingEndTheConnection() {
        // A body delimited by the close, a long one, HTTP/1.0, Connection: close: complete after the head.
        #expect(parse("HTTP/1.1 200 OK\r\n\r\nbody until close") == complete(200, keepAlive: false))
        #expect(parse("HTTP/1.1 500 Oops\r\nContent-Length: 1000000\r\n\r\n") == complete(500, keepAlive: false))
        #expect(parse("HTTP/1.0 204 No Content\r\n\r\n") == complete(204, keepAlive: false))
        #expect(parse("HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n") == complete(204, keepAlive: false))
        #expect(
            parse("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nFFFFFFFF\r\n")
                == complete(200, keepAlive: false))
        // More than the answer in one read: not reused.
        var parser = ResponseParser()
        #expect(parser.feed(Array("HTTP/1.1 204 No Content\r\n\r\nHTTP/1.1".utf8)) == complete(204, keepAlive: false))
    }

    @Test func malformedAnswersAreNamed() {
        #expect(parse("SSH-2.0-OpenSSH\r\n\r\n") == .malformed("malformed response"))
        #expect(parse("HTTP/1.1 abc OK\r\n\r\n") == .malformed("malformed response"))
        #expect(parse("HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n") == .malformed("bad Content-Length"))
        #expect(
            parse("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n") == .malformed("malformed chunked body")
        )
        let endless = "HTTP/1.1 200 OK\r\nX: " + String(repeating: "a", count: 70_000)
        #expect(parse(endless, piece: 4096) == .malformed("response head too large"))
    }
}
