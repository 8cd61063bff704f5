/*
 * raw-libcurl, socket-action style: libcurl's own answer to many connections, as its hiperfifo.c and
 * multi-event.c examples drive it. epoll watches the sockets libcurl names through CURLMOPT_SOCKETFUNCTION,
 * CURLMOPT_TIMERFUNCTION gives the one timeout, and curl_multi_socket_action is called only for sockets with
 * activity and when the timer expires, so a call costs nothing per idle connection (curl_multi_perform in
 * libcurl 7.88 walks every easy handle). Everything else as bench_curl.c: handles created once, each re-added as
 * soon as it completes, until exactly N requests were issued; same command line and JSON line:
 *
 *   bench_curl_socket --url URL [--concurrency C] --requests N [--cafile PATH] [--http2]
 *   {"client": "raw-libcurl-socket", "requests": N, "failures": F, "seconds": S}
 *
 * Built by run_command.sh with: cc -O2 -o bench_curl_socket bench_curl_socket.c -lcurl (bench_common.h beside it)
 */
#include "bench_common.h"

#include <errno.h>
#include <sys/epoll.h>
#include <unistd.h>

struct loop {
    CURLM *multi;
    int epoll;
    /* When libcurl's timer expires, in ms on the monotonic clock; -1 none. */
    long long deadline;
};

static long long now_milliseconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* libcurl says what it wants of a socket; the epoll set follows. The socket's "assigned" pointer (1 once it is
 * in the set) tells ADD from MOD without a table of our own. */
static int on_socket(CURL *easy, curl_socket_t socket, int what, void *userp, void *socketp) {
    (void)easy;
    struct loop *loop = userp;
    if (what == CURL_POLL_REMOVE) {
        if (socketp != NULL) {
            /* The socket may already be closed (then the kernel dropped it from the set): ignore errors. */
            epoll_ctl(loop->epoll, EPOLL_CTL_DEL, socket, NULL);
            curl_multi_assign(loop->multi, socket, NULL);
        }
        return 0;
    }
    struct epoll_event event = {0};
    event.data.fd = socket;
    if (what & CURL_POLL_IN) event.events |= EPOLLIN;
    if (what & CURL_POLL_OUT) event.events |= EPOLLOUT;
    if (socketp == NULL) {
        if (epoll_ctl(loop->epoll, EPOLL_CTL_ADD, socket, &event) != 0 && errno == EEXIST) {
            epoll_ctl(loop->epoll, EPOLL_CTL_MOD, socket, &event);
        }
        curl_multi_assign(loop->multi, socket, (void *)1);
    } else {
        epoll_ctl(loop->epoll, EPOLL_CTL_MOD, socket, &event);
    }
    return 0;
}

static int on_timer(CURLM *multi, long timeout_ms, void *userp) {
    (void)multi;
    struct loop *loop = userp;
    loop->deadline = timeout_ms < 0 ? -1 : now_milliseconds() + timeout_ms;
    return 0;
}

int main(int argc, char **argv) {
    struct bench_options options = parse_options(argc, argv);

    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        fprintf(stderr, "curl_global_init failed\n");
        return 1;
    }
    struct loop loop = {.multi = curl_multi_init(), .epoll = epoll_create1(EPOLL_CLOEXEC), .deadline = -1};
    if (loop.multi == NULL || loop.epoll < 0) {
        fprintf(stderr, "curl_multi_init or epoll_create1 failed\n");
        return 1;
    }
    curl_multi_setopt(loop.multi, CURLMOPT_SOCKETFUNCTION, on_socket);
    curl_multi_setopt(loop.multi, CURLMOPT_SOCKETDATA, &loop);
    curl_multi_setopt(loop.multi, CURLMOPT_TIMERFUNCTION, on_timer);
    curl_multi_setopt(loop.multi, CURLMOPT_TIMERDATA, &loop);
    if (options.http2) {
        curl_multi_setopt(loop.multi, CURLMOPT_PIPELINING, (long)CURLPIPE_MULTIPLEX);
    }
    curl_multi_setopt(loop.multi, CURLMOPT_MAXCONNECTS, options.concurrency);

    long handles = 0;
    struct transfer *transfers = make_transfers(&options, &handles);
    struct epoll_event *events = calloc((size_t)handles + 16, sizeof(struct epoll_event));
    if (events == NULL) {
        return 1;
    }

    long started = 0;
    long completed = 0;
    long failures = 0;
    int running = 0;
    double start = now_seconds();
    for (long i = 0; i < handles; i++) {
        curl_multi_add_handle(loop.multi, transfers[i].easy);
        started++;
    }

    while (completed < options.requests) {
        /* Adding and finishing handles sets libcurl's timer, usually to 0: then look at the sockets without
         * waiting. The timer is served whenever it has expired, events or not, as in hiperfifo.c. */
        long long now = now_milliseconds();
        int wait = loop.deadline < 0 ? 1000 : loop.deadline <= now ? 0 : (int)(loop.deadline - now);
        int ready = epoll_wait(loop.epoll, events, (int)handles + 16, wait);
        if (ready < 0 && errno != EINTR) {
            perror("epoll_wait");
            return 1;
        }
        for (int i = 0; i < ready; i++) {
            int mask = 0;
            if (events[i].events & EPOLLIN) mask |= CURL_CSELECT_IN;
            if (events[i].events & EPOLLOUT) mask |= CURL_CSELECT_OUT;
            if (events[i].events & (EPOLLERR | EPOLLHUP)) mask |= CURL_CSELECT_ERR;
            curl_multi_socket_action(loop.multi, events[i].data.fd, mask, &running);
        }
        if (loop.deadline >= 0 && loop.deadline <= now_milliseconds()) {
            loop.deadline = -1;
            curl_multi_socket_action(loop.multi, CURL_SOCKET_TIMEOUT, 0, &running);
        }
        finish_transfers(loop.multi, &options, &started, &completed, &failures);
    }
    double elapsed = now_seconds() - start;

    report_and_free("raw-libcurl-socket", loop.multi, transfers, handles, completed, failures, elapsed);
    free(events);
    curl_multi_cleanup(loop.multi);
    close(loop.epoll);
    curl_global_cleanup();
    return failures == 0 ? 0 : 1;
}
