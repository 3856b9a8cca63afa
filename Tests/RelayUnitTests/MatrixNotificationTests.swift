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

    /// Only a body that is not a notify is refused: no JSON object, wrong types, no
    /// `notification`, a pusher without `app_id`/`pushkey`.
    @Test func refusesWhatIsNotANotification() {
        for bad in [
            #"{}"#, #"{"notification":[]}"#, #"{"notification":{}}"#,
            #"{"notification":{"devices":[{"app_id":"a"}]}}"#,
            #"{"notification":{"devices":[{"app_id":"a","pushkey":7}]}}"#,
            #"{"notification":{"sender":7,"devices":[{"app_id":"a","pushkey":"k"}]}}"#,
            #"{"notification":{"counts":{"unread":"3"},"devices":[{"app_id":"a","pushkey":"k"}]}}"#,
            #"{"notification":{"content":"hi","devices":[{"app_id":"a","pushkey":"k"}]}}"#,
        ] {
            #expect(throws: ValidationError.self) { try parse(bad) }
        }
    }

    /// What a homeserver may send parses, whatever its lengths: counts are clamped, empty
    /// strings are absent, no pusher is no work.
    @Test func acceptsWhatAHomeserverMaySend() throws {
        let clamped = try parse(
            #"{"notification":{"event_id":"$e","sender_display_name":"","counts":{"unread":-1,"missed_calls":1e30},"#
                + #""devices":[]}}"#)
        #expect(clamped.unread == 0 && clamped.missedCalls == Int64(Int32.max))
        #expect(clamped.senderDisplayName == nil && clamped.devices.isEmpty)
        let longPusher = try parse(
            #"{"notification":{"devices":[{"app_id":"\#(String(repeating: "a", count: 65))","pushkey":"k"}]}}"#)
        #expect(longPusher.devices.count == 1)
    }

    /// Long ids, names and bodies still make a message `POST /v1/messages` accepts (each case the
    /// relay once refused with 400 or 413): the push's text is shortened on a character boundary
    /// with an ellipsis, ids too long for a message field are hashed there (stably) and carried
    /// whole in the payload; content that does not fit the payload limit is left out of it.
    @Test func longFieldsMakeAValidMessage() throws {
        let cjk = String(repeating: "漢", count: 200)
        let emoji = String(repeating: "👩‍👩‍👧‍👦", count: 40)
        let cases: [(name: String, fields: String)] = [
            ("248-byte sender", #""sender":"@\#(String(repeating: "s", count: 237)):hs.org""#),
            ("206-byte room", #""room_id":"!\#(String(repeating: "r", count: 198)):hs.org""#),
            ("256-character name", #""sender_display_name":"\#(String(repeating: "n", count: 256))""#),
            ("CJK names", #""sender_display_name":"\#(cjk)","room_name":"\#(cjk)""#),
            (
                "64,500-byte body",
                #""sender_display_name":"\#(emoji)","content":{"body":"\#(String(repeating: "b", count: 64_500))"}"#
            ),
        ]
        for (name, fields) in cases {
            let notification = try parse(
                #"{"notification":{"event_id":"$ev","#
                    + fields + #","devices":[{"app_id":"a","pushkey":"k"}]}}"#)
            let request = notification.messageRequest(
                id: "mx_1", userId: "alice", eventIdOnly: false, maxPayloadBytes: 65536, digest: { Crypto.sha256($0) })
            let json = try JSONParser.parse(request)
            let message = try IncomingMessage(json: json, maxPayloadBytes: 65536, defaultTTLSeconds: 60)
            let push = try #require(json["push"], "\(name)")
            let title = try #require(push["title"]?.stringValue)
            #expect(title.utf8.count <= MatrixNotification.maxTitleBytes, "\(name)")
            #expect((push["body"]?.stringValue?.utf8.count ?? 0) <= MatrixNotification.maxBodyBytes, "\(name)")
            #expect((message.conversationId?.utf8.count ?? 0) <= 200 && (message.senderId?.utf8.count ?? 0) <= 200)
            // The same notify maps to the same message (a retry is a replay).
            #expect(
                notification.messageRequest(
                    id: "mx_1", userId: "alice", eventIdOnly: false, maxPayloadBytes: 65536,
                    digest: { Crypto.sha256($0) }) == request)
        }
        let cut = try parse(
            #"{"notification":{"event_id":"$ev","sender_display_name":"\#(cjk)","room_name":"\#(cjk)","#
                + #""sender":"@\#(String(repeating: "s", count: 237)):hs.org","content":{"body":"\#(emoji)"},"#
                + #""devices":[{"app_id":"a","pushkey":"k"}]}}"#)
        let json = try JSONParser.parse(
            cut.messageRequest(
                id: "mx_1", userId: "alice", eventIdOnly: false, maxPayloadBytes: 65536, digest: { Crypto.sha256($0) }))
        let title = try #require(json["push"]?["title"]?.stringValue)
        #expect(title.hasPrefix("漢漢") && title.hasSuffix("漢…") && title.contains("… in 漢"))
        #expect(json["senderId"]?.stringValue?.hasPrefix("mx_") == true)
        #expect(json["payload"]?["sender"]?.stringValue == cut.sender)
        // 64,500 bytes of body and a 1 KB name overflow 64 KiB: the payload keeps ids and names.
        let big = try parse(
            #"{"notification":{"event_id":"$ev","sender_display_name":"\#(emoji)","#
                + #""content":{"body":"\#(String(repeating: "b", count: 64_500))"},"devices":[{"app_id":"a","pushkey":"k"}]}}"#
        )
        let bigJSON = try JSONParser.parse(
            big.messageRequest(
                id: "mx_1", userId: "alice", eventIdOnly: false, maxPayloadBytes: 65536, digest: { Crypto.sha256($0) }))
        #expect(bigJSON["payload"]?["content"] == nil && bigJSON["payload"]?["sender_display_name"] != nil)
        #expect(bigJSON["push"]?["body"]?.stringValue?.hasSuffix("b…") == true)
    }

    /// Shortening never splits a Unicode scalar, and prefers whole characters.
    @Test func shorteningKeepsCharactersWhole() {
        #expect(MatrixNotification.shortened("short", toBytes: 10) == "short")
        #expect(MatrixNotification.shortened("abcdefghijk", toBytes: 10) == "abcdefg…")
        // "é" as e + U+0301 is one character of 3 bytes: kept whole or not at all.
        #expect(
            MatrixNotification.shortened("ab" + String(repeating: "e\u{301}", count: 5), toBytes: 10) == "abe\u{301}…")
        // One character longer than the budget is cut between scalars.
        let family = "👩‍👩‍👧‍👦"
        let cut = MatrixNotification.shortened(family, toBytes: 12)
        #expect(cut.utf8.count <= 12 && cut.hasSuffix("…") && cut.unicodeScalars.first == "👩")
        for limit in 4...40 {
            let text = MatrixNotification.shortened(String(repeating: "漢👍🏽", count: 10), toBytes: limit)
            #expect(text.utf8.count <= limit)
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
            decoding: notification.messageRequest(
                id: id, userId: "alice", eventIdOnly: false, maxPayloadBytes: 65536, digest: { Crypto.sha256($0) }),
            as: UTF8.self)
        #expect(full.contains(#""title":"Bob in Lunch","body":"noon?""#))
        #expect(full.contains(#""priority":"normal""#))
        let bare = String(
            decoding: notification.messageRequest(
                id: id, userId: "alice", eventIdOnly: true, maxPayloadBytes: 65536, digest: { Crypto.sha256($0) }),
            as: UTF8.self)
        #expect(!bare.contains("noon?") && !bare.contains("Bob"))
        #expect(bare.contains(#""counts":{"unread":3,"missed_calls":0}"#))
        let request = try IncomingMessage(
            json: try JSONParser.parse(Array(full.utf8)), maxPayloadBytes: 65536, defaultTTLSeconds: 3600)
        #expect(request.id == id && request.recipients == ["alice"] && request.conversationId == "!r:hs")
    }
}
