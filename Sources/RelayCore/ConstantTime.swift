/// Comparisons whose running time does not depend on where two secrets differ.
package enum ConstantTime {
    /// Concrete byte arrays on purpose: a generic version runs unspecialized from other modules,
    /// and looking up its iterator's metadata once cost ~10 % of a request's CPU.
    package static func equals(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        var difference: UInt8 = 0
        for index in a.indices { difference |= a[index] ^ b[index] }
        return difference == 0
    }
}
