import Foundation

/// A plain TCP connection to `127.0.0.1`, for tests that write what no HTTP client would send
/// (trickled headers, conflicting framing headers, a head without its body).
package final class RawConnection {
    package struct Failure: Error, CustomStringConvertible {
        package var description: String
    }

    package let fd: Int32

    /// `receiveTimeout` bounds each read: long by default (an answer from a sanitized relay on a
    /// busy machine takes seconds); a test that expects silence passes a short one.
    package init(port: Int, receiveTimeout seconds: Double = 30) throws {
        fd = try Self.connect(port: port)
        setReceiveTimeout(seconds: seconds)
    }

    deinit { Glibc.close(fd) }

    /// A connected socket to `127.0.0.1:port`; `receiveBufferBytes` pins the kernel's receive
    /// buffer (set before connecting, so that the window is small from the start).
    static func connect(port: Int, receiveBufferBytes: Int? = nil) throws -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw Failure(description: "socket failed") }
        if var size = receiveBufferBytes.map(Int32.init(clamping:)) {
            setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else {
            Glibc.close(fd)
            throw Failure(description: "connect failed")
        }
        return fd
    }

    package func setReceiveTimeout(seconds: Double) {
        var timeout = timeval(tv_sec: Int(seconds), tv_usec: Int((seconds - Double(Int(seconds))) * 1_000_000))
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    /// Sends the text; false when the peer is gone.
    @discardableResult
    package func send(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        var offset = 0
        while offset < bytes.count {
            let sent = bytes[offset...].withUnsafeBytes {
                Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
            }
            guard sent > 0 else { return false }
            offset += sent
        }
        return true
    }

    /// Reads until the peer closes, the timeout passes, or `until` holds for what was read.
    package func read(until done: (String) -> Bool = { _ in false }) -> (text: String, closed: Bool) {
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 16_384)
        while true {
            let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if count > 0 {
                received += buffer[0..<count]
                if done(String(decoding: received, as: UTF8.self)) { break }
                continue
            }
            if count < 0, errno == EINTR { continue }
            return (String(decoding: received, as: UTF8.self), count == 0 || errno == ECONNRESET)
        }
        return (String(decoding: received, as: UTF8.self), false)
    }

    /// The status code of the answer's status line (read up to the end of the head), or nil.
    package func responseStatus() -> Int? {
        let (text, _) = read { $0.contains("\r\n\r\n") }
        guard text.hasPrefix("HTTP/1.1 ") else { return nil }
        return Int(text.dropFirst(9).prefix(3))
    }
}
