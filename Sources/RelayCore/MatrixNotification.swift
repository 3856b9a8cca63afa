/// A Matrix Push Gateway API notification (`POST /_matrix/push/v1/notify`), validated, and what
/// it becomes in the relay: a message in each addressed user's inbox (pushed or delivered live
/// like any other), or — without an `event_id` — a badge update.
///
/// Pure: the API looks the devices up and stores the result.
package struct MatrixNotification: Sendable, Equatable {
    /// One pusher the homeserver addresses (`devices[]`).
    package struct Device: Sendable, Equatable {
        package var appId: String
        package var pushkey: String
        /// The pusher asked for ids and counts only (`data.format == "event_id_only"`).
        package var eventIdOnly: Bool
    }

    package var eventId: String?
    package var roomId: String?
    package var type: String?
    package var sender: String?
    package var senderDisplayName: String?
    package var roomName: String?
    /// `content`, compactly serialized.
    package var content: [UInt8]?
    /// `content.body` when it is a string (the push's body).
    package var body: String?
    package var highPriority: Bool
    /// `counts.unread`: the homeserver's badge, which the push carries instead of the relay's own count.
    package var unread: Int64?
    package var missedCalls: Int64?
    package var devices: [Device]

    package static let maxDevices = 100
    /// The longest `app_id` and `pushkey` a pusher may have (the client-server spec's limits):
    /// a longer one cannot be a registered device and comes back in `rejected`.
    package static let maxAppIdCharacters = 64
    package static let maxPushkeyCharacters = 512
    /// What a push's title and body are shortened to: a push service's payload is ~4 KiB
    /// (APNs, FCM), and the title and body share it with the ids.
    package static let maxTitleBytes = 512
    package static let maxBodyBytes = 2048
    /// Each name's share of the title, so that a long sender name leaves room for the room's.
    static let maxNameBytes = 240
    /// The longest `conversationId` and `senderId` a message carries; a longer room or user id
    /// is carried as its digest there (and whole in the payload).
    static let maxMessageIdBytes = 200

    /// Parses a notify. Only its shape is checked (types, the `notification` object, 0 to
    /// `maxDevices` pushers): a homeserver retries a refused notify and holds every later one
    /// behind it, so nothing a well-formed notify carries — however long — refuses it. Empty
    /// strings count as absent; counts are clamped to 0…2³¹−1.
    package init(json: JSONValue) throws(ValidationError) {
        guard let notification = json["notification"], case .object = notification else {
            throw ValidationError(.missingField, field: "notification", "'notification' must be an object")
        }
        eventId = try Self.text(notification, "event_id")
        roomId = try Self.text(notification, "room_id")
        type = try Self.text(notification, "type")
        sender = try Self.text(notification, "sender")
        senderDisplayName = try Self.text(notification, "sender_display_name")
        roomName = try Self.text(notification, "room_name")
        let contentValue = try Self.object(notification, "content")
        content = contentValue?.serialized
        body = contentValue?["body"]?.stringValue.flatMap { $0.isEmpty ? nil : $0 }
        // The spec's default priority is high; `low` is the only other value.
        highPriority = try Self.text(notification, "prio") != "low"
        if let counts = try Self.object(notification, "counts") {
            unread = try Self.count(counts, "unread")
            missedCalls = try Self.count(counts, "missed_calls")
        }
        let list: [JSONValue]
        switch notification["devices"] {
        case .array(let entries)? where entries.count <= Self.maxDevices: list = entries
        default:
            throw ValidationError(
                .invalidField, field: "devices", "'devices' must be an array of at most \(Self.maxDevices) pushers")
        }
        devices = []
        for entry in list {
            guard case .object = entry, let appId = entry["app_id"]?.stringValue,
                let pushkey = entry["pushkey"]?.stringValue
            else {
                throw ValidationError(
                    .missingField, field: "devices", "each pusher needs 'app_id' and 'pushkey' strings")
            }
            let format: String?
            switch try Self.object(entry, "data")?["format"] {
            case nil, .null?: format = nil
            case .string(let text)?: format = text
            default: throw ValidationError(.invalidField, field: "format", "'data.format' must be a string")
            }
            devices.append(Device(appId: appId, pushkey: pushkey, eventIdOnly: format == "event_id_only"))
        }
    }

    /// A string member, any length; nil when absent, null or empty.
    private static func text(_ object: JSONValue, _ name: String) throws(ValidationError) -> String? {
        switch object[name] {
        case nil, .null?: return nil
        case .string(let text)?: return text.isEmpty ? nil : text
        default: throw ValidationError(.invalidField, field: name, "'\(name)' must be a string")
        }
    }

    /// An object member; nil when absent or null.
    private static func object(_ object: JSONValue, _ name: String) throws(ValidationError) -> JSONValue? {
        switch object[name] {
        case nil, .null?: return nil
        case .object(let members)?: return .object(members)
        default: throw ValidationError(.invalidField, field: name, "'\(name)' must be an object")
        }
    }

    /// A count: any number, clamped to 0…2³¹−1 (a badge); nil when absent or null.
    private static func count(_ object: JSONValue, _ name: String) throws(ValidationError) -> Int64? {
        switch object[name] {
        case nil, .null?: return nil
        case .number(let text)?:
            // (A JSON number always reads as a Double, ±infinity when huge; the clamp takes those too.)
            let value = Double(text) ?? 0
            return Int64(min(max(value, 0), Double(Int32.max)).rounded(.down))
        default: throw ValidationError(.invalidField, field: name, "'\(name)' must be a number")
        }
    }

    /// `text` cut to at most `maxBytes` bytes of UTF-8, ending in "…" when cut. It is cut
    /// between characters (grapheme clusters); a single character longer than the budget is cut
    /// between Unicode scalars, never inside one.
    package static func shortened(_ text: String, toBytes maxBytes: Int) -> String {
        guard text.utf8.count > maxBytes else { return text }
        let ellipsis = "\u{2026}"
        let budget = maxBytes - ellipsis.utf8.count
        guard budget > 0 else { return "" }
        var kept = ""
        var used = 0
        for character in text {
            let size = character.utf8.count
            guard used + size <= budget else { break }
            kept.append(character)
            used += size
        }
        if kept.isEmpty {
            var scalars = String.UnicodeScalarView()
            for scalar in text.unicodeScalars {
                let size = UTF8.width(scalar)
                guard used + size <= budget else { break }
                scalars.append(scalar)
                used += size
            }
            kept = String(scalars)
        }
        return kept + ellipsis
    }

    /// 40 hex digits of `digest(bytes)`: how the relay names what the homeserver names with
    /// something too long for a message's field, stably (a retry maps to the same name).
    static func hashed(_ bytes: [UInt8], digest: ([UInt8]) -> [UInt8]) -> String {
        Hex.string(digest(bytes).prefix(20))
    }

    /// A room or user id as a message's `conversationId`/`senderId`: whole when it fits, else
    /// `mx_` and its digest (the payload carries it whole).
    static func messageField(_ id: String, digest: ([UInt8]) -> [UInt8]) -> String {
        id.utf8.count <= maxMessageIdBytes ? id : "mx_" + hashed(Array(id.utf8), digest: digest)
    }

    /// The relay's message id for this event in `userId`'s inbox: stable, so that a homeserver
    /// retrying the notify replays it instead of adding it twice. `digest` is SHA-256 (injected).
    package func messageId(userId: String, digest: ([UInt8]) -> [UInt8]) -> String? {
        guard let eventId else { return nil }
        return "mx_" + Self.hashed(Array(eventId.utf8) + [0] + Array(userId.utf8), digest: digest)
    }

    /// How much of the event a message's payload carries: the most that fits the relay's
    /// payload limit, in this order (the client can fetch the rest by `event_id`).
    enum PayloadDetail: CaseIterable {
        /// ids, names, `content` and counts.
        case full
        /// `content` left out.
        case withoutContent
        /// ids and counts (what an `event_id_only` pusher gets).
        case idsOnly
        /// An empty object: the ids are in the push's `data`.
        case empty
    }

    /// The `POST /v1/messages` body this event makes for `userId`; it always passes that
    /// endpoint's checks. The payload keeps the homeserver's field names, whole, and is cut down
    /// (`PayloadDetail`) to fit `maxPayloadBytes`; the push's title and body are shortened to
    /// `maxTitleBytes`/`maxBodyBytes`; a room or sender id too long for `conversationId` or
    /// `senderId` goes there as its digest. `eventIdOnly` (every addressed pusher of the user
    /// asked for ids only) leaves the content and the names out of both payload and push.
    package func messageRequest(
        id: String, userId: String, eventIdOnly: Bool, maxPayloadBytes: Int, digest: ([UInt8]) -> [UInt8]
    ) -> [UInt8] {
        var payload: [UInt8] = [UInt8(ascii: "{"), UInt8(ascii: "}")]
        for detail in PayloadDetail.allCases where !(eventIdOnly && (detail == .full || detail == .withoutContent)) {
            let candidate = self.payload(detail)
            if candidate.count <= maxPayloadBytes {
                payload = candidate
                break
            }
        }
        var writer = JSONWriter(capacity: 1024 + payload.count)
        writer.beginObject()
        writer.member("id", id)
        writer.key("recipients")
        writer.beginArray()
        writer.string(userId)
        writer.endArray()
        if let roomId { writer.member("conversationId", Self.messageField(roomId, digest: digest)) }
        if let sender { writer.member("senderId", Self.messageField(sender, digest: digest)) }
        writer.member("priority", highPriority ? "high" : "normal")
        writer.key("payload")
        writer.raw(payload)
        writer.key("push")
        writer.beginObject()
        if !eventIdOnly {
            writer.member("title", title)
            if let body { writer.member("body", Self.shortened(body, toBytes: Self.maxBodyBytes)) }
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

    /// "Sender in Room", each name shortened to its share, at most `maxTitleBytes`.
    var title: String {
        let from = Self.shortened(senderDisplayName ?? sender ?? "New message", toBytes: Self.maxNameBytes)
        guard let roomName else { return from }
        return Self.shortened(
            "\(from) in \(Self.shortened(roomName, toBytes: Self.maxNameBytes))", toBytes: Self.maxTitleBytes)
    }

    private func payload(_ detail: PayloadDetail) -> [UInt8] {
        var writer = JSONWriter(capacity: 512 + (detail == .full ? content?.count ?? 0 : 0))
        writer.beginObject()
        if detail != .empty {
            writer.member("event_id", orNull: eventId)
            writer.member("room_id", orNull: roomId)
        }
        if detail == .full || detail == .withoutContent {
            writer.member("type", orNull: type)
            writer.member("sender", orNull: sender)
            writer.member("sender_display_name", orNull: senderDisplayName)
            writer.member("room_name", orNull: roomName)
        }
        if detail == .full {
            writer.key("content")
            if let content { writer.raw(content) } else { writer.null() }
        }
        if detail != .empty { writeCounts(into: &writer) }
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
