internal import CTLS
import Glibc
import RelayCore

/// The TLS client side for https receivers: one OpenSSL `SSL_CTX`, owned here, verifying
/// receivers against the system trust store or a PEM bundle (`pushCaFile`, for private
/// gateways and tests), TLS 1.2 at least.
///
/// `@unchecked Sendable`: the context is configured once in `init` and only read afterwards
/// (`SSL_new` on a configured context is thread-safe); each `SSL` belongs to one connection.
package final class TLSContext: @unchecked Sendable {
    private let context: OpaquePointer

    /// - Parameter alpn: protocols offered in the handshake (`["h2"]` for HTTP/2 services); none
    ///   for the webhook client, which speaks HTTP/1.1 only. An HTTP/2 context reads ahead: its
    ///   one client reads each connection until it would block, records already buffered too.
    package init(caFile: String?, alpn: [String] = []) throws(WebhookClient.Failure) {
        guard let context = SSL_CTX_new(TLS_client_method()) else {
            throw WebhookClient.Failure(description: "TLS: \(Self.lastError())")
        }
        self.context = context
        _ = pr_ssl_ctx_min_tls12(context)
        pr_ssl_ctx_set_modes(context)
        SSL_CTX_set_verify(context, SSL_VERIFY_PEER, nil)
        if !alpn.isEmpty {
            // (The HTTP/2 client reads each connection until it would block.)
            pr_ssl_ctx_read_ahead(context)
            // The wire format: each protocol name prefixed by its length (RFC 7301 §3.1).
            let wire = alpn.flatMap { [UInt8(truncatingIfNeeded: $0.utf8.count)] + Array($0.utf8) }
            // (Returns 0 on success, unlike most of OpenSSL.)
            guard
                wire.withUnsafeBufferPointer({ SSL_CTX_set_alpn_protos(context, $0.baseAddress, UInt32($0.count)) })
                    == 0
            else { throw WebhookClient.Failure(description: "TLS: cannot offer ALPN \(alpn)") }
        }
        let loaded =
            caFile.map { SSL_CTX_load_verify_locations(context, $0, nil) } ?? SSL_CTX_set_default_verify_paths(context)
        guard loaded == 1 else {
            // (`deinit` frees the context: every stored property is set, so it runs on this throw.)
            let reason = Self.lastError()
            throw WebhookClient.Failure(
                description: "TLS: cannot load the trust store \(caFile ?? "(system)"): \(reason)")
        }
    }

    deinit { SSL_CTX_free(context) }

    /// A client session on a connected non-blocking socket, ready for its handshake: SNI and
    /// the certificate name check for `host` (an IP literal is checked against the certificate's
    /// IP addresses). The caller owns (and frees) the `SSL *`.
    func session(fd: Int32, host: String) throws(WebhookClient.Failure) -> OpaquePointer {
        guard let ssl = SSL_new(context) else { throw WebhookClient.Failure(description: "TLS: \(Self.lastError())") }
        SSL_set_fd(ssl, fd)
        if IPAddress(host) != nil {
            X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), host)
        } else {
            _ = pr_ssl_set_server_name(ssl, host)
            SSL_set1_host(ssl, host)
        }
        return ssl
    }

    /// Why a handshake or transfer failed: the certificate check first ("certificate has
    /// expired", "hostname mismatch", "unable to get local issuer certificate"), else OpenSSL's
    /// error queue, else the socket's.
    static func failure(_ ssl: OpaquePointer, code: Int32) -> String {
        let verified = SSL_get_verify_result(ssl)
        if verified != X509_V_OK {
            return String(cString: X509_verify_cert_error_string(verified))
        }
        let queued = lastError()
        if !queued.isEmpty { return queued }
        if code == SSL_ERROR_SYSCALL { return errno == EAGAIN ? "timed out" : "connection lost (errno \(errno))" }
        if code == SSL_ERROR_ZERO_RETURN { return "connection closed" }
        return "error \(code)"
    }

    static func lastError() -> String {
        let code = ERR_get_error()
        guard code != 0 else { return "" }
        var buffer = [CChar](repeating: 0, count: 256)
        ERR_error_string_n(code, &buffer, buffer.count)
        return String(decoding: buffer.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
