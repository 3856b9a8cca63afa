import Foundation
import RelayLocks

package enum LogLevel: String, Sendable, Comparable {
    case debug, info, warning, error

    private var rank: Int {
        switch self {
        case .debug: return 0
        case .info: return 1
        case .warning: return 2
        case .error: return 3
        }
    }

    package static func < (lhs: LogLevel, rhs: LogLevel) -> Bool { lhs.rank < rhs.rank }
}

/// Structured logging to stderr, one logfmt line per event: a constant message plus metadata
/// (`request.id`, `user.id`, …), never data interpolated into the message. Secrets are never
/// passed in: callers log ids, not tokens or keys.
package struct Logger: Sendable {
    package var level: LogLevel
    package var metadata: [(String, String)] = []
    /// Serializes the writes; it counts the lines (a `LockedValue<()>` made the thread sanitizer
    /// report the zero-sized value's accesses as races: nothing real is guarded there).
    private static let written = LockedValue<UInt64>(0)

    package init(level: LogLevel) { self.level = level }

    /// A logger that adds `key=value` to every line.
    package func with(_ key: String, _ value: String) -> Logger {
        var copy = self
        copy.metadata.append((key, value))
        return copy
    }

    package func debug(_ message: StaticString, _ fields: (String, String)...) { log(.debug, message, fields) }
    package func info(_ message: StaticString, _ fields: (String, String)...) { log(.info, message, fields) }
    package func warning(_ message: StaticString, _ fields: (String, String)...) { log(.warning, message, fields) }
    package func error(_ message: StaticString, _ fields: (String, String)...) { log(.error, message, fields) }
    package func info(_ message: StaticString, _ fields: [(String, String)]) { log(.info, message, fields) }
    package func warning(_ message: StaticString, _ fields: [(String, String)]) { log(.warning, message, fields) }

    private func log(_ level: LogLevel, _ message: StaticString, _ fields: [(String, String)]) {
        guard level >= self.level else { return }
        let now = Date().timeIntervalSince1970
        var line = "ts=\(String(format: "%.3f", now)) level=\(level.rawValue) msg=\(Self.quote(message.description))"
        for (key, value) in metadata + fields { line += " \(key)=\(Self.quote(value))" }
        line += "\n"
        Self.written.withLock { count in
            count &+= 1
            FileHandle.standardError.write(Data(line.utf8))
        }
    }

    private static func quote(_ value: String) -> String {
        let plain =
            !value.isEmpty
            && value.unicodeScalars.allSatisfy { $0.value > 0x20 && $0 != "\"" && $0 != "=" && $0.value < 0x7F }
        if plain { return value }
        var out = "\""
        for scalar in value.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            // What some readers take for a line break too (NEL, LINE and PARAGRAPH SEPARATOR: Python's
            // splitlines, JavaScript) or a terminal for a command (DEL, the C1 controls): escaped, so
            // that a client's bytes can never forge or hide a line.
            case "\u{7F}"..."\u{9F}", "\u{2028}", "\u{2029}":
                let hex = String(scalar.value, radix: 16, uppercase: true)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: out.unicodeScalars.append(scalar.value < 0x20 ? "?" : scalar)
            }
        }
        return out + "\""
    }
}
