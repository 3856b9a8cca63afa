public import Foundation

/// An ephemeral signal — typing, recording audio, presence in a conversation. Live only: the
/// relay never stores it, never pushes it, and a device that is offline simply misses it.
///
/// Sending one (``RelayClient/send(signal:)``) hands it to the chat server, which decides who
/// is in the conversation and relays it to their online devices, where it arrives on
/// ``RelayClient/signals``.
public struct RelaySignal: Sendable, Equatable {
    /// The conversation it is about, e.g. a room id.
    public var conversationId: String
    /// What it signals, e.g. `typing`: 1–64 of `A–Z a–z 0–9 . _ : -`.
    public var name: String
    /// Who it is from, as the chat server said (`nil` on signals you send).
    public var senderId: String?
    /// An optional JSON object (at most 1 KiB), as bytes.
    public var data: Data?

    /// A signal to send (leave `senderId` nil: the chat server knows who you are).
    public init(conversationId: String, name: String, data: Data? = nil, senderId: String? = nil) {
        self.conversationId = conversationId
        self.name = name
        self.data = data
        self.senderId = senderId
    }

    /// The client's `signal` frame; nil when `data` is not a JSON object.
    var frame: String? {
        func quoted(_ string: String) -> String? {
            (try? JSONSerialization.data(withJSONObject: string, options: .fragmentsAllowed))
                .map { String(decoding: $0, as: UTF8.self) }
        }
        guard let conversation = quoted(conversationId), let name = quoted(name) else { return nil }
        var frame = #"{"type":"signal","conversationId":\#(conversation),"name":\#(name)"#
        if let data {
            guard (try? JSONSerialization.jsonObject(with: data)) is [String: Any] else { return nil }
            frame += #","data":"# + String(decoding: data, as: UTF8.self)
        }
        return frame + "}"
    }

    /// Reads a `signal` frame; `data` is the member's raw bytes from the frame (`JSONSpans`).
    init?(json object: [String: Any], data: [UInt8]?) {
        guard let conversationId = object["conversationId"] as? String, let name = object["name"] as? String else {
            return nil
        }
        self.init(
            conversationId: conversationId, name: name, data: data.map { Data($0) },
            senderId: object["senderId"] as? String)
    }
}

/// Why ``RelayClient/send(signal:)`` could not send.
public enum RelaySignalError: Error, Sendable, Equatable {
    /// No socket is open: signals are live only, so there is nothing to queue them for.
    case notConnected
    /// `data` is not a JSON object (or the strings cannot be encoded).
    case invalid
}
