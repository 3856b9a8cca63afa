/// An ephemeral signal — typing, recording audio, presence in a conversation: relayed live to
/// the online devices it is meant for, never stored, never pushed, never counted in `unread`.
/// Parsed the same way from a client's `signal` frame and from `POST /v1/signals`.
package struct Signal: Sendable, Equatable {
    package var conversationId: String
    /// What it signals, e.g. `typing`: 1–64 of `A–Z a–z 0–9 . _ : -`.
    package var name: String
    /// The optional `data` object, compactly serialized.
    package var data: [UInt8]?

    package static let maxDataBytes = 1024
    package static let maxNameLength = 64

    package init(conversationId: String, name: String, data: [UInt8]? = nil) {
        self.conversationId = conversationId
        self.name = name
        self.data = data
    }

    package init(_ fields: FieldReader) throws(ValidationError) {
        // The same rule as a message's `conversationId` (room ids such as `!abc:example.org` pass).
        guard let conversation = try fields.optionalString("conversationId", maxLength: 200) else {
            throw ValidationError(.missingField, field: "conversationId", "'conversationId' is required")
        }
        conversationId = conversation
        name = try fields.string("name")
        guard (1...Self.maxNameLength).contains(name.utf8.count),
            name.utf8.allSatisfy({ Self.nameBytes.contains($0) })
        else {
            throw ValidationError(
                .invalidField, field: "name",
                "'name' must be 1-\(Self.maxNameLength) characters of A-Z a-z 0-9 . _ : -")
        }
        data = try fields.optionalObject("data")?.serialized
        if let data, data.count > Self.maxDataBytes {
            throw ValidationError(
                .payloadTooLarge, field: "data", "'data' must be at most \(Self.maxDataBytes) bytes serialized")
        }
    }

    private static let nameBytes: Set<UInt8> = Set(
        Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._:-".utf8))

    /// The members every form of a signal carries (frame, event): `conversationId`, `name`,
    /// `data` when present.
    package func write(into writer: inout JSONWriter) {
        writer.member("conversationId", conversationId)
        writer.member("name", name)
        if let data {
            writer.key("data")
            writer.raw(data)
        }
    }

    /// The frame a recipient's devices get: `{"type":"signal", conversationId, name, senderId?,
    /// data?}`.
    package func frame(senderId: String?) -> [UInt8] {
        var writer = JSONWriter(capacity: 128 + (data?.count ?? 0))
        writer.beginObject()
        writer.member("type", "signal")
        if let senderId { writer.member("senderId", senderId) }
        write(into: &writer)
        writer.endObject()
        return writer.bytes
    }
}
