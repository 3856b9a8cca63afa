import Foundation
import RelayTesting
import Testing

@Suite(.serialized) struct AuthAndInputEndToEndTests {
    @Test func credentialsAreChecked() async throws {
        let relay = try RelayProcess()
        let message: [String: Any] = ["id": "a1", "recipients": ["alice"], "payload": [:]]
        // No credentials, a wrong key, a garbage token.
        for token in [nil, "wrong-key", "a.b.c"] as [String?] {
            let response = try await relay.request("POST", "/v1/messages", json: message, token: token)
            #expect(response.status == 401, "\(token ?? "none")")
            #expect(response.errorCode == "unauthorized")
            #expect(response.headers["www-authenticate"] == "Bearer")
        }
        let alice = try await relay.token(userId: "alice")
        // A client token may not call server endpoints…
        #expect(try await relay.request("POST", "/v1/messages", json: message, token: alice).status == 403)
        #expect(try await relay.request("GET", "/v1/users/alice/devices", token: alice).status == 403)
        #expect(
            try await relay.request("POST", "/v1/tokens", json: ["userId": "alice", "deviceId": "x"], token: alice)
                .status == 403)
        // …nor another user's inbox, ack or presence…
        #expect(try await relay.request("GET", "/v1/users/bob/messages", token: alice).status == 403)
        #expect(try await relay.request("POST", "/v1/users/bob/ack", json: ["seq": 0], token: alice).status == 403)
        #expect(
            try await relay.request("POST", "/v1/users/bob/presence", json: ["state": "background"], token: alice)
                .status == 403)
        // …but its own, yes.
        #expect(try await relay.request("GET", "/v1/users/alice/messages", token: alice).status == 200)
        #expect(
            try await relay.request("POST", "/v1/users/alice/presence", json: ["state": "background"], token: alice)
                .status == 204)

        // A token signed with another secret is refused; one signed with the configured secret
        // by someone else (the chat server) is accepted.
        let foreign = Self.hs256(
            ["sub": "alice", "exp": Int(Date().timeIntervalSince1970) + 60], secret: "not-the-secret")
        #expect(try await relay.request("GET", "/v1/users/alice/messages", token: foreign).status == 401)
        let chatServerToken = Self.hs256(
            ["sub": "alice", "exp": Int(Date().timeIntervalSince1970) + 60],
            secret: "test-client-token-secret-0123456789abcdef")
        #expect(try await relay.request("GET", "/v1/users/alice/messages", token: chatServerToken).status == 200)
        let expired = Self.hs256(
            ["sub": "alice", "exp": Int(Date().timeIntervalSince1970) - 120],
            secret: "test-client-token-secret-0123456789abcdef")
        let expiredResponse = try await relay.request("GET", "/v1/users/alice/messages", token: expired)
        #expect(expiredResponse.status == 401)
        #expect((expiredResponse.object["error"] as? [String: Any])?["message"] as? String == "the token has expired")
        // Operations endpoints need nothing.
        #expect(try await relay.request("GET", "/healthz", token: nil).status == 200)
        #expect(try await relay.request("GET", "/readyz", token: nil).status == 200)
    }

    /// HS256 computed with Foundation-free code paths of the test (CommonCrypto is not on Linux):
    /// a small independent HMAC-SHA256 so the check does not reuse the relay's implementation.
    static func hs256(_ claims: [String: Any], secret: String) -> String {
        func b64url(_ data: Data) -> String {
            data.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
                .replacingOccurrences(of: "=", with: "")
        }
        let header = b64url(Data(#"{"alg":"HS256","typ":"JWT"}"#.utf8))
        let payload = b64url((try? JSONSerialization.data(withJSONObject: claims)) ?? Data())
        let mac = TestHMAC.sha256(key: Array(secret.utf8), message: Array("\(header).\(payload)".utf8))
        return "\(header).\(payload).\(b64url(Data(mac)))"
    }

    @Test func everyClassOfBadInputIsA4xxJSONError() async throws {
        let relay = try RelayProcess(arguments: ["--max-body-bytes", "65536", "--max-payload-bytes", "1024"])
        let json = ["Content-Type": "application/json"]
        let cases: [(String, String, Data?, [String: String], Int, String)] = [
            ("POST", "/v1/messages", Data("{not json".utf8), json, 400, "bad_json"),
            ("POST", "/v1/messages", Data(), json, 400, "bad_json"),
            ("POST", "/v1/messages", Data("[1,2]".utf8), json, 400, "invalid_field"),
            (
                "POST", "/v1/messages", Data(#"{"id":1,"recipients":["a"],"payload":{}}"#.utf8), json, 400,
                "invalid_field"
            ),
            ("POST", "/v1/messages", Data(#"{"recipients":["a"],"payload":{}}"#.utf8), json, 400, "missing_field"),
            (
                "POST", "/v1/messages", Data(#"{"id":"x","recipients":["a"],"payload":{}}"#.utf8),
                ["Content-Type": "text/plain"], 415, "unsupported_media_type"
            ),
            (
                "POST", "/v1/messages",
                Data(#"{"id":"x","recipients":["a"],"payload":{"t":"\#(String(repeating: "y", count: 2000))"}}"#.utf8),
                json, 413, "payload_too_large"
            ),
            ("POST", "/v1/messages", Data(repeating: 0x20, count: 70_000), json, 413, "body_too_large"),
            (
                "POST", "/v1/messages", Data(#"{"id":"x","recipients":["a"],"payload":{"s":"\u{0}"}}"#.utf8), json, 400,
                "bad_json"
            ),
            ("GET", "/v1/nope", nil, [:], 404, "not_found"),
            ("DELETE", "/v1/messages", nil, [:], 405, "method_not_allowed"),
            ("GET", "/v1/users/alice/messages?after=-1", nil, [:], 400, "invalid_field"),
            ("GET", "/v1/users/alice/messages?limit=0", nil, [:], 400, "invalid_field"),
            ("GET", "/v1/users/alice/messages?after=abc", nil, [:], 400, "invalid_field"),
            ("GET", "/v1/users/bad%20user/messages", nil, [:], 400, "invalid_field"),
            ("POST", "/v1/users/alice/ack", Data(#"{"seq":"1"}"#.utf8), json, 400, "invalid_field"),
            ("POST", "/v1/users/alice/ack", Data(#"{"seq":99}"#.utf8), json, 409, "seq_beyond_head"),
            ("POST", "/v1/users/alice/ack", Data(#"{"seq":1.5}"#.utf8), json, 400, "invalid_field"),
            ("PUT", "/v1/users/alice/devices/d1", Data(#"{"pushUrl":"gopher://x"}"#.utf8), json, 400, "invalid_field"),
            (
                "PUT", "/v1/users/alice/devices/d1", Data(#"{"pushUrl":"http://169.254.169.254/latest"}"#.utf8), json,
                400, "push_url_not_allowed"
            ),
            ("POST", "/v1/presence/query", Data(#"{"userIds":[]}"#.utf8), json, 400, "invalid_field"),
            ("POST", "/v1/tokens", Data(#"{"userId":"a"}"#.utf8), json, 400, "missing_field"),
            ("POST", "/v1/users/alice/presence", Data(#"{"state":"asleep"}"#.utf8), json, 400, "invalid_field"),
            ("GET", "/v1/messages/unknown", nil, [:], 404, "not_found"),
        ]
        for (method, path, body, headers, status, code) in cases {
            let response = try await relay.request(method, path, rawBody: body, headers: headers)
            #expect(response.status == status, "\(method) \(path): \(response.text)")
            #expect(response.errorCode == code, "\(method) \(path): \(response.text)")
            #expect(response.headers["content-type"] == "application/json")
            #expect(response.headers["x-request-id"] != nil)
        }
        // Still serving, and nothing was stored by any of it.
        let ok = try await relay.request(
            "POST", "/v1/messages", json: ["id": "fine", "recipients": ["alice"], "payload": [:]])
        #expect(ok.status == 202)
        #expect((ok.object["recipients"] as? [[String: Any]])?.first?["seq"] as? Int == 1)
    }

    @Test func devicesAndPresence() async throws {
        let relay = try RelayProcess()
        let put = try await relay.request(
            "PUT", "/v1/users/alice/devices/phone", json: ["pushUrl": "http://127.0.0.1:9/push", "platform": "ios"])
        #expect(put.status == 201)
        #expect(put.object["state"] as? String == "active")
        let update = try await relay.request(
            "PUT", "/v1/users/alice/devices/phone", json: ["pushUrl": "http://[::1]:9/push", "contentFree": true])
        #expect(update.status == 200)
        #expect(update.object["contentFree"] as? Bool == true)
        let list = try await relay.request("GET", "/v1/users/alice/devices")
        #expect(
            (list.object["devices"] as? [[String: Any]])?.map { $0["pushUrl"] as? String } == ["http://[::1]:9/push"])
        let presence = try await relay.request("GET", "/v1/users/alice/presence")
        #expect(presence.object["online"] as? Bool == false)
        #expect(presence.object["lastOnline"] is NSNull)
        #expect((presence.object["devices"] as? [[String: Any]])?.first?["deviceId"] as? String == "phone")
        let query = try await relay.request("POST", "/v1/presence/query", json: ["userIds": ["alice", "nobody"]])
        #expect((query.object["presence"] as? [[String: Any]])?.map { $0["userId"] as? String } == ["alice", "nobody"])
        #expect(try await relay.request("DELETE", "/v1/users/alice/devices/phone").status == 204)
        #expect(try await relay.request("DELETE", "/v1/users/alice/devices/phone").status == 204)
        let empty = try await relay.request("GET", "/v1/users/alice/devices")
        #expect((empty.object["devices"] as? [Any])?.isEmpty == true)
    }

    @Test func catchUpResyncSignals() async throws {
        let relay = try RelayProcess()
        for n in 1...3 {
            _ = try await relay.request(
                "POST", "/v1/messages", json: ["id": "c\(n)", "recipients": ["frank"], "payload": [:]])
        }
        let first = try await relay.request("GET", "/v1/users/frank/messages?after=1")
        let epoch = try #require(first.object["epoch"] as? String)
        #expect((first.object["messages"] as? [[String: Any]])?.compactMap { $0["seq"] as? Int } == [2, 3])
        let wrongEpoch = try await relay.request("GET", "/v1/users/frank/messages?after=1&epoch=deadbeef")
        #expect(wrongEpoch.object["complete"] as? Bool == false)
        #expect((wrongEpoch.object["messages"] as? [Any])?.isEmpty == true)
        #expect(wrongEpoch.object["epoch"] as? String == epoch)
        let future = try await relay.request("GET", "/v1/users/frank/messages?after=9&epoch=\(epoch)")
        #expect(future.object["complete"] as? Bool == false)
        let ackWrongEpoch = try await relay.request(
            "POST", "/v1/users/frank/ack", json: ["seq": 1, "epoch": "deadbeef"])
        #expect(ackWrongEpoch.status == 409)
        #expect(ackWrongEpoch.errorCode == "epoch_mismatch")
        // Monotonic ack: a lower seq is a no-op.
        #expect(try await relay.request("POST", "/v1/users/frank/ack", json: ["seq": 3]).status == 204)
        #expect(try await relay.request("POST", "/v1/users/frank/ack", json: ["seq": 1]).status == 204)
        let state = try await relay.request("GET", "/v1/messages/c3")
        #expect((state.object["recipients"] as? [[String: Any]])?.first?["state"] as? String == "acked")
    }

    @Test func metricsAreExposed() async throws {
        let relay = try RelayProcess()
        _ = try await relay.request("POST", "/v1/messages", json: ["id": "x", "recipients": ["a"], "payload": [:]])
        let metrics = try await relay.request("GET", "/metrics", token: nil)
        #expect(metrics.status == 200)
        #expect(
            metrics.text.contains(#"pushrelay_http_requests_total{method="POST",route="/v1/messages",status="202"} 1"#))
        #expect(metrics.text.contains("pushrelay_messages_accepted_total 1"))
        #expect(metrics.text.contains("pushrelay_store_commit_batch_size_count"))
        #expect(
            metrics.text.contains(#"pushrelay_http_request_duration_seconds_bucket{route="/v1/messages",le="+Inf"} 1"#))
    }
}
