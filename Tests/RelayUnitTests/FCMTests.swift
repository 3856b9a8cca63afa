import RelayCore
import RelayTransport
import Testing

/// The FCM HTTP v1 request built from a notice, what FCM's answers mean, and when the access
/// token is renewed.
@Suite struct FCMTests {
    static let now: Int64 = 1_700_000_000_000

    static func notice(
        kind: PushKind = .message, title: String? = "Ann", body: String? = "Hi there", priority: Priority = .high,
        contentFree: Bool = false, collapseKey: String? = "room-1", data: String? = #"{"room":"r1"}"#,
        userId: String = "u1", expiresAt: Int64 = now + 3_600_999
    ) -> PushNotice {
        PushNotice(
            kind: kind, userId: userId, deviceId: "phone", messageId: kind == .message ? "m5" : nil, seqFrom: 3,
            seqTo: 5, unread: 4, priority: priority, collapseKey: collapseKey, title: title, body: body,
            data: data.map { Array($0.utf8) }, contentFree: contentFree, expiresAt: expiresAt, id: "msg_abc")
    }

    static func request(_ notice: PushNotice) throws -> FCMRequest {
        try FCMRequest(notice: notice, registrationToken: "tok:APA91b", projectId: "chat-app", now: now)
    }

    static func json(_ bytes: [UInt8]) throws -> JSONValue { try JSONParser.parse(bytes) }
    static func json(_ text: String) throws -> JSONValue { try JSONParser.parse(Array(text.utf8)) }

    /// What FCM counts against its 4096 bytes: notification and data.
    static func payloadBytes(_ request: FCMRequest) throws -> Int {
        let message = try json(request.body)["message"]
        return (message?["notification"]?.serialized.count ?? 0) + (message?["data"]?.serialized.count ?? 0)
    }

    // MARK: Request

