/// CRC-32C (Castagnoli, the checksum of iSCSI, ext4's metadata and most write-ahead logs):
/// catches a torn or flipped record in a log. Table-driven, one byte at a time.
package enum CRC32C {
    private static let table: [UInt32] = (0..<256).map { index in
        var value = UInt32(index)
        for _ in 0..<8 { value = value & 1 == 1 ? (value >> 1) ^ 0x82F6_3B78 : value >> 1 }
        return value
    }

    // Concrete, not generic over a sequence: called across modules, a generic one ran unspecialized
    // (a witness call per byte: 4 % of the relay's CPU under ingest, `perf`).
    package static func checksum(_ bytes: [UInt8]) -> UInt32 { bytes.withUnsafeBytes(checksum) }

    package static func checksum(_ bytes: ArraySlice<UInt8>) -> UInt32 { bytes.withUnsafeBytes(checksum) }

    package static func checksum(_ bytes: UnsafeRawBufferPointer) -> UInt32 {
        table.withUnsafeBufferPointer { table in
            var crc: UInt32 = 0xFFFF_FFFF
            for byte in bytes { crc = table[Int((crc ^ UInt32(byte)) & 0xFF)] ^ (crc >> 8) }
            return ~crc
        }
    }
}
