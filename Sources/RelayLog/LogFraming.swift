import RelayPrimitives

/// How records lie in the append-only log: each is `length | checksum | payload`, the two
/// numbers 32-bit little-endian, the checksum CRC-32C of the payload. Pure: reading a log's
/// bytes back decides which records survived a crash, and whether what follows them is a torn
/// append (cut off, to be truncated) or damage (refused).
package enum LogFraming {
    package static let headerSize = 8
    /// A record's payload is at most this (a message with its recipients and push fields is far
    /// smaller; a larger length in a header is damage, not a record).
    package static let maxPayload = 64 << 20

    /// Appends one record holding `payload` (not empty) to `buffer`.
    package static func append(_ payload: [UInt8], to buffer: inout [UInt8]) {
        append(UInt32(payload.count), to: &buffer)
        append(CRC32C.checksum(payload), to: &buffer)
        buffer.append(contentsOf: payload)
    }

    /// What follows the last whole record.
    package enum Tail: Equatable, Sendable {
        /// Nothing: the log ends on a record's boundary.
        case clean
        /// The last append, cut off by a crash (a header or payload running past the end, or a
        /// last record whose checksum fails with nothing but zeros after it): safe to truncate.
        case torn
        /// A record at this offset fails its checksum or length and data follows it: not a crash's
        /// doing, so nothing after it is read and nothing is cut.
        case damaged(at: Int)
    }

    package struct Scan: Equatable, Sendable {
        /// Each whole record's payload, in order.
        package var payloads: [Range<Int>]
        /// Where the last whole record ends: the log's length once a torn tail is cut.
        package var end: Int
        package var tail: Tail
    }

    /// Reads `bytes` (a log from its start) into its records.
    package static func scan(_ bytes: [UInt8]) -> Scan {
        var payloads: [Range<Int>] = []
        var offset = 0
        while offset < bytes.count {
            guard bytes.count - offset >= headerSize else { return Scan(payloads: payloads, end: offset, tail: .torn) }
            let length = Int(read(bytes, at: offset))
            let checksum = read(bytes, at: offset + 4)
            let start = offset + headerSize
            // (No record is empty: zeros where an append never reached the disk read as length 0.)
            guard length > 0, length <= maxPayload else {
                return Scan(payloads: payloads, end: offset, tail: damage(bytes, at: offset))
            }
            guard bytes.count - start >= length else { return Scan(payloads: payloads, end: offset, tail: .torn) }
            let payload = start..<start + length
            guard CRC32C.checksum(bytes[payload]) == checksum else {
                return Scan(payloads: payloads, end: offset, tail: damage(bytes, at: offset, after: payload.upperBound))
            }
            payloads.append(payload)
            offset = payload.upperBound
        }
        return Scan(payloads: payloads, end: offset, tail: .clean)
    }

    /// A bad record followed only by zeros is the end of an append the disk never finished (the
    /// file grew before its blocks were written); anything else after it is damage.
    private static func damage(_ bytes: [UInt8], at offset: Int, after end: Int? = nil) -> Tail {
        let rest = bytes[(end ?? offset + headerSize)...]
        return rest.allSatisfy { $0 == 0 } ? .torn : .damaged(at: offset)
    }

    private static func append(_ value: UInt32, to buffer: inout [UInt8]) {
        for shift in stride(from: 0, to: 32, by: 8) { buffer.append(UInt8(truncatingIfNeeded: value >> UInt32(shift))) }
    }

    private static func read(_ bytes: [UInt8], at offset: Int) -> UInt32 {
        (0..<4).reduce(0) { $0 | UInt32(bytes[offset + $1]) << UInt32(8 * $1) }
    }
}
