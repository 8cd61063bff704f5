/*
 * raw-libcurl, socket-action style: libcurl's own answer to many connections, as its hiperfifo.c and
 * multi-event.c examples drive it. epoll watches the sockets libcurl names through CURLMOPT_SOCKETFUNCTION,
 * CURLMOPT_TIMERFUNCTION gives the timeout, and curl_multi_socket_action is called only for sockets with
 * activity and when the timer expires, so a call costs nothing per idle connection (curl_multi_perform in
 * libcurl 7.88 walks every easy handle). Everything else as bench_curl.c: handles created once, each re-added as
 * soon as it completes, until exactly N requests were issued; same command line and JSON line:
 *
 *   bench_curl_socket --url URL [--concurrency C] --requests N [--cafile PATH] [--http2] [--parts P]
 *   {"client": "raw-libcurl-socket", "requests": N, "failures": F, "seconds": S}
 *
 * --parts P spreads the transfers over P multi handles (slot i in handle i mod P) driven from one epoll set;
 * 0 takes one per 64 transfers in flight. libcurl 7.88 walks every connection of a multi handle's cache on each
 * curl_multi_remove_handle and the host's connections when it picks one for a new request, so at thousands of
 * connections this is libcurl's best (Curlew's socket-action driver does the same; docs/design/0011).
 *
 * Built by run_command.sh with: cc -O2 -o bench_curl_socket bench_curl_socket.c -lcurl (bench_common.h beside it)
 */
#include "bench_common.h"

#include <errno.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <unistd.h>

/* One multi handle and its libcurl timer; the epoll set is shared. */
struct part {
    CURLM *multi;
    uint32_t index;
    int epoll;
    /* When libcurl's timer expires, in ms on the monotonic clock; -1 none. */
    long long deadline;
};

static long long now_milliseconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* libcurl says what it wants of a socket; the epoll set follows, each socket tagged with its part. The socket's
 * "assigned" pointer (1 once it is in the set) tells ADD from MOD without a table of our own. */
static int on_socket(CURL *easy, curl_socket_t socket, int what, void *userp, void *socketp) {
    (void)easy;
    struct part *part = userp;
    if (what == CURL_POLL_REMOVE) {
        if (socketp != NULL) {
            /* The socket may already be closed (then the kernel dropped it from the set): ignore errors. */
            epoll_ctl(part->epoll, EPOLL_CTL_DEL, socket, NULL);
            curl_multi_assign(part->multi, socket, NULL);
        }
        return 0;
    }
    struct epoll_event event = {0};
    event.data.u64 = ((uint64_t)part->index << 32) | (uint32_t)socket;
    if (what & CURL_POLL_IN) {
        event.events |= EPOLLIN;
    }
    if (what & CURL_POLL_OUT) {
        event.events |= EPOLLOUT;
    }
    if (socketp == NULL) {
        if (epoll_ctl(part->epoll, EPOLL_CTL_ADD, socket, &event) != 0 && errno == EEXIST) {
            epoll_ctl(part->epoll, EPOLL_CTL_MOD, socket, &event);
        }
        curl_multi_assign(part->multi, socket, (void *)1);
    } else {
        epoll_ctl(part->epoll, EPOLL_CTL_MOD, socket, &event);
    }
    return 0;
}

static int on_timer(CURLM *multi, long timeout_ms, void *userp) {
    (void)multi;
    struct part *part = userp;
    part->deadline = timeout_ms < 0 ? -1 : now_milliseconds() + timeout_ms;
    return 0;
}

