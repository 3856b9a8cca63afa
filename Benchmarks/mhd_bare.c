/* The HTTP layer's own ceiling: a bare libmicrohttpd handler started with PushRelay's settings
 * (internal polling thread, epoll, a pool of 2 threads, suspend/resume and upgrade allowed,
 * 16 KiB per connection). It reads the POST body and answers 202 with a small JSON object and
 * an X-Request-Id header, as PushRelay does, without parsing, storing or fsyncing anything.
 *
 *   cc -O2 -o mhd_bare Benchmarks/mhd_bare.c -lmicrohttpd && ./mhd_bare 18083
 */
#include <microhttpd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char answer[] = "{\"id\":\"bench\",\"status\":\"accepted\",\"recipients\":[{\"userId\":\"bench\",\"seq\":1}]}";

static enum MHD_Result handle(void *cls, struct MHD_Connection *connection, const char *url, const char *method,
                              const char *version, const char *upload_data, size_t *upload_data_size, void **state) {
    (void)cls; (void)url; (void)method; (void)version; (void)upload_data;
    if (*state == NULL) { /* headers only: PushRelay answers after the body */
        *state = (void *)1;
        return MHD_YES;
    }
    if (*upload_data_size > 0) { /* a body chunk: consumed */
        *upload_data_size = 0;
        return MHD_YES;
    }
    struct MHD_Response *response =
        MHD_create_response_from_buffer(sizeof answer - 1, (void *)answer, MHD_RESPMEM_MUST_COPY);
    MHD_add_response_header(response, "Content-Type", "application/json");
    MHD_add_response_header(response, "X-Request-Id", "0123abcd-1");
    enum MHD_Result result = MHD_queue_response(connection, 202, response);
    MHD_destroy_response(response);
    return result;
}

int main(int argc, char **argv) {
    unsigned short port = argc > 1 ? (unsigned short)atoi(argv[1]) : 18083;
    unsigned int flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME |
                         MHD_ALLOW_UPGRADE | MHD_USE_ERROR_LOG;
    struct MHD_Daemon *daemon = MHD_start_daemon(
        flags, port, NULL, NULL, handle, NULL, MHD_OPTION_THREAD_POOL_SIZE, 2u, MHD_OPTION_CONNECTION_LIMIT, 10000u,
        MHD_OPTION_CONNECTION_TIMEOUT, 60u, MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)16384, MHD_OPTION_END);
    if (daemon == NULL) {
        fprintf(stderr, "mhd_bare: cannot start on port %u\n", port);
        return 1;
    }
    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGINT);
    sigaddset(&signals, SIGTERM);
    sigprocmask(SIG_BLOCK, &signals, NULL);
    int received;
    sigwait(&signals, &received);
    MHD_stop_daemon(daemon);
    return 0;
}
