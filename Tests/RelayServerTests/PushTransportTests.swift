import Foundation
import RelayTesting
import Testing

/// The device contract of the push services: one transport per device, validated, offered only
/// with credentials, and registrable by the app itself for its own device.
@Suite(.serialized) struct PushTransportTests {
    static let apnsToken = String(repeating: "ab", count: 32)
    static let p256dh = "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4"

    @Test func aDeviceHasExactlyOneWellFormedTransport() async throws {
        let relay = try RelayProcess()
        let cases: [([String: Any], Int, String)] = [
            ([:], 400, "invalid_transport"),
            (["platform": "ios"], 400, "invalid_transport"),
            (["pushUrl": "http://127.0.0.1:9/p", "fcm": ["token": "abc"]], 400, "invalid_transport"),
            (["apns": ["token": "xyz"]], 400, "invalid_transport"),
            (["apns": ["token": String(repeating: "a", count: 63)]], 400, "invalid_transport"),
            (["apns": "token"], 400, "invalid_transport"),
            (["apns": ["token": Self.apnsToken, "environment": "staging"]], 400, "invalid_transport"),
            (["fcm": ["token": "has space"]], 400, "invalid_transport"),
            (
                [
                    "webPush": [
                        "endpoint": "http://127.0.0.1:9/p",
                        "keys": ["p256dh": Self.p256dh, "auth": "AAAAAAAAAAAAAAAAAAAAAA"],
                    ]
                ], 400, "invalid_transport"
            ),
            (
                [
                    "webPush": [
                        "endpoint": "https://127.0.0.1:9/p",
                        "keys": ["p256dh": "AAAA", "auth": "AAAAAAAAAAAAAAAAAAAAAA"],
                    ]
                ], 400, "invalid_transport"
            ),
            (
                ["webPush": ["endpoint": "https://127.0.0.1:9/p", "keys": ["p256dh": Self.p256dh]]], 400,
                "invalid_transport"
            ),
            // Well formed, but this relay has no credentials for the service.
            (["apns": ["token": Self.apnsToken]], 400, "transport_unavailable"),
            (["fcm": ["token": "abc:APA91b"]], 400, "transport_unavailable"),
            (
                [
                    "webPush": [
                        "endpoint": "https://127.0.0.1:9/p",
                        "keys": ["p256dh": Self.p256dh, "auth": "AAAAAAAAAAAAAAAAAAAAAA"],
                    ]
                ], 400, "transport_unavailable"
            ),
        ]
        for (body, status, code) in cases {
            let response = try await relay.request("PUT", "/v1/users/alice/devices/d1", json: body)
            #expect(response.status == status, "\(body): \(response.text)")
            #expect(response.errorCode == code, "\(body): \(response.text)")
        }
        let webhook = try await relay.request(
            "PUT", "/v1/users/alice/devices/d1", json: ["pushUrl": "http://127.0.0.1:9/p"])
        #expect(webhook.status == 201)
        #expect(webhook.object["transport"] as? String == "webhook")
        #expect(webhook.object["pushUrl"] as? String == "http://127.0.0.1:9/p")
    }

