internal import CTLS
import Glibc

/// One non-blocking connection to a receiver, plain or TLS, owning its socket (and `SSL *`).
/// Belongs to the client's loop thread.
final class WireConnection {
    /// What a non-blocking step did.
    enum Step {
        /// Done, with the byte count for a send or receive.
        case done(Int)
        /// Try again when the socket is readable (or writable: `wantsWrite`).
        case wouldBlock(wantsWrite: Bool)
        /// The peer closed the connection.
        case closed
        case failed(String)
    }

    let fd: Int32
    /// The pool key: "scheme://host:port@address".
    let key: String
    private var ssl: OpaquePointer?

    init(fd: Int32, key: String) {
        self.fd = fd
        self.key = key
    }

    deinit {
        if let ssl { SSL_free(ssl) }
        close(fd)
    }

    /// Starts TLS on the connected socket (`handshake()` drives it).
    func startTLS(_ context: TLSContext, host: String) throws(WebhookClient.Failure) {
        ssl = try context.session(fd: fd, host: host)
    }

    /// The protocol the server chose by ALPN (`h2`), once the handshake is done.
    var negotiatedProtocol: String? {
        guard let ssl else { return nil }
        var data: UnsafePointer<UInt8>?
        var length: UInt32 = 0
        SSL_get0_alpn_selected(ssl, &data, &length)
        guard let data, length > 0 else { return nil }
        return String(decoding: UnsafeBufferPointer(start: data, count: Int(length)), as: UTF8.self)
    }

    /// One step of the TLS handshake; `.done` once it is complete.
    func handshake() -> Step {
        guard let ssl else { return .done(0) }
        ERR_clear_error()
        let result = SSL_connect(ssl)
        if result == 1 { return .done(0) }
        return tlsStep(ssl, result, failing: "TLS handshake failed")
    }

    func send(_ bytes: ArraySlice<UInt8>) -> Step {
        if let ssl {
            ERR_clear_error()
            let count = bytes.withUnsafeBytes { SSL_write(ssl, $0.baseAddress, Int32($0.count)) }
            return count > 0 ? .done(Int(count)) : tlsStep(ssl, count, failing: "TLS send failed")
        }
        let count = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        if count > 0 { return .done(count) }
        return errno == EAGAIN || errno == EINTR
            ? .wouldBlock(wantsWrite: true) : .failed("send failed: \(String(cString: strerror(errno)))")
    }

    func receive(into buffer: UnsafeMutableRawBufferPointer) -> Step {
        if let ssl {
            ERR_clear_error()
            let count = SSL_read(ssl, buffer.baseAddress, Int32(buffer.count))
            if count > 0 { return .done(Int(count)) }
            let code = SSL_get_error(ssl, count)
            if code == SSL_ERROR_ZERO_RETURN || (code == SSL_ERROR_SYSCALL && errno == 0) { return .closed }
            return tlsStep(ssl, count, failing: "TLS receive failed")
        }
        let count = recv(fd, buffer.baseAddress, buffer.count, 0)
        if count > 0 { return .done(count) }
        if count == 0 { return .closed }
        return errno == EAGAIN || errno == EINTR
            ? .wouldBlock(wantsWrite: false) : .failed("receive failed: \(String(cString: strerror(errno)))")
    }

    private func tlsStep(_ ssl: OpaquePointer, _ result: Int32, failing what: String) -> Step {
        let code = SSL_get_error(ssl, result)
        if code == SSL_ERROR_WANT_READ { return .wouldBlock(wantsWrite: false) }
        if code == SSL_ERROR_WANT_WRITE { return .wouldBlock(wantsWrite: true) }
        return .failed("\(what): \(TLSContext.failure(ssl, code: code))")
    }
}
