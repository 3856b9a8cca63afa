/// Milliseconds since the Unix epoch, the one time unit of the relay's store and API.
package struct Timestamp: Sendable, Hashable, Comparable {
    package var milliseconds: Int64

    package init(milliseconds: Int64) { self.milliseconds = milliseconds }

    package static func < (lhs: Timestamp, rhs: Timestamp) -> Bool { lhs.milliseconds < rhs.milliseconds }

    package var seconds: Int64 { milliseconds / 1000 }

    /// RFC 3339 in UTC with milliseconds, e.g. `2026-11-29T18:15:14.123Z`.
    package var rfc3339: String {
        var text: [UInt8] = []
        text.reserveCapacity(24)
        appendRFC3339(to: &text)
        return String(decoding: text, as: UTF8.self)
    }

    /// Appends `rfc3339`'s bytes. A catch-up page writes 10,000 of them: a year of four digits
    /// (every real one) is formatted in a stack buffer and appended once, since a byte-by-byte
    /// append cost such a page a tenth of its CPU; other years take the general path.
    package func appendRFC3339(to text: inout [UInt8]) {
        let totalSeconds = milliseconds >= 0 ? milliseconds / 1000 : (milliseconds - 999) / 1000
        let millis = Int(milliseconds - totalSeconds * 1000)
        let days = totalSeconds >= 0 ? totalSeconds / 86_400 : (totalSeconds - 86_399) / 86_400
        let secondOfDay = Int(totalSeconds - days * 86_400)
        let (year, month, day) = Self.civil(fromDays: days)
        guard (0...9999).contains(year) else {
            return Self.appendWide(year, month, day, secondOfDay, millis, to: &text)
        }
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 24) { out in
            func put(_ value: Int, _ width: Int, at offset: Int) {
                var value = value
                for index in (offset..<offset + width).reversed() {
                    out[index] = UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: value % 10)
                    value /= 10
                }
            }
            put(year, 4, at: 0)
            out[4] = UInt8(ascii: "-")
            put(month, 2, at: 5)
            out[7] = UInt8(ascii: "-")
            put(day, 2, at: 8)
            out[10] = UInt8(ascii: "T")
            put(secondOfDay / 3600, 2, at: 11)
            out[13] = UInt8(ascii: ":")
            put(secondOfDay / 60 % 60, 2, at: 14)
            out[16] = UInt8(ascii: ":")
            put(secondOfDay % 60, 2, at: 17)
            out[19] = UInt8(ascii: ".")
            put(millis, 3, at: 20)
            out[23] = UInt8(ascii: "Z")
            text.append(contentsOf: UnsafeBufferPointer(out))
        }
    }

    /// `appendRFC3339` for a year outside 0...9999 (more digits, or a sign).
    private static func appendWide(
        _ year: Int, _ month: Int, _ day: Int, _ secondOfDay: Int, _ millis: Int, to text: inout [UInt8]
    ) {
        digits(Int64(year), 4, &text)
        text.append(UInt8(ascii: "-"))
        digits(Int64(month), 2, &text)
        text.append(UInt8(ascii: "-"))
        digits(Int64(day), 2, &text)
        text.append(UInt8(ascii: "T"))
        digits(Int64(secondOfDay / 3600), 2, &text)
        text.append(UInt8(ascii: ":"))
        digits(Int64(secondOfDay / 60 % 60), 2, &text)
        text.append(UInt8(ascii: ":"))
        digits(Int64(secondOfDay % 60), 2, &text)
        text.append(UInt8(ascii: "."))
        digits(Int64(millis), 3, &text)
        text.append(UInt8(ascii: "Z"))
    }

    private static let powersOfTen: [UInt64] = (0..<20).map { (0..<$0).reduce(1) { product, _ in product * 10 } }

    /// `value` in decimal, zero-padded to `width` digits (a sign first if negative).
    private static func digits(_ value: Int64, _ width: Int, _ text: inout [UInt8]) {
        if value < 0 { text.append(UInt8(ascii: "-")) }
        let magnitude = value.magnitude
        var width = width
        while width < 19, magnitude >= Self.powersOfTen[width] { width += 1 }
        for place in Self.powersOfTen[0..<width].reversed() {
            text.append(UInt8(ascii: "0") + UInt8(magnitude / place % 10))
        }
    }

    /// Reads `rfc3339`'s form back: `YYYY-MM-DDTHH:MM:SS`, optional fraction (milliseconds kept),
    /// then `Z` (UTC only: the API writes no other offset). Nil for anything else.
    package init?(rfc3339 text: String) {
        let bytes = Array(text.utf8)
        func number(_ range: Range<Int>) -> Int64? {
            guard range.upperBound <= bytes.count else { return nil }
            var value: Int64 = 0
            for byte in bytes[range] {
                guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) else { return nil }
                value = value * 10 + Int64(byte - UInt8(ascii: "0"))
            }
            return value
        }
        guard bytes.count >= 20, bytes[4] == UInt8(ascii: "-"), bytes[7] == UInt8(ascii: "-"),
            bytes[10] == UInt8(ascii: "T"), bytes[13] == UInt8(ascii: ":"), bytes[16] == UInt8(ascii: ":"),
            bytes.last == UInt8(ascii: "Z"), let year = number(0..<4), let month = number(5..<7),
            let day = number(8..<10), let hour = number(11..<13), let minute = number(14..<16),
            let second = number(17..<19), (1...12).contains(month), (1...31).contains(day), hour < 24, minute < 60,
            second < 60
        else { return nil }
        var millis: Int64 = 0
        if bytes.count > 20 {
            // ".f…" up to the Z: milliseconds from the first three digits.
            guard bytes[19] == UInt8(ascii: "."), bytes.count > 21, bytes.count <= 30,
                let fraction = number(20..<(bytes.count - 1))
            else { return nil }
            let digits = bytes.count - 21
            millis = digits >= 3 ? fraction / Self.powerOfTen(digits - 3) : fraction * Self.powerOfTen(3 - digits)
        } else if bytes[19] != UInt8(ascii: "Z") {
            return nil
        }
        let days = Self.days(fromCivil: year, month, day)
        guard Self.civil(fromDays: days) == (Int(year), Int(month), Int(day)) else { return nil }  // (Feb 30)
        self.init(milliseconds: ((days * 86_400 + hour * 3600 + minute * 60 + second) * 1000) + millis)
    }

    private static func powerOfTen(_ exponent: Int) -> Int64 {
        (0..<exponent).reduce(Int64(1)) { value, _ in value * 10 }
    }

    /// A proleptic Gregorian date to days since 1970-01-01 (the inverse of `civil(fromDays:)`).
    static func days(fromCivil year: Int64, _ month: Int64, _ day: Int64) -> Int64 {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let doy = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }

    /// Days since 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's algorithm).
    static func civil(fromDays days: Int64) -> (Int, Int, Int) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365
        let y = yoe + era * 400
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let d = doy - (153 * mp + 2) / 5 + 1
        let m = mp < 10 ? mp + 3 : mp - 9
        return (Int(m <= 2 ? y + 1 : y), Int(m), Int(d))
    }
}
