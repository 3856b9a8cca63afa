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
