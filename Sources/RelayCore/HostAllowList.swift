import RelayPrimitives

/// The hosts and ports a push or events URL may point at (the SSRF guard's configuration).
///
/// Entries are exact host names (`push.example.com`), wildcard suffixes (`*.example.com`), IP
/// addresses, or CIDR blocks (`10.1.0.0/16`, `fd00::/8`), each optionally followed by a port:
/// `:9000` allows that port only, `:*` any port, and no port the web ports 80 and 443 only — so
/// that allowing a host never opens every service on it (a Docker socket on `127.0.0.1:2375`, an
/// actuator endpoint). IPv6 addresses with a port are written in brackets: `[::1]:9000`,
/// `[fd00::]/8:*`. `*` is any host name — whose addresses the SSRF guard still requires public
/// unless a network entry allows them (`*:443`: Web Push's default). Everything not listed is
/// refused.
package struct HostAllowList: Sendable, Equatable {
    /// Which ports an entry allows.
    package enum Ports: Sendable, Equatable {
        /// 80 and 443: an entry written without a port.
        case web
        case only(Int)
        case any

        func allows(_ port: Int) -> Bool {
            switch self {
            case .web: return port == 80 || port == 443
            case .only(let allowed): return port == allowed
            case .any: return true
            }
        }
    }

    enum Target: Sendable, Equatable {
        /// `*`: any host name (never an IP literal).
        case anyName
        case host(String)
        case suffix(String)
        case network(IPAddress, prefix: Int)
    }

    struct Entry: Sendable, Equatable {
        var target: Target
        var ports: Ports
    }

    var entries: [Entry]
    /// The entries as configured, trimmed and lower-cased (for `check-config`).
    package private(set) var spelled: [String] = []

    /// Allows nothing (the default).
    package static let none = HostAllowList(entries: [])

    /// Any host name on port 443 whose addresses are all public: where browsers' push services
    /// live (`webPushAllowedHosts`' default).
    package static let publicHTTPS: HostAllowList = {
        var list = HostAllowList(entries: [Entry(target: .anyName, ports: .only(443))])
        list.spelled = ["*:443"]
        return list
    }()

    /// Parses the entries; a failure names the offending entry.
    package static func parse(_ list: [String]) -> Result<HostAllowList, ValidationError> {
        var entries: [Entry] = []
        var spelled: [String] = []
        for raw in list {
            let item = raw.trimmingASCIISpaces().lowercased()
            if item.isEmpty { continue }
            guard let entry = Self.entry(item) else {
                return .failure(
                    ValidationError(
                        .invalidField, field: "pushAllowedHosts",
                        "bad entry '\(raw)' (a host, *.suffix, IP or CIDR, optionally with :port or :*; IPv6 in brackets)"
                    ))
            }
            entries.append(entry)
            spelled.append(item)
        }
        var allowList = HostAllowList(entries: entries)
        allowList.spelled = spelled
        return .success(allowList)
    }

    private static func entry(_ item: String) -> Entry? {
        // Split off the port: after a closing bracket, or after the only colon of a name or IPv4.
        var target = Substring(item)
        var portText: Substring?
        if item.hasPrefix("[") {
            guard let close = item.firstIndex(of: "]") else { return nil }
            let rest = item[item.index(after: close)...]
            let inside = item[item.index(after: item.startIndex)..<close]
            var prefix: Substring = ""
            var afterPrefix = rest
            if rest.hasPrefix("/") {
                let end = rest.firstIndex(of: ":") ?? rest.endIndex
                prefix = rest[..<end]
                afterPrefix = rest[end...]
            }
            if afterPrefix.hasPrefix(":") {
                portText = afterPrefix.dropFirst()
            } else if !afterPrefix.isEmpty {
                return nil
            }
            target = inside + prefix
        } else if item.filter({ $0 == ":" }).count == 1, let colon = item.firstIndex(of: ":") {
            target = item[..<colon]
            portText = item[item.index(after: colon)...]
        }
        let ports: Ports
        switch portText {
        case nil: ports = .web
        case "*": ports = .any
        case let text?:
            guard let port = Int(text), (1...65535).contains(port) else { return nil }
            ports = .only(port)
        }
        guard !target.isEmpty else { return nil }
        if let slash = target.firstIndex(of: "/") {
            guard let address = IPAddress(target[..<slash]), let prefix = Int(target[target.index(after: slash)...]),
                prefix >= 0, prefix <= address.bytes.count * 8
            else { return nil }
            return Entry(target: .network(address, prefix: prefix), ports: ports)
        }
        if let address = IPAddress(target) {
            return Entry(target: .network(address, prefix: address.bytes.count * 8), ports: ports)
        }
        guard !target.contains(":"), !target.contains("[") else { return nil }
        if target == "*" { return Entry(target: .anyName, ports: ports) }
        if target.hasPrefix("*.") { return Entry(target: .suffix(String(target.dropFirst(1))), ports: ports) }
        return Entry(target: .host(String(target)), ports: ports)
    }

    /// Whether `host` (as written in a URL, brackets allowed for IPv6) and `port` are allowed.
    package func allows(host rawHost: String, port: Int) -> Bool {
        let host = rawHost.lowercased().trimmingBrackets()
        if let address = IPAddress(host) { return allows(address: address, port: port) }
        return entries.contains { entry in
            guard entry.ports.allows(port) else { return false }
            switch entry.target {
            case .anyName: return true
            case .host(let name): return name == host
            case .suffix(let suffix): return host.hasSuffix(suffix) && host.count > suffix.count
            case .network: return false
            }
        }
    }

    /// Whether a resolved address is inside an allowed network, for `port`.
    package func allows(address: IPAddress, port: Int) -> Bool {
        entries.contains { entry in
            guard entry.ports.allows(port), case .network(let network, let prefix) = entry.target,
                network.bytes.count == address.bytes.count
            else { return false }
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
    func trimmingBrackets() -> String {
        if hasPrefix("["), hasSuffix("]") { return String(dropFirst().dropLast()) }
        return String(self)
    }
}
