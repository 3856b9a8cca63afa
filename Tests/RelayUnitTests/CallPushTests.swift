import RelayCore
import RelayCrypto
import RelayTransport
import Testing

/// A message marked `push.type: "call"`: when its job falls due, that it goes alone, and what
/// each push service is sent for it.
@Suite struct CallPushTests {
    let policy = DeliveryPolicy(
        pushDelayMs: 3000, ackTimeoutMs: 10_000, retry: RetryPolicy(baseMilliseconds: 100, capMilliseconds: 2000))

    static let voipToken = String(repeating: "ab", count: 32)

    static func batch(kind: PushKind, priority: Priority = .normal, contentFree: Bool = false) -> PushBatch {
        PushBatch(
            userId: "u", deviceId: "phone", target: "", contentFree: contentFree, jobIds: [7], webhookId: "msg_7",
            kind: kind, seqFrom: 4, seqTo: 4, messageId: "call-1", unread: 2, priority: priority, collapseKey: "room",
            push: Array(#"{"title":"Ann","body":"is calling","data":{"callId":"c1"}}"#.utf8), attempts: 0,
            expiresAt: Timestamp(milliseconds: APNsTests.now + 30_000))
    }

    @Test func aCallIsDueAtOnceAloneAndShortLived() throws {
        let call = CommittedMessage(
            userId: "u", seq: 4, messageId: "c", collapseKey: "room", badge: nil, expiresAt: 1000 + 600_000, call: true)
        let offline = policy.committed(
            call, deviceId: "d", online: false, openWindowDue: 2000, now: 1000, webhookId: "w")
        // No collapse (it cancels nothing), no window, no key: due now, given up after 30 s.
        guard offline.count == 1, case .insert(let job) = offline[0] else {
            Issue.record("\(offline)")
            return
        }
        #expect(job.kind == .call && job.dueAt == 1000 && job.collapseKey == nil)
        #expect(job.expiresAt == 1000 + DeliveryPolicy.callLifetimeMs)
        // Online: the call went out live; it waits for the ack like any message.
        let online = policy.committed(call, deviceId: "d", online: true, openWindowDue: nil, now: 1000, webhookId: "w")
        guard case .insert(let live)? = online.first else { Issue.record("\(online)"); return }
        #expect(live.dueAt == 1000 + policy.ackTimeoutMs)
        // A message's TTL shorter than the call lifetime wins.
        var short = call
        short.expiresAt = 1000 + 5000
        guard
            case .insert(let brief)? = policy.committed(
                short, deviceId: "d", online: false, openWindowDue: nil, now: 1000, webhookId: "w"
            ).first
        else { Issue.record("no insert"); return }
        #expect(brief.expiresAt == 6000)
    }

    @Test func aDueCallGoesAloneAndTheOthersWait() throws {
        func job(_ id: Int64, _ kind: PushKind, seq: Int64) -> DueJob {
            DueJob(
                id: id, webhookId: "w\(id)", kind: kind, messageId: "m\(seq)", seq: seq, collapseKey: nil, attempts: 0,
                expiresAt: Timestamp(milliseconds: 9999), priority: .normal, push: nil, badge: nil)
        }
        let jobs = [job(1, .message, seq: 1), job(2, .call, seq: 2), job(3, .message, seq: 3), job(4, .call, seq: 4)]
        let first = try #require(
            PushBatch.coalescing(jobs, userId: "u", deviceId: "d", target: "", contentFree: false, unread: 4))
        #expect(first.kind == .call && first.jobIds == [2] && first.seqFrom == 2 && first.seqTo == 2)
        let rest = try #require(
            PushBatch.coalescing(
                jobs.filter { $0.kind == .message }, userId: "u", deviceId: "d", target: "", contentFree: false,
                unread: 4))
        #expect(rest.kind == .message && rest.jobIds == [1, 3])
    }

    @Test func aCallToAPushKitTokenIsAVoIPPushWithThePushObject() throws {
        let notice = PushNotice(batch: Self.batch(kind: .call))
        #expect(notice.priority == .high)  // it rings
        let request = try APNsRequest(
            notice: notice, deviceToken: Self.voipToken, topic: "com.example.chat", now: APNsTests.now, voip: true)
        #expect(request.path == "/3/device/\(Self.voipToken)")
        #expect(APNsTests.header(request, "apns-topic") == "com.example.chat.voip")
        #expect(APNsTests.header(request, "apns-push-type") == "voip")
        #expect(APNsTests.header(request, "apns-priority") == "10")
        #expect(APNsTests.header(request, "apns-collapse-id") == nil)
        let body = try APNsTests.json(request.body)
        #expect(body["aps"] == nil)
        #expect(body["relay"]?["type"]?.stringValue == "call")
        #expect(body["push"]?["data"]?["callId"]?.stringValue == "c1")
        // A content-free device's call carries ids only.
        let bare = try APNsRequest(
            notice: PushNotice(batch: Self.batch(kind: .call, contentFree: true)), deviceToken: Self.voipToken,
            topic: "com.example.chat", now: APNsTests.now, voip: true)
        #expect(try APNsTests.json(bare.body)["push"] == nil)
    }

    @Test func aCallWithoutAPushKitTokenIsAnUrgentAlert() throws {
        let request = try APNsRequest(
            notice: PushNotice(batch: Self.batch(kind: .call)), deviceToken: APNsTests.token, topic: "com.example.chat",
            now: APNsTests.now)
        #expect(APNsTests.header(request, "apns-push-type") == "alert")
        #expect(APNsTests.header(request, "apns-topic") == "com.example.chat")
        #expect(APNsTests.header(request, "apns-priority") == "10")
        let aps = try APNsTests.json(request.body)["aps"]
        #expect(aps?["alert"]?["body"]?.stringValue == "is calling" && aps?["sound"]?.stringValue == "default")
    }

    @Test func anAnswerAboutThePushKitTokenNeverDisablesTheDevice() {
        let gone = APNsProvider.aboutThePushKitToken(.deviceGone(reason: "APNs: Unregistered", since: 5))
        guard case .dead(let reason) = gone else { Issue.record("\(gone)"); return }
        #expect(reason.contains("PushKit"))
        guard case .dead = APNsProvider.aboutThePushKitToken(.tokenRejected(reason: "APNs: BadDeviceToken")) else {
            Issue.record("a rejected PushKit token")
            return
        }
        #expect(APNsProvider.aboutThePushKitToken(.delivered) == .delivered)
    }

    @Test func anFCMCallIsAnUrgentDataMessageWithItsTexts() throws {
        let request = try FCMRequest(
            notice: PushNotice(batch: Self.batch(kind: .call)), registrationToken: "tok:APA91b", projectId: "chat-app",
            now: APNsTests.now)
        let message = try #require(try FCMTests.json(request.body)["message"])
        #expect(message["notification"] == nil)
        #expect(message["android"]?["priority"]?.stringValue == "HIGH")
        #expect(message["data"]?["type"]?.stringValue == "call")
        #expect(
            message["data"]?["title"]?.stringValue == "Ann" && message["data"]?["body"]?.stringValue == "is calling")
    }

    @Test func pushTypeIsMessageOrCall() throws {
        func incoming(_ push: String) throws -> IncomingMessage {
            try IncomingMessage(
                json: JSONParser.parse(Array(#"{"id":"m","recipients":["u"],"payload":{},"push":\#(push)}"#.utf8)),
                maxPayloadBytes: 1000, defaultTTLSeconds: 60)
        }
        #expect(try incoming(#"{"type":"call","title":"Ann"}"#).isCall)
        #expect(try !incoming(#"{"type":"message"}"#).isCall)
        #expect(try !incoming(#"{"title":"x"}"#).isCall)
        #expect(throws: ValidationError.self) { try incoming(#"{"type":"video"}"#) }
        #expect(throws: ValidationError.self) { try incoming(#"{"type":1}"#) }
    }

    @Test func anAPNsDeviceMayCarryAPushKitToken() throws {
        let device = try PushTransportParsingTests.transport(
            #"{"apns":{"token":"\#(APNsTests.token)","voipToken":"\#(Self.voipToken.uppercased())"}}"#)
        guard case .apns(let apns) = device else { Issue.record("\(device)"); return }
        #expect(apns.voipToken == Self.voipToken)
        #expect(PushTransport(target: device.target) == device)
        #expect(throws: ValidationError.self) {
            try PushTransportParsingTests.transport(#"{"apns":{"token":"\#(APNsTests.token)","voipToken":"xyz"}}"#)
        }
    }
}

/// The trace's one-word answer from a push job as the store keeps it.
@Suite struct TraceDecisionTests {
    @Test func eachJobStateHasItsDecision() {
        #expect(TraceDecision(state: nil, attempts: 0, lastError: nil) == .none)
        #expect(TraceDecision(state: .pending, attempts: 0, lastError: nil) == .waiting)
        #expect(TraceDecision(state: .pending, attempts: 2, lastError: "HTTP 503") == .retrying)
        #expect(TraceDecision(state: .delivered, attempts: 1, lastError: nil) == .pushed)
        #expect(TraceDecision(state: .dead, attempts: 4, lastError: "TTL expired") == .dead)
        #expect(TraceDecision(state: .cancelled, attempts: 0, lastError: CancelReason.acked.text) == .read)
        #expect(TraceDecision(state: .cancelled, attempts: 0, lastError: CancelReason.collapsed.text) == .collapsed)
        #expect(TraceDecision(state: .cancelled, attempts: 1, lastError: "APNs: Unregistered") == .cancelled)
        #expect(TraceDecision(state: .cancelled, attempts: 0, lastError: CancelReason.deviceDeleted.text) == .cancelled)
    }
}
