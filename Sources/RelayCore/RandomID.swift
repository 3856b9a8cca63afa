/// Random ids: webhook ids (`msg_…`, `clr_…`, `evt_…`), node ids. The one way the relay makes
/// one; not for secrets (those come from `Crypto.randomBytes`).
package enum RandomID {
    /// `prefix` and `bytes` random bytes in lowercase hex, drawn eight at a time (one system
    /// call per eight bytes, not one per byte).
    package static func make(_ prefix: String = "", bytes count: Int) -> String {
        var generator = SystemRandomNumberGenerator()
        var text = Array(prefix.utf8)
        text.reserveCapacity(text.count + count * 2)
        var word: UInt64 = 0
        for index in 0..<count {
            if index % 8 == 0 { word = generator.next() }
            let byte = UInt8(truncatingIfNeeded: word >> (8 * UInt64(index % 8)))
            Hex.append(byte, to: &text)
        }
        return String(decoding: text, as: UTF8.self)
    }
}
