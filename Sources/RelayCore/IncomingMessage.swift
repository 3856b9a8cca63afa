/// Priority of a message for the push notifier (RFC 8030 "Urgency", reduced to two levels).
package enum Priority: String, Sendable {
    case high
    case normal
}

/// A validated `POST /v1/messages` body.
package struct IncomingMessage: Sendable, Equatable {
    /// The chat server's message id; the idempotency key.
    package var id: String
    package var recipients: [String]
    /// The payload object, compactly serialized; relayed to clients exactly as stored.
    package var payload: [UInt8]
    package var conversationId: String?
    package var senderId: String?
    /// The `push` object (title, body, data, type), compactly serialized.
    package var push: [UInt8]?
    /// `push.type` is `"call"`: its pushes ring at once and alone (`PushKind.call`).
    package var isCall = false
    package var ttlSeconds: Int64
    package var priority: Priority
    package var collapseKey: String?
    /// The badge its pushes carry instead of the relay's unread count: a Matrix homeserver's
    /// `counts.unread` (never read from a `POST /v1/messages` body).
    package var badge: Int64?

    package static let maxRecipients = 1000
    package static let maxTTLSeconds: Int64 = 31_536_000

    /// Decodes and validates a parsed body.
    /// - Parameters:
    ///   - maxPayloadBytes: the largest serialized `payload` accepted (413 beyond).
    ///   - defaultTTLSeconds: the TTL of a message that names none (the retention window).
    package init(json: JSONValue, maxPayloadBytes: Int, defaultTTLSeconds: Int64) throws(ValidationError) {
        let fields = try FieldReader(json)
        id = try fields.string("id")
        guard Identifier.isValidMessageId(id) else {
            throw ValidationError(
                .invalidField, field: "id",
                "'id' must be 1 to 200 bytes without control characters or '/', and not 'batch'")
        }
        recipients = try fields.identifierList("recipients", maxCount: Self.maxRecipients)
        guard let payloadValue = fields.value("payload") else {
            throw ValidationError(.missingField, field: "payload", "'payload' is required")
        }
        guard case .object = payloadValue else {
            throw ValidationError(
                .invalidField, field: "payload", "'payload' must be an object, not \(payloadValue.kindName)")
        }
        payload = payloadValue.serialized
        guard payload.count <= maxPayloadBytes else {
            throw ValidationError(
                .payloadTooLarge, field: "payload",
                "'payload' is \(payload.count) bytes; the limit is \(maxPayloadBytes)")
        }
        conversationId = try fields.optionalString("conversationId", maxLength: 200)
        senderId = try fields.optionalString("senderId", maxLength: 200)
        if let pushValue = try fields.optionalObject("push") {
            let pushFields = try FieldReader(pushValue)
            _ = try pushFields.optionalString("title", maxLength: 1024)
            _ = try pushFields.optionalString("body", maxLength: 4096)
            _ = try pushFields.optionalObject("data")
            switch try pushFields.optionalString("type", maxLength: 16) {
            case nil, "message": break
            case "call": isCall = true
            default:
                throw ValidationError(.invalidField, field: "push.type", "'push.type' must be \"message\" or \"call\"")
            }
            push = pushValue.serialized
        }
        ttlSeconds = try fields.optionalInteger("ttl", in: 1...Self.maxTTLSeconds) ?? defaultTTLSeconds
        if let priorityText = try fields.optionalString("priority", maxLength: 16) {
            guard let value = Priority(rawValue: priorityText) else {
                throw ValidationError(.invalidField, field: "priority", "'priority' must be \"high\" or \"normal\"")
            }
            priority = value
        } else {
            priority = .normal
        }
        collapseKey = try fields.optionalString("collapseKey", maxLength: 128)
    }
}
