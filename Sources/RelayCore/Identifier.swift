/// Rules for the ids the chat server hands us. User and device ids appear in URL paths, so they
/// are limited to characters that need no escaping; message ids are opaque.
package enum Identifier {
    package static let maxUserIdLength = 128
    package static let maxMessageIdLength = 200

    /// 1–128 characters from `[A-Za-z0-9._:@+=-]`.
    package static func isValidUserOrDeviceId(_ value: String) -> Bool {
        let utf8 = value.utf8
        guard !utf8.isEmpty, utf8.count <= maxUserIdLength else { return false }
        return utf8.allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"):
                return true
            case UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: ":"), UInt8(ascii: "@"), UInt8(ascii: "+"),
                UInt8(ascii: "="), UInt8(ascii: "-"):
                return true
            default:
                return false
            }
        }
    }

    /// 1–200 bytes with no control characters and no `/` (the id must stay addressable as one
    /// path segment of `GET /v1/messages/{id}`, and the path arrives percent-decoded), and not
    /// `batch` (that path is `POST /v1/messages/batch`).
    package static func isValidMessageId(_ value: String) -> Bool {
        let utf8 = value.utf8
        guard !utf8.isEmpty, utf8.count <= maxMessageIdLength, value != "batch" else { return false }
        return value.unicodeScalars.allSatisfy { $0.value >= 0x20 && $0.value != 0x7F && $0 != "/" }
    }
}
