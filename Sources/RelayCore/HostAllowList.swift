/// The hosts a push or events URL may point at (SSRF guard, DESIGN §2).
///
/// Entries are exact host names (`push.example.com`), wildcard suffixes (`*.example.com`),
/// IP addresses, or CIDR blocks (`10.1.0.0/16`, `fd00::/8`). Everything else is refused.
public struct HostAllowList: Sendable, Equatable {
    enum Entry: Sendable, Equatable {
        case host(String)
        case suffix(String)
        case network(IPAddress, prefix: Int)
    }

    var entries: [Entry]

    /// Parses comma-separated entries; nil with the offending entry when one is malformed.
    public static func parse(_ list: [String]) -> Result<HostAllowList, ValidationError> {
        var entries: [Entry] = []
        for raw in list {
            let item = raw.trimmingSpaces().lowercased()
            if item.isEmpty { continue }
            if let slash = item.firstIndex(of: "/") {
                guard let address = IPAddress(item[..<slash]), let prefix = Int(item[item.index(after: slash)...]),
                    prefix >= 0, prefix <= address.bytes.count * 8
                else { return .failure(ValidationError(.invalidField, field: "pushAllowedHosts", "bad CIDR '\(raw)'")) }
                entries.append(.network(address, prefix: prefix))
            } else if let address = IPAddress(item.trimmingBrackets()) {
                entries.append(.network(address, prefix: address.bytes.count * 8))
            } else if item.hasPrefix("*.") {
                entries.append(.suffix(String(item.dropFirst(1))))
            } else {
                entries.append(.host(item))
            }
        }
        return .success(HostAllowList(entries: entries))
    }

    /// Whether `host` (as written in a URL, brackets allowed for IPv6) is allowed.
    public func allows(host rawHost: String) -> Bool {
        let host = rawHost.lowercased().trimmingBrackets()
        if let address = IPAddress(host) { return allows(address: address) }
        return entries.contains { entry in
            switch entry {
            case .host(let name): return name == host
            case .suffix(let suffix): return host.hasSuffix(suffix) && host.count > suffix.count
            case .network: return false
            }
        }
    }

    /// Whether a resolved address is inside an allowed network.
    public func allows(address: IPAddress) -> Bool {
        entries.contains { entry in
            guard case .network(let network, let prefix) = entry, network.bytes.count == address.bytes.count else {
                return false
            }
            var remaining = prefix
            for (a, b) in zip(network.bytes, address.bytes) {
                if remaining <= 0 { break }
                let mask: UInt8 = remaining >= 8 ? 0xFF : ~(0xFF >> UInt8(remaining))
                if a & mask != b & mask { return false }
                remaining -= 8
            }
            return true
        }
    }
}

extension StringProtocol {
    public func trimmingSpaces() -> String {
        String(drop(while: { $0 == " " || $0 == "\t" }).reversed().drop(while: { $0 == " " || $0 == "\t" }).reversed())
    }

    func trimmingBrackets() -> String {
        if hasPrefix("["), hasSuffix("]") { return String(dropFirst().dropLast()) }
        return String(self)
    }
}
