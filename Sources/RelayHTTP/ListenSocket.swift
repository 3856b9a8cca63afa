internal import CMicroHTTPD
import Glibc

/// The listening socket, created here rather than by libmicrohttpd so that it binds exactly the
/// configured address (MHD alone binds 0.0.0.0) and so that port 0 can be read back.
package struct ListenSocket: Sendable {
    package let fd: Int32
    package let host: String
    package let port: Int

    package enum Error: Swift.Error, CustomStringConvertible {
        case badAddress(String)
        case system(String, Int32)

        package var description: String {
            switch self {
            case .badAddress(let text):
                return "bad listen address '\(text)': use host:port, e.g. 127.0.0.1:8080 or [::1]:8080"
            case .system(let call, let code): return "\(call) failed: \(String(cString: strerror(code)))"
            }
        }
    }

    /// Splits `host:port` / `[v6]:port`.
    package static func parse(_ text: String) throws(Error) -> (host: String, port: Int) {
        var host: Substring
        var portText: Substring
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]"), text[text.index(after: close)...].hasPrefix(":") else {
                throw .badAddress(text)
            }
            host = text[text.index(after: text.startIndex)..<close]
            portText = text[text.index(close, offsetBy: 2)...]
        } else {
            guard let colon = text.lastIndex(of: ":") else { throw .badAddress(text) }
            host = text[..<colon]
            portText = text[text.index(after: colon)...]
        }
        if host == "localhost" { host = "127.0.0.1" }
        guard let port = Int(portText), (0...65535).contains(port), !host.isEmpty else { throw .badAddress(text) }
        return (String(host), port)
    }

    package init(address text: String, backlog: Int32 = 1024) throws(Error) {
        let (host, port) = try Self.parse(text)
        var storage = sockaddr_storage()
        let length: socklen_t
        let family: Int32
        if host.contains(":") {
            var address = sockaddr_in6()
            address.sin6_family = sa_family_t(AF_INET6)
            address.sin6_port = UInt16(port).bigEndian
            guard inet_pton(AF_INET6, host, &address.sin6_addr) == 1 else { throw .badAddress(text) }
            withUnsafeBytes(of: address) { source in
                withUnsafeMutableBytes(of: &storage) { $0.copyMemory(from: source) }
            }
            length = socklen_t(MemoryLayout<sockaddr_in6>.size)
            family = AF_INET6
        } else {
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = UInt16(port).bigEndian
            guard inet_pton(AF_INET, host, &address.sin_addr) == 1 else { throw .badAddress(text) }
            withUnsafeBytes(of: address) { source in
                withUnsafeMutableBytes(of: &storage) { $0.copyMemory(from: source) }
            }
            length = socklen_t(MemoryLayout<sockaddr_in>.size)
            family = AF_INET
        }
        let fd = socket(family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw .system("socket", errno) }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        if family == AF_INET6 {
            setsockopt(fd, Int32(IPPROTO_IPV6), IPV6_V6ONLY, &one, socklen_t(MemoryLayout<Int32>.size))
        }
        let bound = withUnsafePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) }
        }
        guard bound == 0 else {
            let code = errno
            close(fd)
            throw .system("bind \(text)", code)
        }
        guard listen(fd, backlog) == 0 else {
            let code = errno
            close(fd)
            throw .system("listen", code)
        }
        var actual = sockaddr_storage()
        var actualLength = socklen_t(MemoryLayout<sockaddr_storage>.size)
        _ = withUnsafeMutablePointer(to: &actual) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &actualLength) }
        }
        let boundPort: UInt16 =
            family == AF_INET6
            ? withUnsafeBytes(of: actual) { $0.load(as: sockaddr_in6.self).sin6_port }
            : withUnsafeBytes(of: actual) { $0.load(as: sockaddr_in.self).sin_port }
        self.fd = fd
        self.host = host
        self.port = Int(UInt16(bigEndian: boundPort))
    }

    /// `http://host:port`, with brackets around IPv6.
    package var url: String { host.contains(":") ? "http://[\(host)]:\(port)" : "http://\(host):\(port)" }
}

/// Formats a peer address for logs and per-IP limits.
func describe(address: UnsafePointer<sockaddr>?) -> String {
    guard let address else { return "unknown" }
    var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
    switch Int32(address.pointee.sa_family) {
    case AF_INET:
        var ipv4 = address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { $0.pointee.sin_addr }
        inet_ntop(AF_INET, &ipv4, &buffer, socklen_t(buffer.count))
    case AF_INET6:
        var ipv6 = address.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { $0.pointee.sin6_addr }
        inet_ntop(AF_INET6, &ipv6, &buffer, socklen_t(buffer.count))
    default:
        return "unknown"
    }
    return String(decoding: buffer.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self)
}
