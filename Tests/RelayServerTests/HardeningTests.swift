import Foundation
import RelayCore
import RelayCrypto
import RelayPrimitives
import RelayTesting
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The abuse paths of the second hardening round, each against the real binary. (The ping
/// flood, junk methods, slow headers, unauthenticated bodies and extreme claims also run as
/// floods with bounds in `Tests/Peers/adversary.py`.)
@Suite(.serialized) struct HardeningTests {
    static let tokenSecret = Array("test-client-token-secret-0123456789abcdef".utf8)

    /// A token signed with the test relay's secret, with claims written as raw JSON.
    static func signedToken(_ claims: String) -> String {
        let input =
            Base64.encode(Array(#"{"alg":"HS256","typ":"JWT"}"#.utf8), .url) + "."
            + Base64.encode(Array(claims.utf8), .url)
        return input + "." + Base64.encode(Crypto.hmacSHA256(key: tokenSecret, message: Array(input.utf8)), .url)
    }

    static var nowSeconds: Int64 { Int64(Date().timeIntervalSince1970) }

    // MARK: 2. Metrics labels

    @Test func junkMethodsBecomeOneMetricsLabel() async throws {
        let relay = try RelayProcess()
        for n in 0..<50 {
            let connection = try RawConnection(port: relay.port)
            connection.send("JUNK\(n) /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            _ = connection.responseStatus()
        }
        let metrics = try await relay.request("GET", "/metrics", token: nil).text
        #expect(!metrics.contains("JUNK"))
        #expect(metrics.contains(#"method="other""#))
    }

    // MARK: 6. File modes

    @Test(.disabled(if: RelayProcess.postgresDirectory != nil, "the SQLite file's mode"))
    func databaseAndItsWALAreCreatedPrivate() async throws {
        let previous = umask(0o022)
        defer { umask(previous) }
        let relay = try RelayProcess()
        _ = try await relay.request("POST", "/v1/messages", json: ["id": "m", "recipients": ["u"], "payload": [:]])
        for suffix in ["", "-wal", "-shm"] {
            let attributes = try FileManager.default.attributesOfItem(atPath: relay.databasePath + suffix)
            let mode = (attributes[.posixPermissions] as? NSNumber)?.intValue ?? -1
            #expect(mode == 0o600, "\(suffix): \(String(mode, radix: 8))")
        }
    }

    // MARK: 7. Deadlines and caps

    @Test func aTrickledHeadIsCutAtItsDeadline() async throws {
        let relay = try RelayProcess(arguments: ["--request-header-timeout-ms", "500"])
        let connection = try RawConnection(port: relay.port, receiveTimeout: 0.2)
        let started = Date()
        var closed = false
        for byte in "GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Slow: " + String(repeating: "a", count: 60) {
            guard connection.send(String(byte)), !connection.read().closed else {
                closed = true
                break
            }
        }
        #expect(closed)
        // Cut near its 0.5 s deadline, not when the head is done (16 s of trickle): the bound
        // leaves a busy machine room and still tells the two apart.
        #expect(Date().timeIntervalSince(started) < 10)
        #expect(try await relay.request("GET", "/healthz", token: nil).status == 200)
    }

    @Test func webSocketsCountInThePerAddressCap() async throws {
        let relay = try RelayProcess(arguments: ["--max-connections-per-ip", "3"])
        var sockets: [WebSocketTestClient] = []
        for user in ["a", "b", "c"] {
            // Minted here: URLSession would keep a connection of its own open.
            let token = Self.signedToken(#"{"sub":"\#(user)","did":"d","exp":\#(Self.nowSeconds + 600)}"#)
            let socket = try WebSocketTestClient(port: relay.port, path: "/v1/ws?access_token=\(token)")
            _ = try socket.nextJSON()
            sockets.append(socket)
        }
        let refused = try RawConnection(port: relay.port, receiveTimeout: 2)
        refused.send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(refused.responseStatus() == nil)
        sockets[0].close()
        #expect(try sockets[0].waitForClose() == 1000)
        // The relay counts the socket out once it has seen it close: a fresh connection is
        // admitted then (and, until then, refused: each try is a new connection).
        let admitted = await eventually {
            guard let connection = try? RawConnection(port: relay.port, receiveTimeout: 10) else { return false }
            connection.send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            return connection.responseStatus() == 200
        }
        #expect(admitted)
    }

    // MARK: 8. Authentication before the body

    @Test func anUnauthenticatedBodyIsRefusedBeforeItIsSent() async throws {
        let relay = try RelayProcess()
        let connection = try RawConnection(port: relay.port, receiveTimeout: 5)
        // The head alone: the answer must come without the relay waiting for the 1 MiB.
        connection.send(
            "POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1048576\r\n\r\n"
        )
        #expect(connection.responseStatus() == 401)
        // A bad token is refused the same way; a good key still gets its body read.
        let bad = try RawConnection(port: relay.port, receiveTimeout: 5)
        bad.send(
            "PUT /v1/users/u/devices/d HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer nope\r\nContent-Length: 99\r\n\r\n")
        #expect(bad.responseStatus() == 401)
        let response = try await relay.request(
            "POST", "/v1/messages", json: ["id": "ok", "recipients": ["u"], "payload": [:]])
        #expect(response.status == 202)
    }

    // MARK: 9. Origin

    @Test func browsersMayConnectByDefaultAndOriginsCompareCaseInsensitively() async throws {
        let token = Self.signedToken(#"{"sub":"web","did":"d","exp":\#(Self.nowSeconds + 600)}"#)
        let open = try RelayProcess()
        let allowed = try WebSocketTestClient(
            port: open.port, path: "/v1/ws?access_token=\(token)", headers: [("Origin", "https://Chat.Example.com")])
        #expect(allowed.handshakeStatus == 101)
        // Exactly `Upgrade`: Node's and OkHttp's WebSocket clients refuse "Upgrade, Upgrade".
        #expect(allowed.handshakeHeaders["connection"] == "Upgrade")

        let strict = try RelayProcess(arguments: ["--ws-allowed-origins", "https://chat.example.com"])
        let same = try WebSocketTestClient(
            port: strict.port, path: "/v1/ws?access_token=\(token)",
            headers: [("Origin", "HTTPS://CHAT.example.com:443")])
        #expect(same.handshakeStatus == 101)
        #expect(throws: WebSocketTestClient.Failure.self) {
            try WebSocketTestClient(
                port: strict.port, path: "/v1/ws?access_token=\(token)",
                headers: [("Origin", "https://evil.example.com")])
        }
    }

    // MARK: 10. Parser ambiguities

    @Test func duplicateMembersAndConflictingFramingAreRefused() async throws {
        let relay = try RelayProcess()
        let duplicate = try await relay.request(
            "POST", "/v1/messages", rawBody: Data(#"{"id":"a","id":"b","recipients":["u"],"payload":{}}"#.utf8),
            headers: ["Content-Type": "application/json"])
        #expect(duplicate.status == 400)
        // A signed token naming two subjects opens no inbox.
        let twoSubjects = Self.signedToken(#"{"sub":"alice","sub":"bob","exp":\#(Self.nowSeconds + 600)}"#)
        #expect(try await relay.request("GET", "/v1/users/bob/messages", token: twoSubjects).status == 401)
        // Content-Length together with Transfer-Encoding (RFC 9112 §6.3).
        let smuggle = try RawConnection(port: relay.port)
        smuggle.send(
            "POST /v1/messages HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(RelayProcess.serverKey)\r\n"
                + "Content-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n")
        #expect(smuggle.responseStatus() == 400)
        // A decoded %00 in the query: libmicrohttpd's C strings would end there, and the handler
        // would validate a shorter value than the client sent.
        let nul = try await relay.request(
            "GET", "/v1/users/u/messages?epoch=abc%00\(String(repeating: "x", count: 80))")
        #expect(nul.status == 400)
        #expect(nul.errorCode == "bad_request")
    }

    // MARK: 11. Revocation and token expiry

    @Test func deletingADeviceRevokesItsTokensAndClosesItsSockets() async throws {
        let relay = try RelayProcess()
        let token = try await relay.token(userId: "rita", deviceId: "phone")
        let socket = try WebSocketTestClient(port: relay.port, path: "/v1/ws?access_token=\(token)")
        _ = try socket.nextJSON()
        #expect(try await relay.request("DELETE", "/v1/users/rita/devices/phone").status == 204)
        #expect(try socket.waitForClose() == 1008)
        let refused = try await relay.request("GET", "/v1/users/rita/messages", token: token)
        #expect(refused.status == 401)
        // Revocations survive a restart; tokens minted afterwards work.
        try relay.restart()
        #expect(try await relay.request("GET", "/v1/users/rita/messages", token: token).status == 401)
        try await Task.sleep(nanoseconds: 1_100_000_000)  // a later `iat` second
        let fresh = try await relay.token(userId: "rita", deviceId: "phone")
        #expect(try await relay.request("GET", "/v1/users/rita/messages", token: fresh).status == 200)
    }

    // (A socket's token running out: `InProcessTests.aSocketEndsWhenItsTokenExpiresUnlessRefreshed`,
    // on a stepped clock.)

    // MARK: 12. libmicrohttpd's own lines

    @Test func httpServerErrorsAreLoggedAsLogfmt() async throws {
        let relay = try RelayProcess()
        for _ in 0..<20 {
            let connection = try RawConnection(port: relay.port)
            // An authenticated head whose body never comes: MHD reports the aborted request.
            connection.send(
                "POST /v1/messages HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(RelayProcess.serverKey)\r\n"
                    + "Content-Length: 100\r\n\r\n{")
            shutdown(connection.fd, Int32(SHUT_RDWR))
        }
        // libmicrohttpd's report of them is what this is about: wait for it, then read the log.
        #expect(await eventually { relay.logText.contains("http server error") }, "\(relay.logText)")
        _ = relay.stop()
        let lines = relay.logText.split(separator: "\n")
        #expect(lines.allSatisfy { $0.hasPrefix("ts=") }, "\(lines.filter { !$0.hasPrefix("ts=") })")
    }
}
