import Glibc
package import RelayCore

/// Decides where a webhook may connect (docs/ARCHITECTURE.md §2): the host must be allowed by configuration,
/// and a host name must resolve only to public addresses or to networks the operator allowed.
/// Runs at delivery, after DNS resolution; the client then connects to the checked address.
package struct SSRFGuard: Sendable {
    package let allowList: HostAllowList
    /// The setting the allow-list comes from, for the refusal's text.
    package let setting: String

    package init(allowList: HostAllowList, setting: String = "pushAllowedHosts") {
        self.allowList = allowList
        self.setting = setting
    }

    /// Why no address may be used.
    package enum Refusal: Error, Sendable, Equatable, CustomStringConvertible {
        case notAllowed(setting: String)
        case nonPublic
        /// No answer from the resolver (which may be down for a moment: SERVFAIL, a timeout):
        /// not the URL's fault, so a delivery tries again like after a connection error.
        case unresolved

        /// Final: the same URL will be refused again.
        package var isFinal: Bool { self != .unresolved }

        package var description: String {
            switch self {
            case .notAllowed(let setting): "host or port is not allowed by \(setting)"
            case .nonPublic: "host resolves to a non-public address"
            case .unresolved: "host does not resolve"
            }
        }
    }

    /// The addresses to connect to, or why none may be used.
    package func addresses(for url: PushURL) -> Result<[IPAddress], Refusal> {
        guard allowList.allows(host: url.host, port: url.port) else { return .failure(.notAllowed(setting: setting)) }
        if let literal = IPAddress(url.host) { return .success([literal]) }
        let resolved = Self.resolve(url.host)
        guard !resolved.isEmpty else { return .failure(.unresolved) }
        if resolved.contains(where: { $0.isSpecialPurpose && !allowList.allows(address: $0, port: url.port) }) {
            return .failure(.nonPublic)
        }
        return .success(resolved)
    }

    static func resolve(_ host: String) -> [IPAddress] {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(host, nil, &hints, &list) == 0, let first = list else { return [] }
        defer { freeaddrinfo(list) }
        var addresses: [IPAddress] = []
        var cursor: UnsafeMutablePointer<addrinfo>? = first
        while let entry = cursor {
            if let raw = entry.pointee.ai_addr {
                if entry.pointee.ai_family == AF_INET {
                    let address = raw.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { $0.pointee.sin_addr }
                    addresses.append(IPAddress(bytes: withUnsafeBytes(of: address) { Array($0) }))
                } else if entry.pointee.ai_family == AF_INET6 {
                    let address = raw.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { $0.pointee.sin6_addr }
                    addresses.append(IPAddress(bytes: withUnsafeBytes(of: address) { Array($0) }))
                }
            }
            cursor = entry.pointee.ai_next
        }
        return addresses
    }
}
