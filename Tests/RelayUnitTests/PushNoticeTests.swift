import RelayCore
import RelayDelivery
import RelayStore
import RelayTransport
import Testing

/// One push, whatever carries it: what `PushNotice` reads out of a batch, and the webhook body
/// built from it (unchanged by the move out of `PushNotifier`).
@Suite struct PushNoticeTests {
    static func batch(
        kind: PushKind = .message, push: String? = #"{"title":"Ann","body":"Hi","data":{"room":"r1"},"x":1}"#,
        contentFree: Bool = false, collapseKey: String? = nil
    ) -> PushBatch {
        PushBatch(
            userId: "u1", deviceId: "phone", target: "https://example.com/p", contentFree: contentFree, jobIds: [7],
            webhookId: "msg_abc", kind: kind, seqFrom: 3, seqTo: 5, messageId: kind == .message ? "m5" : nil,
            unread: 4, priority: .high, collapseKey: collapseKey, push: push.map { Array($0.utf8) }, attempts: 2,
            expiresAt: Timestamp(milliseconds: 1_700_000_000_000))
    }

    @Test func readsTheTextsAndDataOfThePush() {
        let notice = PushNotice(batch: Self.batch())
        #expect(notice.kind == .message && notice.userId == "u1" && notice.deviceId == "phone")
        #expect(notice.messageId == "m5" && notice.seqFrom == 3 && notice.seqTo == 5 && notice.unread == 4)
        #expect(notice.priority == .high && notice.collapseKey == nil && !notice.contentFree)
        #expect(notice.title == "Ann" && notice.body == "Hi")
        #expect(notice.data == Array(#"{"room":"r1"}"#.utf8))
        #expect(notice.push == Array(#"{"title":"Ann","body":"Hi","data":{"room":"r1"},"x":1}"#.utf8))
        #expect(notice.expiresAt == 1_700_000_000_000 && notice.id == "msg_abc")
    }

    /// A push that is absent, malformed or of the wrong shape gives nil fields, never an error.
    @Test(arguments: [
        nil, "", "{", "[1,2]", "\"text\"", "null", #"{"title":1,"body":["x"],"data":"d"}"#, #"{"data":null}"#,
    ])
    func aBadPushGivesNoText(_ push: String?) {
        let notice = PushNotice(batch: Self.batch(push: push))
        #expect(notice.title == nil && notice.body == nil && notice.data == nil)
        #expect(notice.push == push.map { Array($0.utf8) })  // kept as it was, for the webhook
    }

    @Test func theWebhookBodyIsAsBefore() {
        let message = PushNotice(batch: Self.batch(collapseKey: "room-1")).webhookBody
        #expect(
            String(decoding: message, as: UTF8.self)
                == #"{"type":"message","userId":"u1","deviceId":"phone","messageId":"m5","seq":{"from":3,"to":5},"#
                + #""unread":4,"priority":"high","collapseKey":"room-1","#
                + #""push":{"title":"Ann","body":"Hi","data":{"room":"r1"},"x":1}}"#)
        let contentFree = PushNotice(batch: Self.batch(contentFree: true)).webhookBody
        #expect(
            String(decoding: contentFree, as: UTF8.self)
                == #"{"type":"message","userId":"u1","deviceId":"phone","seq":{"from":3,"to":5},"unread":4,"#
                + #""priority":"high","collapseKey":null}"#)
        let noPush = PushNotice(batch: Self.batch(push: nil)).webhookBody
        #expect(String(decoding: noPush, as: UTF8.self).hasSuffix(#""collapseKey":null,"push":null}"#))
        let clear = PushNotice(batch: Self.batch(kind: .clear)).webhookBody
        #expect(
            String(decoding: clear, as: UTF8.self)
                == #"{"type":"clear","userId":"u1","deviceId":"phone","seq":{"from":3,"to":5},"unread":4,"#
                + #""priority":"high","collapseKey":null}"#)
    }
}
