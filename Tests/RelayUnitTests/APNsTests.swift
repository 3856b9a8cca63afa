import RelayCore
import RelayCrypto
import RelayTransport
import Testing

/// The APNs request built from a notice, what APNs's answers mean, and when the provider token is
/// renewed.
@Suite struct APNsTests {
    static let token = "0123456789abcdef0123456789ABCDEF0123456789abcdef0123456789abcdef"
    static let now: Int64 = 1_700_000_000_000

    static func notice(
        kind: PushKind = .message, title: String? = "Ann", body: String? = "Hi there", priority: Priority = .high,
        contentFree: Bool = false, collapseKey: String? = nil, data: String? = nil, userId: String = "u1",
        messageId: String? = "m5"
    ) -> PushNotice {
        PushNotice(
            kind: kind, userId: userId, deviceId: "phone", messageId: kind == .message ? messageId : nil, seqFrom: 3,
            seqTo: 5, unread: 4, priority: priority, collapseKey: collapseKey, title: title, body: body,
            data: data.map { Array($0.utf8) }, contentFree: contentFree, expiresAt: now + 3_600_500, id: "msg_abc")
    }

    static func request(_ notice: PushNotice) throws -> APNsRequest {
        try APNsRequest(notice: notice, deviceToken: token, topic: "com.example.chat", now: now)
    }

    static func json(_ bytes: [UInt8]) throws -> JSONValue { try JSONParser.parse(bytes) }
    static func json(_ text: String) throws -> JSONValue { try JSONParser.parse(Array(text.utf8)) }

    static func header(_ request: APNsRequest, _ name: String) -> String? {
        request.headers.first { $0.name == name }?.value
    }

    // MARK: Request

