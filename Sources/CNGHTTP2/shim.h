#ifndef PUSHRELAY_CNGHTTP2_SHIM_H
#define PUSHRELAY_CNGHTTP2_SHIM_H
#include <nghttp2/nghttp2.h>

/// One header field for `nghttp2_submit_*`. `nghttp2_nv` holds non-const pointers, but with
/// NGHTTP2_NV_FLAG_NONE the library only reads and copies them before the submit returns, so
/// Swift can hand it the bytes of a temporary buffer.
static inline nghttp2_nv pr_nghttp2_nv(const uint8_t *name, size_t name_len, const uint8_t *value,
                                       size_t value_len) {
    nghttp2_nv field = {(uint8_t *)name, (uint8_t *)value, name_len, value_len, NGHTTP2_NV_FLAG_NONE};
    return field;
}
#endif
