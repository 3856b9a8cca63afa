import RelayCore
import Testing

struct PushTransportParsingTests {
    static func transport(_ json: String) throws -> PushTransport {
        try PushTransport(device: FieldReader(JSONParser.parse(Array(json.utf8))))
    }

    @Test func eachTransportReadsBackFromItsStoredForm() throws {
        let token = String(repeating: "0f", count: 32)
        let cases = [
            #"{"pushUrl":"http://127.0.0.1:9000/push/a?x=1"}"#,
            #"{"apns":{"token":"\#(token.uppercased())","topic":"com.example.chat","environment":"sandbox"}}"#,
            #"{"apns":{"token":"\#(token)"}}"#,
            #"{"fcm":{"token":"dQw4w9WgXcQ:APA91b-x_y"}}"#,
            #"{"webPush":{"endpoint":"https://push.example.net/s/1","keys":{"p256dh":"BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4=","auth":"BTBZMqHH6r4Tts7J_aSIgg"},"expirationTime":null}}"#,
        ]
        for json in cases {
            let parsed = try Self.transport(json)
            #expect(PushTransport(target: parsed.target) == parsed, "\(json)")
        }
        // A webhook is stored as its URL, exactly as written (rows from before the push services).
        #expect(try Self.transport(cases[0]).target == "http://127.0.0.1:9000/push/a?x=1")
        guard case .apns(let device) = try Self.transport(cases[1]) else { Issue.record("not apns"); return }
        #expect(device.token == token && device.environment == .sandbox && device.topic == "com.example.chat")
        guard case .apns(let plain) = try Self.transport(cases[2]) else { Issue.record("not apns"); return }
        // No environment named: production first, and stored as not named (the sandbox is tried too).
        #expect(plain.environment == nil && plain.endpoint == .production && plain.topic == nil)
        #expect(!PushTransport.apns(plain).target.contains("environment"))
        guard case .webPush(let subscription) = try Self.transport(cases[4]) else {
            Issue.record("not webPush"); return
        }
        #expect(subscription.p256dh.count == 65 && subscription.auth.count == 16)
        #expect(PushTransport(target: "{not json") == nil)
        #expect(PushTransport(target: "gopher://x") == nil)
    }

    @Test func aDeviceNamesExactlyOneTransport() {
        for json in [#"{}"#, #"{"pushUrl":"http://a/p","apns":{"token":"00"}}"#, #"{"fcm":{}}"#, #"{"fcm":null}"#] {
            #expect(throws: ValidationError.self, "\(json)") { try Self.transport(json) }
            do {
                _ = try Self.transport(json)
            } catch {
                #expect((error as? ValidationError)?.code == "invalid_transport", "\(json): \(error)")
            }
        }
    }
}

struct PushTransportAppTests {
    @Test func aDeviceNamesItsAppAndItIsStoredWhenNotDefault() throws {
        let token = String(repeating: "0f", count: 32)
        let sub =
            #""endpoint":"https://push.example.net/s/1","keys":{"p256dh":"BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4=","auth":"BTBZMqHH6r4Tts7J_aSIgg"}"#
        for json in [
            #"{"apns":{"token":"\#(token)"},"app":"beta"}"#, #"{"fcm":{"token":"abc"},"app":"acme.android"}"#,
            #"{"webPush":{\#(sub)},"app":"web_1"}"#,
        ] {
            let parsed = try PushTransportParsingTests.transport(json)
            #expect(parsed.app != .default, "\(json)")
            #expect(parsed.target.contains(#""app":"\#(parsed.app)""#), "\(parsed.target)")
            #expect(PushTransport(target: parsed.target) == parsed, "\(json)")
        }
        // Rows stored before apps existed carry none: the app `default`, stored as before.
        let old = try #require(PushTransport(target: #"{"apns":{"token":"\#(token)"}}"#))
        #expect(old.app == .default)
        #expect(!old.target.contains("app"))
        let named = try PushTransportParsingTests.transport(#"{"fcm":{"token":"abc"},"app":"default"}"#)
        #expect(named.app == .default && !named.target.contains("app"))
    }

    @Test func anAppIsAnIdAndAWebhookHasNone() {
        for json in [
            #"{"fcm":{"token":"abc"},"app":""}"#, #"{"fcm":{"token":"abc"},"app":"a b"}"#,
            #"{"fcm":{"token":"abc"},"app":7}"#,
            #"{"fcm":{"token":"abc"},"app":"\#(String(repeating: "a", count: 65))"}"#,
            #"{"pushUrl":"http://127.0.0.1:9/p","app":"beta"}"#,
        ] {
            #expect(throws: ValidationError.self, "\(json)") { try PushTransportParsingTests.transport(json) }
        }
        #expect(
            (try? PushTransportParsingTests.transport(#"{"pushUrl":"http://127.0.0.1:9/p","app":"default"}"#)) != nil)
    }
}
