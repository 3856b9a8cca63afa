#ifndef PUSHRELAY_CTLS_SHIM_H
#define PUSHRELAY_CTLS_SHIM_H
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

/// `SSL_set_tlsext_host_name` is a macro: the server name (SNI) to send.
static inline int pr_ssl_set_server_name(SSL *ssl, const char *name) {
    return (int)SSL_set_tlsext_host_name(ssl, name);
}

/// `SSL_CTX_set_min_proto_version` is a macro.
static inline int pr_ssl_ctx_min_tls12(SSL_CTX *ctx) {
    return (int)SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
}

/// `SSL_CTX_set_mode` is a macro: writes may return after a partial record; a blocking read
/// retries transparently after a renegotiation.
static inline void pr_ssl_ctx_set_modes(SSL_CTX *ctx) {
    SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_AUTO_RETRY);
}

/// `SSL_CTX_set_read_ahead` is a macro: each socket read takes all the records that arrived
/// (without it, a record costs two reads, its header and its body). Only for a reader that
/// reads until `SSL_ERROR_WANT_READ`: records read ahead wait in OpenSSL, unseen by epoll.
static inline void pr_ssl_ctx_read_ahead(SSL_CTX *ctx) {
    SSL_CTX_set_read_ahead(ctx, 1);
}
#endif
