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

    /// Appends `rfc3339`'s bytes (digit by digit: string interpolation cost a catch-up of
    /// 10,000 messages some 5 % of its CPU).
    package func appendRFC3339(to text: inout [UInt8]) {
        let totalSeconds = milliseconds >= 0 ? milliseconds / 1000 : (milliseconds - 999) / 1000
        let millis = milliseconds - totalSeconds * 1000
        let days = totalSeconds >= 0 ? totalSeconds / 86_400 : (totalSeconds - 86_399) / 86_400
        let secondOfDay = totalSeconds - days * 86_400
        let (year, month, day) = Self.civil(fromDays: days)
        Self.digits(Int64(year), 4, &text)
        text.append(UInt8(ascii: "-"))
        Self.digits(Int64(month), 2, &text)
        text.append(UInt8(ascii: "-"))
        Self.digits(Int64(day), 2, &text)
        text.append(UInt8(ascii: "T"))
        Self.digits(secondOfDay / 3600, 2, &text)
        text.append(UInt8(ascii: ":"))
        Self.digits(secondOfDay / 60 % 60, 2, &text)
        text.append(UInt8(ascii: ":"))
        Self.digits(secondOfDay % 60, 2, &text)
        text.append(UInt8(ascii: "."))
        Self.digits(millis, 3, &text)
        text.append(UInt8(ascii: "Z"))
    }

    /// `value` in decimal, zero-padded to `width` digits (a sign first if negative).
    private static func digits(_ value: Int64, _ width: Int, _ text: inout [UInt8]) {
        if value < 0 { text.append(UInt8(ascii: "-")) }
        var magnitude = value.magnitude
        var reversed: [UInt8] = []
        repeat {
            reversed.append(UInt8(ascii: "0") + UInt8(magnitude % 10))
            magnitude /= 10
        } while magnitude > 0
        for _ in reversed.count..<max(width, reversed.count) { text.append(UInt8(ascii: "0")) }
        text.append(contentsOf: reversed.reversed())
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