int main(int argc, char **argv) {
    struct bench_options options = parse_options(argc, argv);
    long slots = options.concurrency < options.requests ? options.concurrency : options.requests;
    long count = options.parts > 0 ? options.parts : (slots + 63) / 64;
    if (count > slots) {
        count = slots;
    }

    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        fprintf(stderr, "curl_global_init failed\n");
        return 1;
    }
    int epoll = epoll_create1(EPOLL_CLOEXEC);
    struct part *parts = calloc((size_t)count, sizeof(struct part));
    if (epoll < 0 || parts == NULL) {
        fprintf(stderr, "epoll_create1 failed\n");
        return 1;
    }
    for (long i = 0; i < count; i++) {
        struct part *part = &parts[i];
        *part = (struct part){.multi = curl_multi_init(), .index = (uint32_t)i, .epoll = epoll, .deadline = -1};
        if (part->multi == NULL) {
            fprintf(stderr, "curl_multi_init failed\n");
            return 1;
        }
        curl_multi_setopt(part->multi, CURLMOPT_SOCKETFUNCTION, on_socket);
        curl_multi_setopt(part->multi, CURLMOPT_SOCKETDATA, part);
        curl_multi_setopt(part->multi, CURLMOPT_TIMERFUNCTION, on_timer);
        curl_multi_setopt(part->multi, CURLMOPT_TIMERDATA, part);
        if (options.http2) {
            curl_multi_setopt(part->multi, CURLMOPT_PIPELINING, (long)CURLPIPE_MULTIPLEX);
        }
        curl_multi_setopt(part->multi, CURLMOPT_MAXCONNECTS, (slots + count - 1) / count);
    }

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
        curl_multi_add_handle(parts[i % count].multi, transfers[i].easy);
        started++;
    }

    while (completed < options.requests) {
        /* Adding and finishing handles sets libcurl's timers, usually to 0: then look at the sockets without
         * waiting. A timer is served whenever it has expired, events or not, as in hiperfifo.c. */
        long long now = now_milliseconds();
        long long deadline = -1;
        for (long i = 0; i < count; i++) {
            if (parts[i].deadline >= 0 && (deadline < 0 || parts[i].deadline < deadline)) {
                deadline = parts[i].deadline;
            }
        }
        int wait = deadline < 0 ? 1000 : deadline <= now ? 0 : (int)(deadline - now);
        int ready = epoll_wait(epoll, events, (int)handles + 16, wait);
        if (ready < 0 && errno != EINTR) {
            perror("epoll_wait");
            return 1;
        }
        for (int i = 0; i < ready; i++) {
            int mask = 0;
            if (events[i].events & EPOLLIN) mask |= CURL_CSELECT_IN;
            if (events[i].events & EPOLLOUT) mask |= CURL_CSELECT_OUT;
            if (events[i].events & (EPOLLERR | EPOLLHUP)) mask |= CURL_CSELECT_ERR;
            struct part *part = &parts[events[i].data.u64 >> 32];
            curl_multi_socket_action(part->multi, (curl_socket_t)(uint32_t)events[i].data.u64, mask, &running);
        }
        now = now_milliseconds();
        for (long i = 0; i < count; i++) {
            if (parts[i].deadline >= 0 && parts[i].deadline <= now) {
                parts[i].deadline = -1;
                curl_multi_socket_action(parts[i].multi, CURL_SOCKET_TIMEOUT, 0, &running);
            }
        }
        for (long i = 0; i < count; i++) {
            finish_transfers(parts[i].multi, &options, &started, &completed, &failures);
        }
    }
    double elapsed = now_seconds() - start;

    printf("{\"client\": \"raw-libcurl-socket\", \"requests\": %ld, \"failures\": %ld, \"seconds\": %.6f}\n", completed,
           failures, elapsed);
    fflush(stdout);
    for (long i = 0; i < handles; i++) {
        curl_multi_remove_handle(parts[i % count].multi, transfers[i].easy);
        curl_easy_cleanup(transfers[i].easy);
    }
    free(transfers);
    free(events);
    for (long i = 0; i < count; i++) {
        curl_multi_cleanup(parts[i].multi);
    }
    free(parts);
    close(epoll);
    curl_global_cleanup();
    return failures == 0 ? 0 : 1;
}
