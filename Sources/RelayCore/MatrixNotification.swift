/// A Matrix Push Gateway API notification (`POST /_matrix/push/v1/notify`), validated, and what
/// it becomes in the relay: a message in each addressed user's inbox (pushed or delivered live
/// like any other), or — without an `event_id` — a badge update.
///
/// Pure: the API looks the devices up and stores the result.
public struct MatrixNotification: Sendable, Equatable {
    /// One pusher the homeserver addresses (`devices[]`).
    public struct Device: Sendable, Equatable {
        public var appId: String
        public var pushkey: String
        /// The pusher asked for ids and counts only (`data.format == "event_id_only"`).
        public var eventIdOnly: Bool
    }

    public var eventId: String?
    public var roomId: String?
    public var type: String?
    public var sender: String?
    public var senderDisplayName: String?
    public var roomName: String?
    /// `content`, compactly serialized.
    public var content: [UInt8]?
    /// `content.body` when it is a string (the push's body).
    public var body: String?
    public var highPriority: Bool
    /// `counts.unread`: the homeserver's badge, which the push carries instead of the relay's own count.
    public var unread: Int64?
    public var missedCalls: Int64?
    public var devices: [Device]

    public static let maxDevices = 100
    public static let maxAppIdCharacters = 64
    public static let maxPushkeyCharacters = 512
    static let maxFieldCharacters = 255

    public init(json: JSONValue) throws(ValidationError) {
        guard let notification = json["notification"], case .object = notification else {
            throw ValidationError(.missingField, field: "notification", "'notification' must be an object")
        }
        eventId = try Self.text(notification, "event_id", upTo: Self.maxFieldCharacters)
        roomId = try Self.text(notification, "room_id", upTo: Self.maxFieldCharacters)
        type = try Self.text(notification, "type", upTo: Self.maxFieldCharacters)
        sender = try Self.text(notification, "sender", upTo: Self.maxFieldCharacters)
        senderDisplayName = try Self.text(notification, "sender_display_name", upTo: Self.maxFieldCharacters)
        roomName = try Self.text(notification, "room_name", upTo: Self.maxFieldCharacters)
        let contentValue = try Self.object(notification, "content")
        content = contentValue?.serialized
        body = contentValue?["body"]?.stringValue
        // The spec's default priority is high; `low` is the only other value.
        highPriority = try Self.text(notification, "prio", upTo: 16) != "low"
        if let counts = try Self.object(notification, "counts") {
            let countFields = try FieldReader(counts)
            unread = try countFields.optionalInteger("unread", in: 0...Int64(Int32.max))
            missedCalls = try countFields.optionalInteger("missed_calls", in: 0...Int64(Int32.max))
        }
        guard case .array(let list)? = notification["devices"], !list.isEmpty, list.count <= Self.maxDevices else {
            throw ValidationError(
                .invalidField, field: "devices", "'devices' must be an array of 1 to \(Self.maxDevices) pushers")
        }
        devices = []
        for entry in list {
            guard case .object = entry,
                let appId = try Self.text(entry, "app_id", upTo: Self.maxAppIdCharacters),
                let pushkey = try Self.text(entry, "pushkey", upTo: Self.maxPushkeyCharacters)
            else {
                throw ValidationError(.missingField, field: "devices", "each pusher needs 'app_id' and 'pushkey'")
            }
            let format: String?
            switch try Self.object(entry, "data")?["format"] {
            case nil: format = nil
            case .string(let text)?: format = text
            default: throw ValidationError(.invalidField, field: "format", "'data.format' must be a string")
            }
            devices.append(Device(appId: appId, pushkey: pushkey, eventIdOnly: format == "event_id_only"))
        }
    }

    /// A string member of 1 to `limit` characters (the spec and openapi.yaml count characters,
    /// not bytes); nil when absent or null.
    private static func text(_ object: JSONValue, _ name: String, upTo limit: Int) throws(ValidationError) -> String? {
        switch object[name] {
        case nil, .null?: return nil
        case .string(let text)? where (1...limit).contains(text.unicodeScalars.count): return text
        default:
            throw ValidationError(.invalidField, field: name, "'\(name)' must be a string of 1 to \(limit) characters")
        }
    }

    /// An object member; nil when absent (null is refused: the spec has none).
    private static func object(_ object: JSONValue, _ name: String) throws(ValidationError) -> JSONValue? {
        switch object[name] {
        case nil: return nil
        case .object(let members)?: return .object(members)
        default: throw ValidationError(.invalidField, field: name, "'\(name)' must be an object")
        }
    }

    /// The relay's message id for this event in `userId`'s inbox: stable, so that a homeserver
    /// retrying the notify replays it instead of adding it twice. `digest` is SHA-256 (injected).
    public func messageId(userId: String, digest: ([UInt8]) -> [UInt8]) -> String? {
        guard let eventId else { return nil }
        let hash = digest(Array(eventId.utf8) + [0] + Array(userId.utf8))
        return "mx_"
            + hash.prefix(20).map { byte in
                let hex = Array("0123456789abcdef".utf8)
                return String(decoding: [hex[Int(byte >> 4)], hex[Int(byte & 0xF)]], as: UTF8.self)
            }.joined()
    }

    /// The `POST /v1/messages` body this event makes for `userId`: the payload keeps the
    /// homeserver's field names; `eventIdOnly` leaves the content and the sender's name out of
    /// both the payload and the push (the pusher asked for that).
    public func messageRequest(id: String, userId: String, eventIdOnly: Bool) -> [UInt8] {
        var writer = JSONWriter(capacity: 512 + (content?.count ?? 0))
        writer.beginObject()
        writer.member("id", id)
        writer.key("recipients")
        writer.beginArray()
        writer.string(userId)
        writer.endArray()
        if let roomId { writer.member("conversationId", roomId) }
        if let sender { writer.member("senderId", sender) }
        writer.member("priority", highPriority ? "high" : "normal")
        writer.key("payload")
        writer.beginObject()
        writer.member("event_id", orNull: eventId)
        writer.member("room_id", orNull: roomId)
        if !eventIdOnly {
            writer.member("type", orNull: type)
            writer.member("sender", orNull: sender)
            writer.member("sender_display_name", orNull: senderDisplayName)
            writer.member("room_name", orNull: roomName)
            writer.key("content")
            if let content { writer.raw(content) } else { writer.null() }
        }
        writeCounts(into: &writer)
        writer.endObject()
        writer.key("push")
        writer.beginObject()
        if !eventIdOnly {
            let from = senderDisplayName ?? sender ?? "New message"
            writer.member("title", roomName.map { "\(from) in \($0)" } ?? from)
            if let body { writer.member("body", String(body.prefix(1000))) }
        }
        writer.key("data")
        writer.beginObject()
        writer.member("event_id", orNull: eventId)
        writer.member("room_id", orNull: roomId)
        writeCounts(into: &writer)
        writer.endObject()
        writer.endObject()
        writer.endObject()
        return writer.bytes
    }

    private func writeCounts(into writer: inout JSONWriter) {
        writer.key("counts")
        writer.beginObject()
        if let unread { writer.member("unread", unread) }
        if let missedCalls { writer.member("missed_calls", missedCalls) }
        writer.endObject()
    }
}
