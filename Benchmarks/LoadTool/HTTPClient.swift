import Glibc

/// A minimal blocking HTTP/1.1 client with keep-alive, enough to mint tokens and publish at a
/// few thousand requests a second without URLSession's overhead.
final class HTTPClient {
    struct Failure: Error, CustomStringConvertible { var description: String }

    private let host: String
    private let port: UInt16
    private var fd: Int32 = -1
    private var buffer: [UInt8] = []

    init(host: String, port: UInt16) {
        self.host = host
        self.port = port
    }

    deinit { if fd >= 0 { close(fd) } }

    private func connectIfNeeded() throws {
        guard fd < 0 else { return }
        fd = try Socket.connect(host: host, port: port, nonBlocking: false)
        buffer = []
    }

    /// Sends one request and reads the whole answer; reconnects once if the connection was closed.
    func request(
        _ method: String, _ path: String, body: [UInt8] = [], headers: [(String, String)] = []
    ) throws -> (
        status: Int, body: [UInt8]
    ) {
        for attempt in 0..<2 {
            try connectIfNeeded()
            var head = "\(method) \(path) HTTP/1.1\r\nHost: \(host):\(port)\r\nContent-Length: \(body.count)\r\n"
            for (name, value) in headers { head += "\(name): \(value)\r\n" }
            head += "\r\n"
            do {
                try Socket.writeAll(fd, Array(head.utf8) + body)
                return try readResponse()
            } catch {
                close(fd)
                fd = -1
                if attempt == 1 { throw error }
            }
        }
        throw Failure(description: "unreachable")
    }

    private func readResponse() throws -> (status: Int, body: [UInt8]) {
        while true {
            if let end = Self.find(buffer, [13, 10, 13, 10]) {
                let head = String(decoding: buffer[..<end], as: UTF8.self)
                let lines = head.split(separator: "\r\n")
                guard let statusLine = lines.first, let status = Int(statusLine.split(separator: " ")[1]) else {
                    throw Failure(description: "bad status line")
                }
                var length = 0
                for line in lines.dropFirst() where line.lowercased().hasPrefix("content-length:") {
                    length = Int(line.split(separator: ":")[1].trimmingCharacters(in: " ")) ?? 0
                }
                let total = end + 4 + length
                while buffer.count < total { try fill() }
                let body = Array(buffer[(end + 4)..<total])
                buffer.removeFirst(total)
                return (status, body)
            }
            try fill()
        }
    }

    private func fill() throws {
        var chunk = [UInt8](repeating: 0, count: 65_536)
        let count = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        guard count > 0 else { throw Failure(description: "connection closed") }
        buffer += chunk[0..<count]
    }

    static func find(_ haystack: [UInt8], _ needle: [UInt8]) -> Int? {
        guard haystack.count >= needle.count else { return nil }
        for index in 0...(haystack.count - needle.count) where haystack[index] == needle[0] {
            if Array(haystack[index..<index + needle.count]) == needle { return index }
        }
        return nil
    }
}

extension Substring {
    func trimmingCharacters(in set: Character) -> String {
        var text = self
        while text.first == set { text.removeFirst() }
        while text.last == set { text.removeLast() }
        return String(text)
    }
}

enum Socket {
    static func connect(host: String, port: UInt16, nonBlocking: Bool) throws -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | (nonBlocking ? Int32(SOCK_NONBLOCK.rawValue) : 0), 0)
        guard fd >= 0 else { throw HTTPClient.Failure(description: "socket: errno \(errno)") }
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr(host)
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        if result != 0 && !(nonBlocking && errno == EINPROGRESS) {
            close(fd)
            throw HTTPClient.Failure(description: "connect: errno \(errno)")
        }
        return fd
    }

    static func writeAll(_ fd: Int32, _ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let sent = bytes[offset...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard sent > 0 else { throw HTTPClient.Failure(description: "send: errno \(errno)") }
            offset += sent
        }
    }
}
