public import Foundation

/// One message of the user's inbox, delivered to the app once, in seq order.
public struct RelayMessage: Sendable, Equatable {
    /// The per-user sequence number: the resume cursor.
    public var seq: Int64
    /// The chat server's message id.
    public var id: String
    public var conversationId: String?
    public var senderId: String?
    /// The payload object as JSON, exactly as the chat server sent it.
    public var payload: Data
    /// RFC 3339 time the relay accepted it.
    public var createdAt: String

    public init(seq: Int64, id: String, conversationId: String?, senderId: String?, payload: Data, createdAt: String) {
        self.seq = seq
        self.id = id
        self.conversationId = conversationId
        self.senderId = senderId
        self.payload = payload
        self.createdAt = createdAt
    }

    /// Reads a `message` object of the WebSocket protocol or of a catch-up page.
    init?(json object: [String: Any]) {
        guard let seq = (object["seq"] as? NSNumber)?.int64Value, let id = object["id"] as? String,
            let payloadObject = object["payload"],
            let payload = try? JSONSerialization.data(withJSONObject: payloadObject, options: [.fragmentsAllowed])
        else { return nil }
        self.init(
            seq: seq, id: id, conversationId: object["conversationId"] as? String,
            senderId: object["senderId"] as? String,
            payload: payload, createdAt: object["createdAt"] as? String ?? "")
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