    @Test func aMessageAlertsWithItsTextBadgeAndSound() throws {
        let request = try Self.request(Self.notice(collapseKey: "room-1", data: #"{"room":"r1"}"#))
        #expect(request.path == "/3/device/\(Self.token)")
        #expect(
            request.headers.map(\.name) == [
                "apns-topic", "apns-push-type", "apns-priority", "apns-expiration", "apns-collapse-id", "apns-id",
            ])
        #expect(Self.header(request, "apns-topic") == "com.example.chat")
        #expect(Self.header(request, "apns-push-type") == "alert")
        #expect(Self.header(request, "apns-priority") == "10")
        #expect(Self.header(request, "apns-expiration") == "1700003600")  // seconds, rounded down
        #expect(Self.header(request, "apns-collapse-id") == "room-1")
        #expect(
            try Self.json(request.body)
                == Self.json(
                    #"{"aps":{"alert":{"title":"Ann","body":"Hi there"},"badge":4,"sound":"default"},"#
                        + #""relay":{"userId":"u1","deviceId":"phone","messageId":"m5","seq":{"from":3,"to":5},"#
                        + #""type":"message"},"data":{"room":"r1"}}"#))
    }

    @Test func aNormalPriorityMessageIsSilentAndNotUrgent() throws {
        let request = try Self.request(Self.notice(title: nil, priority: .normal))
        #expect(Self.header(request, "apns-priority") == "5")
        #expect(Self.header(request, "apns-collapse-id") == nil)
        #expect(
            try Self.json(request.body)
                == Self.json(
                    #"{"aps":{"alert":{"body":"Hi there"},"badge":4},"#
                        + #""relay":{"userId":"u1","deviceId":"phone","messageId":"m5","seq":{"from":3,"to":5},"#
                        + #""type":"message"}}"#))
    }

    /// Content-free: a generic alert its service extension replaces; no text, no data, no message id.
    @Test func aContentFreeDeviceGetsAGenericAlertToFetch() throws {
        let request = try Self.request(Self.notice(contentFree: true, data: #"{"room":"r1"}"#))
        #expect(
            try Self.json(request.body)
                == Self.json(
                    #"{"aps":{"alert":{"body":"New message"},"badge":4,"sound":"default","mutable-content":1},"#
                        + #""relay":{"userId":"u1","deviceId":"phone","seq":{"from":3,"to":5},"type":"message"}}"#))
        // A message without any text (or only empty ones) alerts the same way.
        for (title, body) in [(nil, nil), ("", "")] as [(String?, String?)] {
            let bare = try Self.request(Self.notice(title: title, body: body, priority: .normal))
            #expect(
                try Self.json(bare.body)["aps"]
                    == Self.json(#"{"alert":{"body":"New message"},"badge":4,"mutable-content":1}"#))
        }
    }

    /// A clear sets the badge and wakes the app, at priority 5 (never 10), as an `alert` push:
    /// Apple forbids `badge` in a `background` one.
    @Test func aClearSetsTheBadge() throws {
        let request = try Self.request(Self.notice(kind: .clear, priority: .high))
        #expect(Self.header(request, "apns-push-type") == "alert")
        #expect(Self.header(request, "apns-priority") == "5")
        #expect(
            try Self.json(request.body)
                == Self.json(
                    #"{"aps":{"badge":4,"content-available":1},"#
                        + #""relay":{"userId":"u1","deviceId":"phone","seq":{"from":3,"to":5},"type":"clear"}}"#))
    }

    /// One rule for every transport: a key longer than the service takes is hashed to fit, never
    /// dropped — the same key to the same value, so APNs still replaces the older push.
    @Test func aCollapseIdOver64BytesIsHashedToFit() throws {
        let fits = String(repeating: "é", count: 32)  // 64 bytes
        #expect(try Self.header(Self.request(Self.notice(collapseKey: fits)), "apns-collapse-id") == fits)
        let long = fits + "x"
        let hashed = try Self.header(Self.request(Self.notice(collapseKey: long)), "apns-collapse-id")
        #expect(hashed?.utf8.count == 32)
        #expect(hashed == WebPushRequest.topic(for: long, hash: Crypto.sha256))
        #expect(try Self.header(Self.request(Self.notice(collapseKey: long)), "apns-collapse-id") == hashed)
        #expect(try Self.header(Self.request(Self.notice(collapseKey: "")), "apns-collapse-id") == nil)
    }

    /// The same batch keeps its `apns-id` across retries; another batch gets another.
    @Test func theAPNsIdIsAStableUUID() throws {
        var first = Self.notice()
        let id = try #require(try Self.header(Self.request(first), "apns-id"))
        #expect(id == "c0eea3c5-fa22-8569-8f55-0874918a0d68")  // FNV-1a of "msg_abc", computed in Python
        #expect(try Self.header(Self.request(first), "apns-id") == id)
        first.id = "msg_abd"
        #expect(try Self.header(Self.request(first), "apns-id") != id)
        let parts = id.split(separator: "-").map(\.count)
        #expect(parts == [8, 4, 4, 4, 12])
        #expect(id.allSatisfy { $0 == "-" || $0.isHexDigit && !$0.isUppercase })
        let characters = Array(id)
        #expect(characters[14] == "8")  // version 8
        #expect("89ab".contains(characters[19]))  // RFC 9562 variant
    }

    @Test func anExpirationAlreadyPastIsSentAsNow() throws {
        var notice = Self.notice()
        notice.expiresAt = Self.now - 5000
        #expect(try Self.header(Self.request(notice), "apns-expiration") == "1700000000")
    }

    @Test(arguments: ["", "xyz", "0123/../4", "01 23", String(repeating: "a", count: 201)])
    func aTokenThatIsNotHexIsRefused(_ token: String) {
        #expect(throws: APNsRequest.Refusal.badDeviceToken) {
            try APNsRequest(notice: Self.notice(), deviceToken: token, topic: "com.example.chat", now: Self.now)
        }
        #expect(
            APNsRequest.Refusal.badDeviceToken.outcome
                == .deviceGone(reason: "APNs: the device token is not hexadecimal"))
    }

    @Test(arguments: ["", "com.example chat", "com.example\r\nx: y"])
    func aBadTopicIsAMisconfiguration(_ topic: String) {
        #expect(throws: APNsRequest.Refusal.badTopic) {
            try APNsRequest(notice: Self.notice(), deviceToken: Self.token, topic: topic, now: Self.now)
        }
        guard case .misconfigured = APNsRequest.Refusal.badTopic.outcome else {
            Issue.record("a bad topic is ours to fix")
            return
        }
    }

    // MARK: 4096 bytes

    /// `text` is `original` cut on a character boundary and marked with "…".
    static func expectCut(_ text: String?, of original: String, sourceLocation: SourceLocation = #_sourceLocation) {
        guard let text else {
            Issue.record("no text", sourceLocation: sourceLocation)
            return
        }
        #expect(text.hasSuffix("…"), sourceLocation: sourceLocation)
        #expect(original.hasPrefix(String(text.dropLast())), sourceLocation: sourceLocation)
        #expect(text.count < original.count, sourceLocation: sourceLocation)
    }

    @Test(arguments: ["a", "é", "€", "👍🏽", "🇫🇷", "\"", "\n", "e\u{301}"])
    func aLongBodyIsShortenedOnACharacterBoundary(_ unit: String) throws {
        let long = String(repeating: unit, count: 5000)
        let request = try Self.request(Self.notice(body: long))
        #expect(request.body.count <= APNsRequest.maxPayloadBytes)
        // As much as fits: one more character (at most 8 escaped bytes) would not.
        #expect(request.body.count > APNsRequest.maxPayloadBytes - 12)
        let alert = try Self.json(request.body)["aps"]?["alert"]
        #expect(alert?["title"]?.stringValue == "Ann")
        let body = try #require(alert?["body"]?.stringValue)
        Self.expectCut(body, of: long)
        #expect(body.dropLast().allSatisfy { String($0) == unit })  // whole characters only
    }

    @Test func aLongTitleIsShortenedOnceTheBodyIsGone() throws {
        let title = String(repeating: "T", count: 5000)
        let request = try Self.request(Self.notice(title: title, body: String(repeating: "b", count: 5000)))
        #expect(request.body.count <= APNsRequest.maxPayloadBytes)
        let alert = try Self.json(request.body)["aps"]?["alert"]
        #expect(alert?["body"] == nil)
        Self.expectCut(alert?["title"]?.stringValue, of: title)
    }

    /// The chat server's data goes before any text is cut: the user reads the text.
    @Test func bulkyDataGoesBeforeTheText() throws {
        let data = #"{"blob":""# + String(repeating: "d", count: 5000) + #""}"#
        let request = try Self.request(Self.notice(data: data))
        let payload = try Self.json(request.body)
        #expect(request.body.count <= APNsRequest.maxPayloadBytes)
        #expect(payload["data"] == nil)
        #expect(payload["aps"]?["alert"] == (try Self.json(#"{"title":"Ann","body":"Hi there"}"#)))
        #expect(payload["relay"]?["messageId"]?.stringValue == "m5")
    }

    /// Ids beyond anything registration allows still make a payload: `relay` loses its optional
    /// members, then its ids, and in the end the text becomes the generic alert.
    @Test func hugeIdsNeverMakeItFail() throws {
        let huge = String(repeating: "u", count: 5000)
        let request = try Self.request(Self.notice(body: "Hi", userId: huge, messageId: huge))
        #expect(request.body.count <= APNsRequest.maxPayloadBytes)
        let payload = try Self.json(request.body)
        #expect(payload["relay"] == (try Self.json(#"{"seq":{"from":3,"to":5},"type":"message"}"#)))
        #expect(payload["aps"]?["alert"]?["body"]?.stringValue == "Hi")

        let short = String(repeating: "u", count: 2000)
        let trimmed = try Self.json(Self.request(Self.notice(body: "Hi", userId: short, messageId: short)).body)
        #expect(
            trimmed["relay"] == (try Self.json(#"{"userId":"\#(short)","seq":{"from":3,"to":5},"type":"message"}"#)))

        // Ids and texts all huge: the ids go first, then the body, and the title is cut.
        let body = String(repeating: "b", count: 9000)
        let both = try Self.request(Self.notice(title: huge, body: body, userId: huge, messageId: huge))
        #expect(both.body.count <= APNsRequest.maxPayloadBytes)
        let payload2 = try Self.json(both.body)
        #expect(payload2["relay"] == (try Self.json(#"{"seq":{"from":3,"to":5},"type":"message"}"#)))
        #expect(payload2["aps"]?["alert"]?["body"] == nil)
        Self.expectCut(payload2["aps"]?["alert"]?["title"]?.stringValue, of: huge)
    }

    // MARK: Answers

    static func judge(
        _ status: Int, _ reason: String? = nil, headers: [(name: String, value: String)] = []
    )
        -> AnswerOutcome
    {
        let body = reason.map { Array(#"{"reason":"\#($0)","timestamp":1700000000000}"#.utf8) } ?? []
        return APNsAnswer.judge(status: status, body: body, headers: headers)
    }

    @Test func answersMeanWhatAppleSays() {
        #expect(Self.judge(200) == .settled(.delivered))
        // The device token is dead, since Apple's `timestamp`.
        for reason in ["Unregistered", "ExpiredToken"] {
            #expect(
                Self.judge(410, reason) == .settled(.deviceGone(reason: "APNs: \(reason)", since: 1_700_000_000_000)))
        }
        // The token, or every token when the configuration is wrong: judged by `RejectedTokens`.
        for reason in ["BadDeviceToken", "DeviceTokenNotForTopic"] {
            #expect(Self.judge(400, reason) == .settled(.tokenRejected(reason: "APNs: \(reason)")))
        }
        #expect(Self.judge(410) == .settled(.deviceGone(reason: "APNs: HTTP 410")))
        // A stale provider token: renew once.
        #expect(Self.judge(403, "ExpiredProviderToken") == .renewTokenAndRetry(reason: "APNs: ExpiredProviderToken"))
        #expect(
            Self.judge(403, "ExpiredProviderToken").outcomeWithoutRenewal
                == .misconfigured(reason: "APNs: ExpiredProviderToken"))
        // Our credentials or configuration.
        for (status, reason) in [
            (403, "InvalidProviderToken"), (403, "MissingProviderToken"), (403, "BadCertificate"),
            (403, "BadCertificateEnvironment"), (403, "Forbidden"), (403, "SomethingNew"), (400, "BadTopic"),
            (400, "MissingTopic"), (400, "TopicDisallowed"), (429, "TooManyProviderTokenUpdates"),
        ] {
            #expect(Self.judge(status, reason) == .settled(.misconfigured(reason: "APNs: \(reason)")))
        }
        #expect(Self.judge(403) == .settled(.misconfigured(reason: "APNs: HTTP 403")))
        // This request: resending cannot help.
        for (status, reason) in [
            (413, "PayloadTooLarge"), (400, "BadCollapseId"), (400, "BadExpirationDate"), (400, "BadMessageId"),
            (400, "BadPriority"), (400, "InvalidPushType"), (400, "PayloadEmpty"), (400, "DuplicateHeaders"),
            (400, "MissingDeviceToken"), (404, "BadPath"), (405, "MethodNotAllowed"),
        ] {
            #expect(Self.judge(status, reason) == .settled(.dead(reason: "APNs: \(reason)")))
        }
        #expect(Self.judge(302) == .settled(.dead(reason: "APNs: HTTP 302")))
        // Nobody's for long.
        #expect(
            Self.judge(429, "TooManyRequests", headers: [("Retry-After", "30")])
                == .settled(.retry(reason: "APNs: TooManyRequests", notBeforeMilliseconds: 30_000)))
        #expect(
            Self.judge(503, "ServiceUnavailable", headers: [("retry-after", " 7 ")])
                == .settled(.retry(reason: "APNs: ServiceUnavailable", notBeforeMilliseconds: 7000)))
        #expect(
            Self.judge(500, "InternalServerError")
                == .settled(.retry(reason: "APNs: InternalServerError", notBeforeMilliseconds: nil)))
        #expect(Self.judge(502) == .settled(.retry(reason: "APNs: HTTP 502", notBeforeMilliseconds: nil)))
        #expect(
            Self.judge(400, "IdleTimeout") == .settled(.retry(reason: "APNs: IdleTimeout", notBeforeMilliseconds: nil)))
    }

    /// A body that is not APNs's JSON, or a reason with control characters, still makes a reason fit to store.
    @Test func oddBodiesStillMakeAReason() {
        #expect(
            APNsAnswer.judge(status: 400, body: Array("<html>".utf8), headers: [])
                == .settled(.dead(reason: "APNs: HTTP 400")))
        let long = String(repeating: "x", count: 500)
        let verdict = APNsAnswer.judge(status: 400, body: Array(#"{"reason":"a\nb\#(long)"}"#.utf8), headers: [])
        #expect(verdict == .settled(.dead(reason: "APNs: a b" + String(long.prefix(197)))))
    }

    // MARK: Provider token

    static let minute: Int64 = 60_000

    @Test func theTokenIsRenewedAfter40Minutes() {
        let schedule = APNsTokenSchedule()
        #expect(schedule.action(now: Self.now, issuedAt: nil) == .renew)
        #expect(schedule.action(now: Self.now, issuedAt: Self.now) == .use)
        #expect(schedule.action(now: Self.now + 40 * Self.minute - 1, issuedAt: Self.now) == .use)
        #expect(schedule.action(now: Self.now + 40 * Self.minute, issuedAt: Self.now) == .renew)
        // A clock that went back keeps the token.
        #expect(schedule.action(now: Self.now - 10 * Self.minute, issuedAt: Self.now) == .use)
    }

    @Test func theRenewalAgeStaysWithinAppleLimits() {
        #expect(APNsTokenSchedule(renewAfterMs: 5 * Self.minute).renewAfterMs == 20 * Self.minute)
        #expect(APNsTokenSchedule(renewAfterMs: 2 * 60 * Self.minute).renewAfterMs == 59 * Self.minute)
        #expect(APNsTokenSchedule(renewAfterMs: 30 * Self.minute).renewAfterMs == 30 * Self.minute)
    }

    /// ExpiredProviderToken renews, but never within 20 minutes of the last renewal: APNs would
    /// answer 429, and a token that young cannot have expired (the clock or the key is wrong).
    @Test func anExpiryAnswerRenewsOnlyAfter20Minutes() {
        let schedule = APNsTokenSchedule()
        let issued = Self.now
        #expect(schedule.action(now: issued + 20 * Self.minute, issuedAt: issued, expiredAnswerFor: issued) == .renew)
        let young = schedule.action(now: issued + 20 * Self.minute - 1, issuedAt: issued, expiredAnswerFor: issued)
        guard case .misconfigured(let reason) = young else {
            Issue.record("a 19-minute-old token called expired is a misconfiguration, got \(young)")
            return
        }
        #expect(reason.contains("19 min") && reason.contains("clock"))
        #expect(
            schedule.action(now: issued - Self.minute, issuedAt: issued, expiredAnswerFor: issued)
                != .renew)  // clock went back: no renewal either
        // An answer about the previous token: the current one is already fresh.
        #expect(
            schedule.action(now: issued + Self.minute, issuedAt: issued, expiredAnswerFor: issued - 40 * Self.minute)
                == .use)
        #expect(schedule.action(now: issued, issuedAt: nil, expiredAnswerFor: issued) == .renew)
    }
}
