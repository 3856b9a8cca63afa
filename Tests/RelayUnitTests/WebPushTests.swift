import RelayCore
import RelayStore
import RelayTransport
import Testing

/// The Web Push request (before encryption) built from a notice, what a push service's answers
/// mean, and when the VAPID token is renewed.
@Suite struct WebPushTests {
    static let now: Int64 = 1_700_000_000_000
    static let push = #"{"title":"Ann","body":"Hi there","data":{"room":"r1"},"extra":[1,2]}"#

    static func notice(
        kind: PushKind = .message, push: String? = push, priority: Priority = .high, contentFree: Bool = false,
        collapseKey: String? = nil, expiresAt: Int64 = now + 3_600_999
    ) -> PushNotice {
        var batch = PushNoticeTests.batch(kind: kind, push: push, contentFree: contentFree, collapseKey: collapseKey)
        batch.priority = priority
        batch.expiresAt = Timestamp(milliseconds: expiresAt)
        return PushNotice(batch: batch)
    }

    static func request(_ notice: PushNotice) throws -> WebPushRequest {
        let endpoint = try PushURL("https://push.example.net/wpush/v2/abc")
        return WebPushRequest(notice: notice, endpoint: endpoint, now: now, hash: { _ in Array(0..<32) })
    }

    static func json(_ bytes: [UInt8]) throws -> JSONValue { try JSONParser.parse(bytes) }

    // MARK: Request

    @Test func theHeadersSayHowLongAndHowUrgent() throws {
        let request = try Self.request(Self.notice(collapseKey: "room-1"))
        #expect(request.headers.map(\.name) == ["ttl", "urgency", "topic", "content-encoding", "content-type"])
        #expect(request.headers.map(\.value) == ["3600", "high", "room-1", "aes128gcm", "application/octet-stream"])
        let normal = try Self.request(Self.notice(priority: .normal))
        #expect(normal.headers.map(\.name) == ["ttl", "urgency", "content-encoding", "content-type"])
        #expect(normal.headers.first { $0.name == "urgency" }?.value == "normal")
        for (expiresAt, ttl) in [(Self.now - 5000, "0"), (Self.now + 999, "0"), (Self.now + 86_400_000, "86400")] {
            #expect(try Self.request(Self.notice(expiresAt: expiresAt)).headers.first?.value == ttl)
        }
    }

