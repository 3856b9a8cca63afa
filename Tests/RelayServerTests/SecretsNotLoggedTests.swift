import Foundation
import RelayTesting
import Testing

/// Keys, tokens and secrets never reach the log, even at debug level and on error paths.
@Suite(.serialized) struct SecretsNotLoggedTests {
    @Test func canariesNeverAppearInTheLog() async throws {
        let serverKey = "canary-server-key-7f3e9a"
        let tokenSecret = "canary-token-secret-5b1d-0123456789abcdef"
        let webhookSecret = "whsec_" + Data("canary-webhook-secret-bytes".utf8).base64EncodedString()
        let metricsKey = "canary-metrics-key-c4d2"
        let relay = try RelayProcess(
            arguments: [
                "--log-level", "debug", "--server-keys", serverKey, "--client-token-secret", tokenSecret,
                "--webhook-secret", webhookSecret, "--metrics-key", metricsKey, "--push-delay-ms", "0",
            ])
        // Traffic through every path that sees a credential: good and bad keys and tokens, the
        // token in a header and in the query, a WebSocket, a push, errors.
        let token = try await relay.request(
            "POST", "/v1/tokens", json: ["userId": "ana", "deviceId": "phone"], token: serverKey)
        let clientToken = try #require(token.object["token"] as? String)
        _ = try await relay.request(
            "PUT", "/v1/users/ana/devices/phone", json: ["pushUrl": "http://127.0.0.1:9/push"], token: serverKey)
        _ = try await relay.request(
            "POST", "/v1/messages", json: ["id": "c1", "recipients": ["ana"], "payload": [:]], token: serverKey)
        _ = try await relay.request("GET", "/v1/users/ana/messages", token: clientToken)
        _ = try await relay.request("GET", "/v1/users/bob/messages", token: clientToken)  // 403
        _ = try await relay.request("GET", "/v1/users/ana/messages", token: clientToken + "tampered")  // 401
        _ = try await relay.request("GET", "/v1/users/ana/messages?access_token=\(clientToken)", token: nil)  // 401
        _ = try await relay.request("GET", "/metrics", token: metricsKey)
        _ = try await relay.request("GET", "/metrics", token: serverKey)  // 401
        let socket = try WebSocketTestClient(port: relay.port, path: "/v1/ws?access_token=\(clientToken)")
        _ = try socket.nextJSON()
        socket.close()
        // The push attempt (connection refused) is logged: wait for it, so that its path is covered.
        #expect(await eventually { relay.logText.contains("msg=\"push ") }, "\(relay.logText)")
        relay.stop()

        let log = relay.logText
        #expect(log.contains("request"))  // the debug access log is there…
        for canary in [serverKey, tokenSecret, webhookSecret, metricsKey, clientToken, "canary"] {
            #expect(!log.contains(canary), "leaked: \(canary.prefix(12))…")  // …and no secret in it
        }
        let tokenParts = clientToken.split(separator: ".")
        #expect(!log.contains(String(tokenParts[2])))
    }

    /// A PostgreSQL URI's password is masked wherever the relay names its database.
    @Test func aDatabasePasswordIsNeverShown() throws {
        let uri = "postgresql://relay:canary-db-password@127.0.0.1:1/pushrelay?password=canary-again"
        let shown = try RelayCommand.run(["check-config", "--db", uri])
        #expect(shown.status == 0)
        #expect(shown.stdout.contains("postgresql://relay:***@127.0.0.1:1/pushrelay?password=***"))
        let failed = try RelayCommand.run(["serve", "--listen", "127.0.0.1:0", "--db", uri])
        #expect(failed.status != 0)
        #expect(failed.stderr.contains("cannot open the database postgresql://relay:***@"))
        for output in [shown.stdout, shown.stderr, failed.stdout, failed.stderr] {
            #expect(!output.contains("canary"))
        }
    }
}
