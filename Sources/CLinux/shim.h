#ifndef PUSHRELAY_CLINUX_SHIM_H
#define PUSHRELAY_CLINUX_SHIM_H
// Linux and glibc headers that Swift's Glibc module does not include.
#include <malloc.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>

/// Keeps freed heap memory in the process instead of trimming it back to the kernel after
/// every burst (glibc's trimming costs madvise calls and TLB shootdowns under load).
static inline void pr_malloc_keep_memory(int trim_threshold, int mmap_threshold) {
    mallopt(M_TRIM_THRESHOLD, trim_threshold);
    mallopt(M_MMAP_THRESHOLD, mmap_threshold);
}

/// Hands free heap pages back to the kernel, including those inside arenas (not only at their
/// top): after a burst of connections, most of the heap is free but fragmented.
static inline int pr_malloc_trim(void) {
    return malloc_trim(0);
}
#endif