    /// A collapse key that is a valid `Topic` goes as is; any other is hashed to 32 characters.
    @Test func aCollapseKeyBecomesATopic() {
        let sha: ([UInt8]) -> [UInt8] = { _ in Array(0..<32) }
        let hashed = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYX"  // base64url of bytes 0…23
        #expect(WebPushRequest.topic(for: "room-1_A", hash: sha) == "room-1_A")
        #expect(
            WebPushRequest.topic(for: String(repeating: "k", count: 32), hash: sha) == String(repeating: "k", count: 32)
        )
        #expect(WebPushRequest.topic(for: String(repeating: "k", count: 33), hash: sha) == hashed)
        #expect(WebPushRequest.topic(for: "room:1", hash: sha) == hashed)
        #expect(WebPushRequest.topic(for: "salle-é", hash: sha) == hashed)
        #expect(WebPushRequest.topic(for: "", hash: sha) == nil)
        #expect(WebPushRequest.topic(for: "room:1", hash: { _ in [] }) == nil)
        // The hash sees the key's bytes.
        var seen: [UInt8] = []
        _ = WebPushRequest.topic(for: "a:b") {
            seen = $0; return Array(repeating: 0xFF, count: 32)
        }
        #expect(seen == Array("a:b".utf8))
    }

    @Test(arguments: [
        ("https://push.example.net/x", "https://push.example.net"),
        ("https://push.example.net:443/x", "https://push.example.net"),
        ("https://Push.Example.net:8443/x?y", "https://push.example.net:8443"),
        ("http://localhost:80/x", "http://localhost"),
        ("http://localhost:8080", "http://localhost:8080"),
        ("https://[2001:db8::1]:8443/x", "https://[2001:db8::1]:8443"),
    ])
    func theAudienceIsTheEndpointsOrigin(_ url: String, _ origin: String) throws {
        #expect(WebPushRequest.audience(of: try PushURL(url)) == origin)
    }

    /// The plaintext is the webhook body, byte for byte, when it fits.
    @Test func thePlaintextIsTheWebhookBody() throws {
        for notice in [
            Self.notice(), Self.notice(contentFree: true), Self.notice(kind: .clear), Self.notice(push: nil),
            Self.notice(push: "{oops"),
        ] {
            #expect(try Self.request(notice).plaintext == notice.webhookBody)
        }
    }

    // MARK: 3993 bytes

    static func pushObject(_ body: String?, title: String? = "Ann") -> String {
        var members: [String] = []
        if let title { members.append(#""title":"\#(title)""#) }
        if let body { members.append(#""body":"\#(body)""#) }
        members.append(#""data":{"room":"r1"}"#)
        members.append(#""extra":[1,2]"#)
        return "{" + members.joined(separator: ",") + "}"
    }

    @Test(arguments: ["a", "é", "👍🏽", "\\\"", "\\n"])
    func aLongBodyIsShortenedToFit(_ unit: String) throws {
        let request = try Self.request(Self.notice(push: Self.pushObject(String(repeating: unit, count: 5000))))
        #expect(request.plaintext.count <= WebPushRequest.maxPlaintextBytes)
        #expect(request.plaintext.count > WebPushRequest.maxPlaintextBytes - 12)
        let push = try Self.json(request.plaintext)["push"]
        #expect(push?["title"]?.stringValue == "Ann")
        #expect(push?["data"] == (try JSONParser.parse(Array(#"{"room":"r1"}"#.utf8))))
        #expect(push?["extra"] != nil)
        let body = try #require(push?["body"]?.stringValue)
        let character = try #require(try JSONParser.parse(Array("\"\(unit)\"".utf8)).stringValue)
        #expect(body.hasSuffix("…") && body.dropLast().allSatisfy { String($0) == character })
        // Everything else is as the webhook says it.
        let plaintext = try Self.json(request.plaintext)
        #expect(plaintext["messageId"]?.stringValue == "m5" && plaintext["unread"]?.int64Value == 4)
    }

    @Test func aLongTitleIsShortenedOnceTheBodyIsGone() throws {
        let title = String(repeating: "T", count: 5000)
        let request = try Self.request(
            Self.notice(push: Self.pushObject(String(repeating: "b", count: 5000), title: title)))
        #expect(request.plaintext.count <= WebPushRequest.maxPlaintextBytes)
        let push = try Self.json(request.plaintext)["push"]
        #expect(push?["body"] == nil)
        #expect(push?["title"]?.stringValue?.hasSuffix("…") == true)
    }

    /// Bulky members go before the text is cut; with nothing to cut, the content-free body.
    @Test func bulkyMembersGoBeforeTheText() throws {
        let bulky = #"{"title":"Ann","body":"Hi","data":{"blob":""# + String(repeating: "d", count: 5000) + #""}}"#
        let request = try Self.request(Self.notice(push: bulky))
        #expect(request.plaintext.count <= WebPushRequest.maxPlaintextBytes)
        #expect(
            try Self.json(request.plaintext)["push"]
                == (try JSONParser.parse(Array(#"{"title":"Ann","body":"Hi"}"#.utf8))))
        // No text to keep: the push is left empty rather than dropped (the message id stays).
        let textless = #"{"data":{"blob":""# + String(repeating: "d", count: 5000) + #""}}"#
        let plaintext = try Self.json(try Self.request(Self.notice(push: textless)).plaintext)
        #expect(plaintext["push"] == .object([]) && plaintext["messageId"]?.stringValue == "m5")
        // Ids beyond anything registration allows: the content-free body, which carries no message id.
        var notice = Self.notice()
        notice.messageId = String(repeating: "m", count: 5000)
        var contentFree = notice
        contentFree.contentFree = true
        #expect(try Self.request(notice).plaintext == contentFree.webhookBody)
        #expect(contentFree.webhookBody.count <= WebPushRequest.maxPlaintextBytes)
    }

    // MARK: Answers

    @Test func answersMeanWhatRFC8030Says() {
        func judge(
            _ status: Int, _ body: String = "", _ headers: [(name: String, value: String)] = []
        ) -> DeliveryOutcome {
            WebPushAnswer.judge(status: status, body: Array(body.utf8), headers: headers)
        }
        #expect(judge(201) == .delivered)
        #expect(judge(202) == .delivered)
        #expect(judge(404) == .deviceGone(reason: "Web Push: HTTP 404"))
        #expect(
            judge(410, #"{"errno":106,"message":"Request did not validate"}"#)
                == .deviceGone(reason: "Web Push: HTTP 410 (Request did not validate)"))
        // The subscription's own refusal (made with another key), or ours for all: `RejectedTokens` tells.
        #expect(judge(403, #"{"reason":"BadJwtToken"}"#) == .tokenRejected(reason: "Web Push: HTTP 403 (BadJwtToken)"))
        #expect(judge(401) == .tokenRejected(reason: "Web Push: HTTP 401"))
        #expect(judge(413) == .dead(reason: "Web Push: HTTP 413"))
        #expect(judge(400, "not json") == .dead(reason: "Web Push: HTTP 400"))
        #expect(judge(301) == .dead(reason: "Web Push: HTTP 301"))
        #expect(
            judge(429, "", [("Retry-After", "120")])
                == .retry(reason: "Web Push: HTTP 429", notBeforeMilliseconds: 120_000))
        #expect(judge(503) == .retry(reason: "Web Push: HTTP 503", notBeforeMilliseconds: nil))
    }

    // MARK: VAPID token

    @Test func theVAPIDTokenLivesTwelveHoursAndIsRenewedInItsLast() {
        let schedule = VAPIDTokenSchedule()
        let hour: Int64 = 3_600_000
        #expect(schedule.action(now: Self.now, currentExpiresAt: nil) == .renew(expiresAt: Self.now + 12 * hour))
        let expiresAt = Self.now + 12 * hour
        #expect(schedule.action(now: Self.now, currentExpiresAt: expiresAt) == .use)
        #expect(schedule.action(now: expiresAt - hour, currentExpiresAt: expiresAt) == .use)
        #expect(
            schedule.action(now: expiresAt - hour + 1, currentExpiresAt: expiresAt)
                == .renew(expiresAt: expiresAt - hour + 1 + 12 * hour))
        #expect(schedule.action(now: expiresAt + 1, currentExpiresAt: expiresAt) != .use)
        // A token outliving a fresh one (the clock went back) is signed anew.
        #expect(schedule.action(now: Self.now - 1, currentExpiresAt: expiresAt) == .renew(expiresAt: expiresAt - 1))
        #expect(schedule.action(now: Int64.max - 1, currentExpiresAt: nil) == .renew(expiresAt: Int64.max))
    }
}