    @Test func servicesWithCredentialsAreOfferedAndAnAppRegistersItsOwnToken() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("transports-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let credentials = try PushCredentials(in: directory)
        let relay = try RelayProcess(
            environment: credentials.environment.merging(
                ["PUSHRELAY_PUSH_ALLOWED_HOSTS": "127.0.0.1:*"]) { $1 })

        let apns = try await relay.request(
            "PUT", "/v1/users/alice/devices/phone",
            json: ["apns": ["token": Self.apnsToken.uppercased(), "environment": "sandbox"], "platform": "ios"])
        #expect(apns.status == 201, "\(apns.text)")
        #expect(apns.object["transport"] as? String == "apns")
        #expect(apns.object["pushUrl"] == nil)
        let stored = apns.object["apns"] as? [String: Any]
        #expect(stored?["token"] as? String == Self.apnsToken)
        #expect(stored?["environment"] as? String == "sandbox")
        let subscription: [String: Any] = [
            "endpoint": "https://127.0.0.1:9/push/x",
            "keys": ["p256dh": Self.p256dh, "auth": "BTBZMqHH6r4Tts7J_aSIgg"],
            "expirationTime": NSNull(),
        ]
        let web = try await relay.request("PUT", "/v1/users/alice/devices/browser", json: ["webPush": subscription])
        #expect(web.status == 201, "\(web.text)")
        #expect((web.object["webPush"] as? [String: Any])?["endpoint"] as? String == "https://127.0.0.1:9/push/x")
        let notAllowed = try await relay.request(
            "PUT", "/v1/users/alice/devices/browser",
            json: ["webPush": subscription.merging(["endpoint": "https://169.254.169.254/x"]) { $1 }])
        #expect(notAllowed.errorCode == "push_url_not_allowed", "\(notAllowed.text)")
        let fcm = try await relay.request(
            "PUT", "/v1/users/alice/devices/pixel", json: ["fcm": ["token": "abc:APA91b-x_y"]])
        #expect(fcm.status == 201, "\(fcm.text)")
        let list = try await relay.request("GET", "/v1/users/alice/devices")
        let kinds = (list.object["devices"] as? [[String: Any]] ?? []).compactMap { $0["transport"] as? String }
        #expect(kinds.sorted() == ["apns", "fcm", "webPush"])

        // The app registers its own device's token with its client token…
        let phone = try await relay.token(userId: "alice", deviceId: "phone")
        let own = try await relay.request(
            "PUT", "/v1/users/alice/devices/phone", json: ["apns": ["token": Self.apnsToken]], token: phone)
        #expect(own.status == 200, "\(own.text)")
        // …but never a push URL, a Matrix pusher, another device or another user.
        let refused: [(String, [String: Any])] = [
            ("/v1/users/alice/devices/phone", ["pushUrl": "http://127.0.0.1:9/p"]),
            (
                "/v1/users/alice/devices/phone",
                ["apns": ["token": Self.apnsToken], "matrix": ["appId": "a", "pushkey": "k"]]
            ),
            ("/v1/users/alice/devices/tablet", ["apns": ["token": Self.apnsToken]]),
            ("/v1/users/bob/devices/phone", ["apns": ["token": Self.apnsToken]]),
        ]
        for (path, body) in refused {
            let response = try await relay.request("PUT", path, json: body, token: phone)
            #expect(response.status == 403, "\(path) \(body): \(response.text)")
        }
        // The transports survive a restart as registered.
        try relay.restart()
        let again = try await relay.request("GET", "/v1/users/alice/devices")
        let phoneDevice = (again.object["devices"] as? [[String: Any]] ?? []).first {
            $0["deviceId"] as? String == "phone"
        }
        // (The app named no environment: none is stored, so the sandbox is tried before the token is given up.)
        #expect((phoneDevice?["apns"] as? [String: Any])?["token"] as? String == Self.apnsToken)
        #expect((phoneDevice?["apns"] as? [String: Any])?["environment"] == nil)
    }
}

/// Credentials for every push service, made with the `openssl` tool for one test run.
struct PushCredentials {
    let environment: [String: String]

    init(in directory: URL) throws {
        let apnsKey = directory.appendingPathComponent("apns.p8").path
        let vapidKey = directory.appendingPathComponent("vapid.pem").path
        let rsaKey = directory.appendingPathComponent("fcm.pem").path
        try Self.openssl(["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", apnsKey])
        try Self.openssl(["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", vapidKey])
        try Self.openssl(["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", rsaKey])
        let account: [String: Any] = [
            "type": "service_account", "project_id": "pushrelay-test", "private_key_id": "k1",
            "private_key": try String(contentsOfFile: rsaKey, encoding: .utf8),
            "client_email": "relay@pushrelay-test.iam.gserviceaccount.com",
            "token_uri": "https://127.0.0.1:9/token",
        ]
        let accountFile = directory.appendingPathComponent("fcm.json")
        try JSONSerialization.data(withJSONObject: account).write(to: accountFile)
        environment = [
            "PUSHRELAY_APNS_KEY_FILE": apnsKey, "PUSHRELAY_APNS_KEY_ID": "ABC123DEFG",
            "PUSHRELAY_APNS_TEAM_ID": "DEF123GHIJ", "PUSHRELAY_APNS_TOPIC": "com.example.chat",
            "PUSHRELAY_FCM_SERVICE_ACCOUNT_FILE": accountFile.path,
            "PUSHRELAY_VAPID_KEY_FILE": vapidKey, "PUSHRELAY_VAPID_SUBJECT": "mailto:ops@example.com",
            "PUSHRELAY_WEB_PUSH_ALLOWED_HOSTS": "127.0.0.1:*",
        ]
    }

    static func openssl(_ arguments: [String]) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        process.arguments = arguments
        process.standardError = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw RelayProcess.LaunchError(description: "openssl \(arguments.joined(separator: " ")) failed")
        }
    }
}
