#ifndef PUSHRELAY_CMICROHTTPD_SHIM_H
#define PUSHRELAY_CMICROHTTPD_SHIM_H
#include <stdarg.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <microhttpd.h>

/// Settings for `pr_mhd_start`; zero means "libmicrohttpd's default" for every limit.
typedef struct pr_mhd_settings {
    unsigned int flags;
    int listen_fd;
    unsigned int thread_pool_size;
    unsigned int connection_limit;
    unsigned int connection_timeout_s;
    unsigned int per_ip_connection_limit;
    size_t connection_memory_limit;
} pr_mhd_settings;

/// `MHD_start_daemon` is variadic, so Swift cannot call it. This wrapper passes a fixed option list;
/// the listening socket is created by the caller so that the bound address is exactly the configured one.
static inline struct MHD_Daemon *pr_mhd_start(pr_mhd_settings settings,
                                              MHD_AccessHandlerCallback handler, void *handler_cls,
                                              MHD_RequestCompletedCallback completed, void *completed_cls) {
    unsigned int pool = settings.thread_pool_size > 1 ? settings.thread_pool_size : 1;
    unsigned int limit = settings.connection_limit ? settings.connection_limit : FD_SETSIZE - 4;
    size_t memory = settings.connection_memory_limit ? settings.connection_memory_limit : 32 * 1024;
    return MHD_start_daemon(settings.flags, 0, NULL, NULL, handler, handler_cls,
                            MHD_OPTION_LISTEN_SOCKET, (MHD_socket)settings.listen_fd,
                            MHD_OPTION_THREAD_POOL_SIZE, pool,
                            MHD_OPTION_CONNECTION_LIMIT, limit,
                            MHD_OPTION_CONNECTION_TIMEOUT, settings.connection_timeout_s,
                            MHD_OPTION_PER_IP_CONNECTION_LIMIT, settings.per_ip_connection_limit,
                            MHD_OPTION_CONNECTION_MEMORY_LIMIT, memory,
                            MHD_OPTION_NOTIFY_COMPLETED, completed, completed_cls,
                            MHD_OPTION_END);
}

/// A response holding its own copy of `size` bytes (the enum case does not import cleanly).
static inline struct MHD_Response *pr_mhd_response_copy(size_t size, const void *buffer) {
    return MHD_create_response_from_buffer(size, (void *)buffer, MHD_RESPMEM_MUST_COPY);
}

/// `MHD_upgrade_action` is variadic.
static inline enum MHD_Result pr_mhd_upgrade_close(struct MHD_UpgradeResponseHandle *urh) {
    return MHD_upgrade_action(urh, MHD_UPGRADE_ACTION_CLOSE);
}

/// `MHD_get_connection_info` is variadic; returns the peer address or NULL.
static inline const struct sockaddr *pr_mhd_client_address(struct MHD_Connection *connection) {
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    return info ? info->client_addr : NULL;
}
#endif
