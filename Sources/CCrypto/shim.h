#ifndef PUSHRELAY_CCRYPTO_SHIM_H
#define PUSHRELAY_CCRYPTO_SHIM_H
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/sha.h>
#include <openssl/x509.h>

/// One-shot HMAC-SHA256; `out` must hold 32 bytes. Returns 1 on success.
static inline int pr_hmac_sha256(const void *key, int key_len, const unsigned char *data, size_t data_len,
                                 unsigned char *out) {
    unsigned int out_len = 0;
    return HMAC(EVP_sha256(), key, key_len, data, data_len, out, &out_len) != NULL && out_len == 32;
}

/// `EVP_EC_gen` is a macro over the variadic `EVP_PKEY_Q_keygen`: a fresh P-256 key pair, or NULL.
static inline EVP_PKEY *pr_p256_generate(void) { return EVP_EC_gen("P-256"); }
#endif
