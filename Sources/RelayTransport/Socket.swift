import Glibc
import RelayCore

/// Non-blocking TCP sockets for the webhook client.
enum Socket {
    /// Starts a connection to `address`: the socket, and whether the connect is still in
    /// progress (it completes when the socket turns writable; `pendingError` tells how).
    static func connect(_ address: IPAddress, port: Int) -> Result<(fd: Int32, inProgress: Bool), WebhookClient.Failure>
    {
        let family = address.isIPv4 ? AF_INET : AF_INET6
        let fd = socket(
            family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return .failure(.init(description: "socket: \(String(cString: strerror(errno)))")) }
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        var storage = sockaddr_storage()
        let length: socklen_t
        if address.isIPv4 {
            var sin = sockaddr_in()
            sin.sin_family = sa_family_t(AF_INET)
            sin.sin_port = UInt16(port).bigEndian
            withUnsafeMutableBytes(of: &sin.sin_addr) { $0.copyBytes(from: address.bytes) }
            withUnsafeBytes(of: sin) { source in withUnsafeMutableBytes(of: &storage) { $0.copyMemory(from: source) } }
            length = socklen_t(MemoryLayout<sockaddr_in>.size)
        } else {
            var sin6 = sockaddr_in6()
            sin6.sin6_family = sa_family_t(AF_INET6)
            sin6.sin6_port = UInt16(port).bigEndian
            withUnsafeMutableBytes(of: &sin6.sin6_addr) { $0.copyBytes(from: address.bytes) }
            withUnsafeBytes(of: sin6) { source in withUnsafeMutableBytes(of: &storage) { $0.copyMemory(from: source) } }
            length = socklen_t(MemoryLayout<sockaddr_in6>.size)
        }
        let result = withUnsafePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, length) }
        }
        if result == 0 { return .success((fd, false)) }
        guard errno == EINPROGRESS else {
            let code = errno
            close(fd)
            return .failure(.init(description: "connect failed: \(String(cString: strerror(code)))"))
        }
        return .success((fd, true))
    }

    /// The outcome of a connect that was in progress (0: connected).
    static func pendingError(_ fd: Int32) -> Int32 {
        var error: Int32 = 0
        var size = socklen_t(MemoryLayout<Int32>.size)
        guard getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &size) == 0 else { return errno }
        return error
    }
}
