/// Which of the operator's apps a push device belongs to: the set of push credentials (APNs key
/// and topic, FCM project, VAPID key) its pushes are signed with. `default` is the app of the
/// top-level settings, so that a relay with one app never names one.
package struct AppID: Hashable, Comparable, Sendable, CustomStringConvertible {
    package let name: String

    package static let `default` = AppID(unchecked: "default")
    package static let maxLength = 64

    /// 1–64 characters from `[A-Za-z0-9._-]` (it appears in metrics labels, logs and URLs).
    package init?(_ name: String) {
        guard !name.utf8.isEmpty, name.utf8.count <= Self.maxLength,
            name.utf8.allSatisfy({ byte in
                switch byte {
                case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                    UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "-"):
                    return true
                default: return false
                }
            })
        else { return nil }
        self.name = name
    }

    private init(unchecked name: String) { self.name = name }

    package var description: String { name }

    package static func < (lhs: AppID, rhs: AppID) -> Bool { lhs.name < rhs.name }
}
