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
    public static let maxAppIdBytes = 64
    public static let maxPushkeyBytes = 512

    public init(json: JSONValue) throws(ValidationError) {
        guard let notification = json["notification"], case .object = notification else {
            throw ValidationError(.missingField, field: "notification", "'notification' must be an object")
        }
        let fields = try FieldReader(notification)
        eventId = try fields.optionalString("event_id", maxLength: 255)
        roomId = try fields.optionalString("room_id", maxLength: 255)
        type = try fields.optionalString("type", maxLength: 255)
        sender = try fields.optionalString("sender", maxLength: 255)
        senderDisplayName = try fields.optionalString("sender_display_name", maxLength: 255)
        roomName = try fields.optionalString("room_name", maxLength: 255)
        let contentValue = try fields.optionalObject("content")
        content = contentValue?.serialized
        body = contentValue?["body"]?.stringValue
        // The spec's default priority is high; `low` is the only other value.
        highPriority = try fields.optionalString("prio", maxLength: 16) != "low"
        if let counts = try fields.optionalObject("counts") {
            let countFields = try FieldReader(counts)
            unread = try countFields.optionalInteger("unread", in: 0...Int64(Int32.max))
            missedCalls = try countFields.optionalInteger("missed_calls", in: 0...Int64(Int32.max))
        }
        guard case .array(let list)? = fields.value("devices"), !list.isEmpty, list.count <= Self.maxDevices else {
            throw ValidationError(
                .invalidField, field: "devices", "'devices' must be an array of 1 to \(Self.maxDevices) pushers")
        }
        devices = []
        for entry in list {
            let device = try FieldReader(entry)
            let appId = try device.string("app_id")
            let pushkey = try device.string("pushkey")
            guard appId.utf8.count <= Self.maxAppIdBytes, pushkey.utf8.count <= Self.maxPushkeyBytes else {
                throw ValidationError(
                    .invalidField, field: "devices",
                    "'app_id' is at most \(Self.maxAppIdBytes) bytes, 'pushkey' at most \(Self.maxPushkeyBytes)")
            }
            let format = try device.optionalObject("data")?["format"]?.stringValue
            devices.append(Device(appId: appId, pushkey: pushkey, eventIdOnly: format == "event_id_only"))
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
