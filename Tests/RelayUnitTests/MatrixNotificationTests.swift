import RelayCore
import RelayCrypto
import Testing

@Suite struct MatrixNotificationTests {
    private func parse(_ text: String) throws -> MatrixNotification {
        try MatrixNotification(json: try JSONParser.parse(Array(text.utf8)))
    }

    private let message = #"""
        {"notification":{"event_id":"$ev1","room_id":"!r:hs","type":"m.room.message","sender":"@bob:hs",
        "sender_display_name":"Bob","room_name":"Lunch","prio":"low","content":{"msgtype":"m.text","body":"noon?"},
        "counts":{"unread":3,"missed_calls":0},
        "devices":[{"app_id":"org.example.ios","pushkey":"pk1","pushkey_ts":1,"data":{"format":"event_id_only"}},
        {"app_id":"org.example.ios","pushkey":"pk2","data":{}}]}}
        """#

    @Test func readsTheSpecFields() throws {
        let notification = try parse(message)
        #expect(notification.eventId == "$ev1")
        #expect(notification.body == "noon?")
        #expect(notification.unread == 3)
        #expect(!notification.highPriority)
        #expect(notification.devices.map(\.pushkey) == ["pk1", "pk2"])
        #expect(notification.devices.map(\.eventIdOnly) == [true, false])
        // Priority defaults to high; counts and content are optional (a badge update).
        let countsOnly = try parse(
            #"{"notification":{"counts":{"unread":0},"devices":[{"app_id":"a","pushkey":"k"}]}}"#)
        #expect(countsOnly.highPriority && countsOnly.eventId == nil && countsOnly.unread == 0)
    }

    @Test func refusesWhatIsNotANotification() {
        for bad in [
            #"{}"#, #"{"notification":[]}"#, #"{"notification":{"devices":[]}}"#,
            #"{"notification":{"devices":[{"app_id":"a"}]}}"#,
            #"{"notification":{"counts":{"unread":-1},"devices":[{"app_id":"a","pushkey":"k"}]}}"#,
        ] {
            #expect(throws: ValidationError.self) { try parse(bad) }
        }
    }

    /// The same event for the same user always maps to the same message id and body (a retry is
    /// a replay); another user gets another id; `event_id_only` keeps content and names out.
    @Test func mapsToAStableMessage() throws {
        let notification = try parse(message)
        let id = try #require(notification.messageId(userId: "@alice:hs", digest: { Crypto.sha256($0) }))
        #expect(id.hasPrefix("mx_") && id.count == 43)
        #expect(notification.messageId(userId: "@alice:hs", digest: { Crypto.sha256($0) }) == id)
        #expect(notification.messageId(userId: "@carol:hs", digest: { Crypto.sha256($0) }) != id)
        let full = String(
            decoding: notification.messageRequest(id: id, userId: "alice", eventIdOnly: false), as: UTF8.self)
        #expect(full.contains(#""title":"Bob in Lunch","body":"noon?""#))
        #expect(full.contains(#""priority":"normal""#))
        let bare = String(
            decoding: notification.messageRequest(id: id, userId: "alice", eventIdOnly: true), as: UTF8.self)
        #expect(!bare.contains("noon?") && !bare.contains("Bob"))
        #expect(bare.contains(#""counts":{"unread":3,"missed_calls":0}"#))
        let request = try IncomingMessage(
            json: try JSONParser.parse(Array(full.utf8)), maxPayloadBytes: 65536, defaultTTLSeconds: 3600)
        #expect(request.id == id && request.recipients == ["alice"] && request.conversationId == "!r:hs")
    }
}
