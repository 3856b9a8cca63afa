internal import CTLS
import Glibc

/// One connection to a receiver, plain or TLS, owning its socket (and `SSL *`). Used by one
/// delivery thread at a time: the pool hands it out exclusively.
///
/// `@unchecked Sendable`: it moves between threads only through the pool's lock, never shared.
final class WireConnection: @unchecked Sendable {
    let fd: Int32
    private let ssl: OpaquePointer?

    init(fd: Int32, ssl: OpaquePointer?) {
        self.fd = fd
        self.ssl = ssl
    }

    deinit {
        if let ssl { SSL_free(ssl) }
        close(fd)
    }

    /// Writes all of `bytes` within the deadline.
    func write(_ bytes: [UInt8], deadline: Deadline) throws(WebhookClient.Failure) {
        var offset = 0
        while offset < bytes.count {
            try deadline.arm(fd, SO_SNDTIMEO)
            let sent: Int
            if let ssl {
                ERR_clear_error()
                let count = bytes[offset...].withUnsafeBytes { SSL_write(ssl, $0.baseAddress, Int32($0.count)) }
                if count <= 0 {
                    let code = SSL_get_error(ssl, count)
                    if code == SSL_ERROR_WANT_WRITE || code == SSL_ERROR_WANT_READ { continue }
                    throw WebhookClient.Failure(description: "TLS send failed: \(TLSContext.failure(ssl, code: code))")
                }
                sent = Int(count)
            } else {
                sent = bytes[offset...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                guard sent > 0 else {
                    throw WebhookClient.Failure(description: errno == EAGAIN ? "timed out" : "send failed")
                }
            }
            offset += sent
        }
    }

    /// Reads what is there (waiting within the deadline); an empty answer means the peer closed.
    func read(deadline: Deadline) throws(WebhookClient.Failure) -> [UInt8] {
        var chunk = [UInt8](repeating: 0, count: 16_384)
        while true {
            try deadline.arm(fd, SO_RCVTIMEO)
            if let ssl {
                ERR_clear_error()
                let count = chunk.withUnsafeMutableBytes { SSL_read(ssl, $0.baseAddress, Int32($0.count)) }
                if count > 0 { return Array(chunk[0..<Int(count)]) }
                let code = SSL_get_error(ssl, count)
                if code == SSL_ERROR_ZERO_RETURN { return [] }
                if code == SSL_ERROR_WANT_READ || code == SSL_ERROR_WANT_WRITE {
                    if errno == EAGAIN { throw WebhookClient.Failure(description: "timed out") }
                    continue
                }
                if code == SSL_ERROR_SYSCALL, errno == 0 { return [] }  // closed without close_notify
                throw WebhookClient.Failure(description: "TLS receive failed: \(TLSContext.failure(ssl, code: code))")
            }
            let count = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if count > 0 { return Array(chunk[0..<count]) }
            if count == 0 { return [] }
            if errno == EINTR { continue }
            throw WebhookClient.Failure(description: errno == EAGAIN ? "timed out" : "receive failed")
        }
    }
}
