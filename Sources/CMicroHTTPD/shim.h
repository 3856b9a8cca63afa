#ifndef PUSHRELAY_CMICROHTTPD_SHIM_H
#define PUSHRELAY_CMICROHTTPD_SHIM_H
#include <stdarg.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <stdio.h>
#include <microhttpd.h>

/// Where libmicrohttpd's own error lines go: one formatted line per call (its `va_list` cannot
/// reach Swift). `ctx` is the owner's context pointer.
typedef struct pr_mhd_logger {
    void (*line)(void *ctx, const char *text);
    void *ctx;
} pr_mhd_logger;

static inline void pr_mhd_log_trampoline(void *cls, const char *format, va_list arguments) {
    const pr_mhd_logger *logger = (const pr_mhd_logger *)cls;
    char text[512];
    vsnprintf(text, sizeof text, format, arguments);
    logger->line(logger->ctx, text);
}

/// Settings for `pr_mhd_start`; zero means "libmicrohttpd's default" for every limit.
typedef struct pr_mhd_settings {
    unsigned int flags;
    int listen_fd;
    unsigned int thread_pool_size;
    unsigned int connection_limit;
    unsigned int connection_timeout_s;
    unsigned int per_ip_connection_limit;
    size_t connection_memory_limit;
    /// Every accepted connection is offered to `accept_policy` (caps that count WebSockets too).
    MHD_AcceptPolicyCallback accept_policy;
    void *accept_policy_cls;
    /// Connection start and end, with a per-connection context slot (deadlines, address slots).
    MHD_NotifyConnectionCallback notify_connection;
    void *notify_connection_cls;
    /// Must stay valid while the daemon runs.
    const pr_mhd_logger *logger;
} pr_mhd_settings;

/// `MHD_start_daemon` is variadic, so Swift cannot call it. This wrapper passes a fixed option list;
/// the listening socket is created by the caller so that the bound address is exactly the configured one.
static inline struct MHD_Daemon *pr_mhd_start(pr_mhd_settings settings,
                                              MHD_AccessHandlerCallback handler, void *handler_cls,
                                              MHD_RequestCompletedCallback completed, void *completed_cls) {
    unsigned int pool = settings.thread_pool_size > 1 ? settings.thread_pool_size : 1;
    unsigned int limit = settings.connection_limit ? settings.connection_limit : FD_SETSIZE - 4;
    size_t memory = settings.connection_memory_limit ? settings.connection_memory_limit : 32 * 1024;
    return MHD_start_daemon(settings.flags, 0, settings.accept_policy, settings.accept_policy_cls, handler, handler_cls,
                            MHD_OPTION_EXTERNAL_LOGGER, pr_mhd_log_trampoline, (void *)settings.logger,
                            MHD_OPTION_LISTEN_SOCKET, (MHD_socket)settings.listen_fd,
                            MHD_OPTION_THREAD_POOL_SIZE, pool,
                            MHD_OPTION_CONNECTION_LIMIT, limit,
                            MHD_OPTION_CONNECTION_TIMEOUT, settings.connection_timeout_s,
                            MHD_OPTION_PER_IP_CONNECTION_LIMIT, settings.per_ip_connection_limit,
                            MHD_OPTION_CONNECTION_MEMORY_LIMIT, memory,
                            MHD_OPTION_NOTIFY_COMPLETED, completed, completed_cls,
                            MHD_OPTION_NOTIFY_CONNECTION, settings.notify_connection, settings.notify_connection_cls,
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

/// The descriptor of a connection (for shutting down one that missed its deadline), or -1.
static inline int pr_mhd_connection_fd(struct MHD_Connection *connection) {
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
    return info ? (int)info->connect_fd : -1;
}

/// The context the connection-notify callback stored for this connection, or NULL.
static inline void *pr_mhd_socket_context(struct MHD_Connection *connection) {
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return info ? info->socket_context : NULL;
}
#endif
