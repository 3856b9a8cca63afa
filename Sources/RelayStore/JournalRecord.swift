/// A statement a journaled transaction ran, with its values: what replaying it takes.
package struct RecordedStatement: Sendable {
    package var sql: String
    package var bindings: [SQLValue]

    package init(sql: String, bindings: [SQLValue]) {
        self.sql = sql
        self.bindings = bindings
    }
}

/// One group's writes as the message log holds them (`StatementJournal`): the log's id, the
/// record's sequence number, then its statements in order. A statement's text is written once
/// per log (a definition, numbered), after that only its number; values follow, typed.
///
///     record    := id-length u8, id, lsn u64, entry*
///     entry     := 1 number u32 length u32 text        (a definition)
///                | 2 number u32 count u16 value*       (a statement that ran)
///     value     := 0 | 1 i64 | 2 length u32 bytes | 3 length u32 bytes   (null, int, text, blob)
///
/// Little-endian throughout. Pure: encoding and decoding only.
package enum JournalRecord {
    package struct Malformed: Error, Equatable {
        /// Where in the record reading stopped.
        package let offset: Int
    }

    package struct Decoded {
        package var logId: String
        package var lsn: UInt64
        package var statements: [RecordedStatement]
    }

    /// Encodes `statements`; a text not in `numbers` yet is defined here and added to it.
    package static func encode(
        logId: String, lsn: UInt64, _ statements: [RecordedStatement], numbers: inout [String: UInt32]
    ) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(64 + statements.count * 48)
        out.append(UInt8(truncatingIfNeeded: logId.utf8.count))
        out.append(contentsOf: logId.utf8.prefix(255))
        put(lsn, into: &out)
        for statement in statements {
            let number: UInt32
            if let known = numbers[statement.sql] {
                number = known
            } else {
                number = UInt32(truncatingIfNeeded: numbers.count + 1)
                numbers[statement.sql] = number
                out.append(1)
                put(number, into: &out)
                put(UInt32(truncatingIfNeeded: statement.sql.utf8.count), into: &out)
                out.append(contentsOf: statement.sql.utf8)
            }
            out.append(2)
            put(number, into: &out)
            put(UInt16(truncatingIfNeeded: statement.bindings.count), into: &out)
            for value in statement.bindings {
                switch value {
                case .null:
                    out.append(0)
                case .int(let number):
                    out.append(1)
                    put(UInt64(bitPattern: number), into: &out)
                case .text(let text):
                    out.append(2)
                    put(UInt32(truncatingIfNeeded: text.utf8.count), into: &out)
                    out.append(contentsOf: text.utf8)
                case .blob(let bytes):
                    out.append(3)
                    put(UInt32(truncatingIfNeeded: bytes.count), into: &out)
                    out.append(contentsOf: bytes)
                }
            }
        }
        return out
    }

    /// Decodes a record; definitions in it are added to `texts` (a statement may use one made by
    /// an earlier record of the same log).
    package static func decode(_ bytes: [UInt8], texts: inout [UInt32: String]) throws(Malformed) -> Decoded {
        var reader = Reader(bytes: bytes)
        let idLength = Int(try reader.byte())
        let logId = String(decoding: try reader.bytes(idLength), as: UTF8.self)
        let lsn: UInt64 = try reader.integer()
        var statements: [RecordedStatement] = []
        while !reader.atEnd {
            let kind = try reader.byte()
            let number: UInt32 = try reader.integer()
            switch kind {
            case 1:
                let length: UInt32 = try reader.integer()
                texts[number] = String(decoding: try reader.bytes(Int(length)), as: UTF8.self)
            case 2:
                guard let sql = texts[number] else { throw reader.malformed }
                let count: UInt16 = try reader.integer()
                var bindings: [SQLValue] = []
                bindings.reserveCapacity(Int(count))
                for _ in 0..<count { bindings.append(try reader.value()) }
                statements.append(RecordedStatement(sql: sql, bindings: bindings))
            default:
                throw reader.malformed
            }
        }
        return Decoded(logId: logId, lsn: lsn, statements: statements)
    }

    private static func put<T: FixedWidthInteger>(_ value: T, into out: inout [UInt8]) {
        withUnsafeBytes(of: value.littleEndian) { out.append(contentsOf: $0) }
    }

    private struct Reader {
        let bytes: [UInt8]
        var offset = 0

        var atEnd: Bool { offset >= bytes.count }
        var malformed: Malformed { Malformed(offset: offset) }

        mutating func byte() throws(Malformed) -> UInt8 {
            guard offset < bytes.count else { throw malformed }
            defer { offset += 1 }
            return bytes[offset]
        }

        mutating func bytes(_ count: Int) throws(Malformed) -> ArraySlice<UInt8> {
            guard count >= 0, count <= bytes.count - offset else { throw malformed }
            defer { offset += count }
            return bytes[offset..<offset + count]
        }

        mutating func integer<T: FixedWidthInteger>() throws(Malformed) -> T {
            var value = T.zero
            for (shift, byte) in try bytes(MemoryLayout<T>.size).enumerated() {
                value |= T(truncatingIfNeeded: byte) << (shift * 8)
            }
            return value
        }

        mutating func value() throws(Malformed) -> SQLValue {
            switch try byte() {
            case 0: return .null
            case 1: return .int(Int64(bitPattern: try integer()))
            case 2:
                let length: UInt32 = try integer()
                return .text(String(decoding: try bytes(Int(length)), as: UTF8.self))
            case 3:
                let length: UInt32 = try integer()
                return .blob(Array(try bytes(Int(length))))
            default: throw malformed
            }
        }
    }
}
