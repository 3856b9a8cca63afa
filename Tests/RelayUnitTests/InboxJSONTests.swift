import RelayCore
import RelayLive
import RelayStore
import Testing

@Suite struct InboxJSONTests {
    static let messages = [
        InboxMessage(
            seq: 7, id: "m\"1\\", conversationId: nil, senderId: "ü\n", payload: Array(#"{"a":[1]}"#.utf8),
            createdAt: Timestamp(milliseconds: 1_795_976_799_678)),
        InboxMessage(
            seq: .max, id: "", conversationId: "c", senderId: nil, payload: Array("null".utf8),
            createdAt: Timestamp(milliseconds: 253_402_300_800_001)),
    ]

    /// A catch-up page writes its messages in pieces rather than member by member: still the
    /// documented object, escaped, with nulls, commas between elements, and a frame's `type`.
    @Test func aMessageIsWrittenAsTheDocumentedObject() {
        var page = JSONWriter()
        page.beginArray()
        for message in Self.messages { page.inboxMessage(message) }
        page.endArray()
        #expect(
            String(decoding: page.bytes, as: UTF8.self)
                == #"[{"seq":7,"id":"m\"1\\","conversationId":null,"senderId":"ü\n","payload":{"a":[1]},"#
                + #""createdAt":"2026-11-29T18:26:39.678Z"},{"seq":9223372036854775807,"id":"","conversationId":"c","#
                + #""senderId":null,"payload":null,"createdAt":"10000-01-01T00:00:00.001Z"}]"#)
        var frame = JSONWriter()
        frame.inboxMessage(Self.messages[0], type: "message")
        #expect(
            String(decoding: frame.bytes, as: UTF8.self)
                == #"{"type":"message","seq":7,"id":"m\"1\\","conversationId":null,"senderId":"ü\n","#
                + #""payload":{"a":[1]},"createdAt":"2026-11-29T18:26:39.678Z"}"#)
    }
}