    @Test func aMessageIsANotificationWithStringData() throws {
        let request = try Self.request(Self.notice())
        #expect(request.path == "/v1/projects/chat-app/messages:send")
        #expect(request.headers.map(\.name) == ["content-type"])
        #expect(
            try Self.json(request.body)
                == Self.json(
                    #"{"message":{"token":"tok:APA91b","notification":{"title":"Ann","body":"Hi there"},"#
                        + #""data":{"userId":"u1","deviceId":"phone","type":"message","seqFrom":"3","seqTo":"5","#
                        + #""unread":"4","messageId":"m5","data":"{\"room\":\"r1\"}"},"#
                        + #""android":{"priority":"HIGH","ttl":"3600s","collapse_key":"room-1","#
                        + #""notification":{"notification_count":4}}}}"#))
    }

    /// Content-free, or without text: data only (no notification, no Android notification count),
    /// and for content-free no message id and no chat server data.
    @Test func aContentFreeDeviceGetsDataOnly() throws {
        let request = try Self.request(Self.notice(priority: .normal, contentFree: true, collapseKey: nil))
        #expect(
            try Self.json(request.body)
                == Self.json(
                    #"{"message":{"token":"tok:APA91b","#
                        + #""data":{"userId":"u1","deviceId":"phone","type":"message","seqFrom":"3","seqTo":"5","#
                        + #""unread":"4"},"android":{"priority":"NORMAL","ttl":"3600s"}}}"#))
        let untitled = try Self.json(Self.request(Self.notice(title: "", body: nil)).body)["message"]
        #expect(untitled?["notification"] == nil && untitled?["android"]?["notification"] == nil)
        #expect(untitled?["data"]?["messageId"]?.stringValue == "m5")
    }

    @Test func aClearIsDataOnly() throws {
        let request = try Self.request(Self.notice(kind: .clear, collapseKey: nil))
        #expect(
            try Self.json(request.body)
                == Self.json(
                    #"{"message":{"token":"tok:APA91b","#
                        + #""data":{"userId":"u1","deviceId":"phone","type":"clear","seqFrom":"3","seqTo":"5","#
                        + #""unread":"4"},"android":{"priority":"HIGH","ttl":"3600s"}}}"#))
    }

    /// `ttl` is what is left of the TTL, never negative, never over FCM's 4 weeks.
    @Test(arguments: [
        (now - 1, "0s"), (now, "0s"), (now + 999, "0s"), (now + 1000, "1s"), (now + 2_419_200_000, "2419200s"),
        (now + 31_536_000_000, "2419200s"), (Int64.max, "2419200s"), (Int64.min, "0s"),
    ])
    func theTTLIsWhatIsLeft(_ expiresAt: Int64, _ ttl: String) throws {
        let request = try Self.request(Self.notice(expiresAt: expiresAt))
        #expect(try Self.json(request.body)["message"]?["android"]?["ttl"]?.stringValue == ttl)
    }

    @Test func badInputsAreRefused() {
        for projectId in ["", "chat/app", "chat app", "a?b", String(repeating: "p", count: 101)] {
            #expect(throws: FCMRequest.Refusal.badProjectId) {
                try FCMRequest(notice: Self.notice(), registrationToken: "t", projectId: projectId, now: Self.now)
            }
        }
        #expect(throws: FCMRequest.Refusal.badRegistrationToken) {
            try FCMRequest(notice: Self.notice(), registrationToken: "", projectId: "p", now: Self.now)
        }
        #expect(
            FCMRequest.Refusal.badRegistrationToken.outcome
                == .deviceGone(reason: "FCM: the registration token is empty"))
        #expect(
            FCMRequest.Refusal.badProjectId.outcome
                == .misconfigured(reason: "FCM: the configured project id is malformed"))
    }

    // MARK: 4096 bytes

    @Test(arguments: ["a", "é", "👍🏽", "\"", "\u{1}"])
    func aLongBodyIsShortenedToFit(_ unit: String) throws {
        let long = String(repeating: unit, count: 5000)
        let request = try Self.request(Self.notice(body: long))
        let size = try Self.payloadBytes(request)
        #expect(size <= FCMRequest.maxPayloadBytes && size > FCMRequest.maxPayloadBytes - 12)
        let message = try Self.json(request.body)["message"]
        #expect(message?["notification"]?["title"]?.stringValue == "Ann")
        let body = try #require(message?["notification"]?["body"]?.stringValue)
        #expect(body.hasSuffix("…") && body.dropLast().allSatisfy { String($0) == unit })
        #expect(message?["data"]?["data"] != nil)  // small data kept
    }

    @Test func bulkyDataGoesBeforeTheText() throws {
        let data = #"{"blob":""# + String(repeating: "d", count: 5000) + #""}"#
        let request = try Self.request(Self.notice(data: data))
        #expect(try Self.payloadBytes(request) <= FCMRequest.maxPayloadBytes)
        let message = try Self.json(request.body)["message"]
        #expect(message?["data"]?["data"] == nil && message?["data"]?["messageId"]?.stringValue == "m5")
        #expect(message?["notification"] == (try Self.json(#"{"title":"Ann","body":"Hi there"}"#)))
    }

    @Test func hugeIdsNeverMakeItFail() throws {
        let huge = String(repeating: "u", count: 5000)
        let request = try Self.request(Self.notice(userId: huge))
        #expect(try Self.payloadBytes(request) <= FCMRequest.maxPayloadBytes)
        let message = try Self.json(request.body)["message"]
        #expect(
            message?["data"]
                == (try Self.json(#"{"type":"message","seqFrom":"3","seqTo":"5","unread":"4"}"#)))
        #expect(message?["notification"] == (try Self.json(#"{"title":"Ann","body":"Hi there"}"#)))
        // Huge texts too: the title is cut, the body gone.
        let both = try Self.request(Self.notice(title: huge, body: huge, userId: huge))
        #expect(try Self.payloadBytes(both) <= FCMRequest.maxPayloadBytes)
        let notification = try Self.json(both.body)["message"]?["notification"]
        #expect(notification?["body"] == nil && notification?["title"]?.stringValue?.hasSuffix("…") == true)
    }

    // MARK: Answers

    static func error(
        _ code: Int, _ status: String, _ message: String, errorCode: String? = nil, field: String? = nil
    ) -> [UInt8] {
        var details: [String] = []
        if let errorCode {
            details.append(
                #"{"@type":"type.googleapis.com/google.firebase.fcm.v1.FcmError","errorCode":"\#(errorCode)"}"#)
        }
        if let field {
            details.append(
                #"{"@type":"type.googleapis.com/google.rpc.BadRequest","fieldViolations":[{"field":"\#(field)","#
                    + #""description":"bad"}]}"#)
        }
        return Array(
            #"{"error":{"code":\#(code),"message":"\#(message)","status":"\#(status)","details":[\#(details.joined(separator: ","))]}}"#
                .utf8)
    }

    static func judge(_ status: Int, _ body: [UInt8], headers: [(name: String, value: String)] = []) -> AnswerOutcome {
        FCMAnswer.judge(status: status, body: body, headers: headers)
    }

    @Test func theDeviceIsGoneOnlyWhenItsTokenIsNamed() {
        #expect(Self.judge(200, Array(#"{"name":"projects/p/messages/1"}"#.utf8)) == .settled(.delivered))
        #expect(
            Self.judge(404, Self.error(404, "NOT_FOUND", "Requested entity was not found.", errorCode: "UNREGISTERED"))
                == .settled(.deviceGone(reason: "FCM: UNREGISTERED (Requested entity was not found.)")))
        let invalidToken = "The registration token is not a valid FCM registration token"
        #expect(
            Self.judge(400, Self.error(400, "INVALID_ARGUMENT", invalidToken, errorCode: "INVALID_ARGUMENT"))
                == .settled(.deviceGone(reason: "FCM: INVALID_ARGUMENT (\(invalidToken))")))
        #expect(
            Self.judge(400, Self.error(400, "INVALID_ARGUMENT", "Invalid value", field: "message.token"))
                == .settled(.deviceGone(reason: "FCM: INVALID_ARGUMENT (Invalid value)")))
        // Another field is our request's fault.
        #expect(
            Self.judge(400, Self.error(400, "INVALID_ARGUMENT", "Invalid value", field: "message.data[0].value"))
                == .settled(.dead(reason: "FCM: INVALID_ARGUMENT (Invalid value)")))
        // A 404 that is not UNREGISTERED (no such project) must not disable the device.
        #expect(
            Self.judge(404, Self.error(404, "NOT_FOUND", "Requested entity was not found."))
                == .settled(.misconfigured(reason: "FCM: NOT_FOUND (Requested entity was not found.)")))
    }

    @Test func credentialsAndQuotas() {
        let unauthenticated = Self.judge(401, Self.error(401, "UNAUTHENTICATED", "Request had invalid credentials."))
        #expect(
            unauthenticated == .renewTokenAndRetry(reason: "FCM: UNAUTHENTICATED (Request had invalid credentials.)"))
        #expect(
            unauthenticated.outcomeWithoutRenewal
                == .misconfigured(reason: "FCM: UNAUTHENTICATED (Request had invalid credentials.)"))
        #expect(Self.judge(401, []) == .renewTokenAndRetry(reason: "FCM: HTTP 401"))
        #expect(
            Self.judge(
                401, Self.error(401, "UNAUTHENTICATED", "Auth error from APNS", errorCode: "THIRD_PARTY_AUTH_ERROR"))
                == .settled(.misconfigured(reason: "FCM: THIRD_PARTY_AUTH_ERROR (Auth error from APNS)")))
        #expect(
            Self.judge(403, Self.error(403, "PERMISSION_DENIED", "Permission denied"))
                == .settled(.misconfigured(reason: "FCM: PERMISSION_DENIED (Permission denied)")))
        #expect(
            Self.judge(403, Self.error(403, "PERMISSION_DENIED", "SenderId mismatch", errorCode: "SENDER_ID_MISMATCH"))
                == .settled(.dead(reason: "FCM: SENDER_ID_MISMATCH (SenderId mismatch)")))
        #expect(
            Self.judge(
                429, Self.error(429, "RESOURCE_EXHAUSTED", "Quota exceeded", errorCode: "QUOTA_EXCEEDED"),
                headers: [("Retry-After", "60")])
                == .settled(.retry(reason: "FCM: QUOTA_EXCEEDED (Quota exceeded)", notBeforeMilliseconds: 60_000)))
        #expect(
            Self.judge(
                503, Self.error(503, "UNAVAILABLE", "down", errorCode: "UNAVAILABLE"), headers: [("retry-after", "5")])
                == .settled(.retry(reason: "FCM: UNAVAILABLE (down)", notBeforeMilliseconds: 5000)))
        #expect(
            Self.judge(500, Array("<html>oops</html>".utf8))
                == .settled(.retry(reason: "FCM: HTTP 500", notBeforeMilliseconds: nil)))
        #expect(Self.judge(405, []) == .settled(.dead(reason: "FCM: HTTP 405")))
        #expect(Self.judge(302, []) == .settled(.dead(reason: "FCM: HTTP 302")))
    }

    // MARK: Access token

    @Test func theTokenAnswerIsRead() throws {
        let token = try FCMAccessToken(
            response: Array(#"{"access_token":"ya29.abc","expires_in":3599,"token_type":"Bearer"}"#.utf8),
            requestedAt: Self.now)
        #expect(token == FCMAccessToken(value: "ya29.abc", obtainedAt: Self.now, expiresAt: Self.now + 3_599_000))
        let cases: [(String, FCMAccessToken.ParseError)] = [
            ("", .notAnObject), ("[]", .notAnObject), (#"{"expires_in":3599,"token_type":"Bearer"}"#, .badAccessToken),
            (#"{"access_token":"","expires_in":3599,"token_type":"Bearer"}"#, .badAccessToken),
            (#"{"access_token":"a\r\nb","expires_in":3599,"token_type":"Bearer"}"#, .badAccessToken),
            (#"{"access_token":"a b","expires_in":3599,"token_type":"Bearer"}"#, .badAccessToken),
            (#"{"access_token":"a","expires_in":"3599","token_type":"Bearer"}"#, .badExpiresIn),
            (#"{"access_token":"a","expires_in":0,"token_type":"Bearer"}"#, .badExpiresIn),
            (#"{"access_token":"a","expires_in":86401,"token_type":"Bearer"}"#, .badExpiresIn),
            (#"{"access_token":"a","expires_in":3599}"#, .unsupportedTokenType),
            (#"{"access_token":"a","expires_in":3599,"token_type":"MAC"}"#, .unsupportedTokenType),
        ]
        for (text, error) in cases {
            #expect(throws: error) { try FCMAccessToken(response: Array(text.utf8), requestedAt: Self.now) }
        }
        #expect(
            try FCMAccessToken(
                response: Array(#"{"access_token":"a","expires_in":60,"token_type":"bearer"}"#.utf8),
                requestedAt: 0
            ).expiresAt == 60_000)
    }

    @Test func theTokenIsRenewedFiveMinutesBeforeItExpires() {
        let schedule = FCMAccessTokenSchedule()
        let token = FCMAccessToken(value: "t", obtainedAt: Self.now, expiresAt: Self.now + 3_600_000)
        #expect(schedule.action(now: Self.now, current: nil) == .renew)
        #expect(schedule.action(now: Self.now + 3_300_000 - 1, current: token) == .use)
        #expect(schedule.action(now: Self.now + 3_300_000, current: token) == .renew)
        #expect(schedule.action(now: Self.now + 9_000_000, current: token) == .renew)
        // A lifetime under 10 minutes is renewed halfway.
        let short = FCMAccessToken(value: "t", obtainedAt: Self.now, expiresAt: Self.now + 240_000)
        #expect(schedule.action(now: Self.now + 119_999, current: short) == .use)
        #expect(schedule.action(now: Self.now + 120_000, current: short) == .renew)
    }

    /// A 401 renews, unless the refused token is less than 10 s old (then the service account is
    /// at fault), or already replaced.
    @Test func a401RenewsAFreshTokenOnlyOnce() {
        let schedule = FCMAccessTokenSchedule()
        let token = FCMAccessToken(value: "t", obtainedAt: Self.now, expiresAt: Self.now + 3_600_000)
        #expect(schedule.action(now: Self.now + 10_000, current: token, refusedObtainedAt: Self.now) == .renew)
        guard case .misconfigured = schedule.action(now: Self.now + 9_999, current: token, refusedObtainedAt: Self.now)
        else {
            Issue.record("a token refused within 10 s of being obtained is a misconfiguration")
            return
        }
        #expect(schedule.action(now: Self.now + 1, current: token, refusedObtainedAt: Self.now - 3_000_000) == .use)
        #expect(schedule.action(now: Self.now, current: nil, refusedObtainedAt: Self.now) == .renew)
    }
}
