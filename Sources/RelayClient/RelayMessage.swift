public import Foundation

/// One message of the user's inbox, delivered to the app once, in seq order.
public struct RelayMessage: Sendable, Equatable {
    /// The per-user sequence number: the resume cursor.
    public var seq: Int64
    /// The chat server's message id.
    public var id: String
    /// The conversation, as the chat server gave it.
    public var conversationId: String?
    /// The sender, as the chat server gave it.
    public var senderId: String?
    /// The payload as JSON, byte for byte as the relay sent it: the chat server's members in their
    /// order, its numbers as written (`1.10` stays `1.10`), compact. `decodePayload(as:)` decodes it.
    public var payload: Data
    /// RFC 3339 time the relay accepted it.
    public var createdAt: String

    /// A message with these fields (for tests and previews).
    public init(seq: Int64, id: String, conversationId: String?, senderId: String?, payload: Data, createdAt: String) {
        self.seq = seq
        self.id = id
        self.conversationId = conversationId
        self.senderId = senderId
        self.payload = payload
        self.createdAt = createdAt
    }

    /// Decodes the payload into an app type.
    public func decodePayload<T: Decodable>(as type: T.Type, using decoder: JSONDecoder = JSONDecoder()) throws -> T {
        try decoder.decode(type, from: payload)
    }

    /// Reads a `message` object of the WebSocket protocol or of a catch-up page; `payload` is
    /// the member's raw bytes from the frame (`JSONSpans`).
    init?(json object: [String: Any], payload: [UInt8]) {
        guard let seq = (object["seq"] as? NSNumber)?.int64Value, let id = object["id"] as? String, !payload.isEmpty
        else { return nil }
        self.init(
            seq: seq, id: id, conversationId: object["conversationId"] as? String,
            senderId: object["senderId"] as? String,
            payload: Data(payload), createdAt: object["createdAt"] as? String ?? "")
    }
}

/// Where the connection stands, for the app's UI.
public enum ConnectionState: Sendable, Equatable {
    case connecting
    /// Connected; receiving what was missed.
    case syncing
    /// Caught up; new messages arrive as they are sent.
    case live
    /// Disconnected; the next attempt is in `retryIn` seconds.
    case waiting(retryIn: Double)
    /// Not trying: `disconnect()` or `enterBackground()` was called.
    case offline
}

/// Why the app must resynchronize from its chat server instead of trusting the relay's range.
public enum ResyncReason: Sendable, Equatable {
    /// The relay's inbox is not the one the cursor belongs to (its database was replaced).
    case epochChanged(newEpoch: String)
    /// Messages after the cursor were pruned (retention or TTL); the inbox now starts at this seq.
    case messagesPruned(firstAvailableSeq: Int64)
}
