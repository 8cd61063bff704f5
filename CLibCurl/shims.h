// Static-inline shims over libcurl's variadic entry points, which Swift cannot call,
// plus the few process-wide helpers the engine needs before curl_global_init.
#ifndef CLIBCURL_SHIMS_H
#define CLIBCURL_SHIMS_H

#include <curl/curl.h>
#include <zlib.h>
#include <dlfcn.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <errno.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <unistd.h>

// MARK: easy handle options

static inline CURLcode curlew_easy_setopt_long(CURL *handle, CURLoption option, long value) {
    return curl_easy_setopt(handle, option, value);
}
static inline CURLcode curlew_easy_setopt_off_t(CURL *handle, CURLoption option, curl_off_t value) {
    return curl_easy_setopt(handle, option, value);
}
static inline CURLcode curlew_easy_setopt_pointer(CURL *handle, CURLoption option, const void *value) {
    return curl_easy_setopt(handle, option, value);
}
static inline CURLcode curlew_easy_setopt_string(CURL *handle, CURLoption option, const char *value) {
    return curl_easy_setopt(handle, option, value);
}
/// Hands libcurl bytes from memory (a PEM certificate or key) it copies before returning.
static inline CURLcode curlew_easy_setopt_blob(CURL *handle, CURLoption option, const void *data, size_t length) {
    struct curl_blob blob = {(void *)data, length, CURL_BLOB_COPY};
    return curl_easy_setopt(handle, option, &blob);
}
static inline CURLcode curlew_easy_setopt_slist(CURL *handle, CURLoption option, struct curl_slist *value) {
    return curl_easy_setopt(handle, option, value);
}
static inline CURLcode curlew_easy_setopt_write_callback(CURL *handle, CURLoption option, curl_write_callback cb) {
    return curl_easy_setopt(handle, option, cb);
}
static inline CURLcode curlew_easy_setopt_read_callback(CURL *handle, curl_read_callback cb) {
    return curl_easy_setopt(handle, CURLOPT_READFUNCTION, cb);
}
static inline CURLcode curlew_easy_setopt_seek_callback(CURL *handle, curl_seek_callback cb) {
    return curl_easy_setopt(handle, CURLOPT_SEEKFUNCTION, cb);
}
static inline CURLcode curlew_easy_setopt_xferinfo_callback(CURL *handle, curl_xferinfo_callback cb) {
    return curl_easy_setopt(handle, CURLOPT_XFERINFOFUNCTION, cb);
}
static inline CURLcode curlew_easy_setopt_opensocket_callback(CURL *handle, curl_opensocket_callback cb) {
    return curl_easy_setopt(handle, CURLOPT_OPENSOCKETFUNCTION, cb);
}
static inline CURLcode curlew_easy_setopt_closesocket_callback(CURL *handle, curl_closesocket_callback cb) {
    return curl_easy_setopt(handle, CURLOPT_CLOSESOCKETFUNCTION, cb);
}

typedef int (*curlew_prereq_callback)(void *clientp, char *conn_primary_ip, char *conn_local_ip, int conn_primary_port,
                                      int conn_local_port);
static inline CURLcode curlew_easy_setopt_prereq_callback(CURL *handle, curlew_prereq_callback cb) {
    return curl_easy_setopt(handle, CURLOPT_PREREQFUNCTION, cb);
}

static inline CURLcode curlew_easy_setopt_sockopt_callback(CURL *handle, curl_sockopt_callback cb) {
    return curl_easy_setopt(handle, CURLOPT_SOCKOPTFUNCTION, cb);
}

typedef int (*curlew_resolver_start_callback)(void *resolver_state, void *reserved, void *userdata);
static inline CURLcode curlew_easy_setopt_resolver_start_callback(CURL *handle, curlew_resolver_start_callback cb) {
    return curl_easy_setopt(handle, CURLOPT_RESOLVER_START_FUNCTION, cb);
}

/// The local port of a socket (IPv4 or IPv6), or -1. Tells a connection a transfer opened from a pooled one that
/// libcurl handed it on a later attempt of the same transfer.
/// A connection's identity as the pre-request callback names it: both addresses and both ports. Linux hands one local
/// port to connections with different peers, so the ports alone can name two live connections; a 32-bit FNV-1a hash
/// of the two address strings goes above the ports. A hash collision would need the same two ports as well.
static inline int64_t curlew_connection_key(const char *primary_ip, const char *local_ip, int primary_port,
                                            int local_port) {
    uint32_t hash = 2166136261u;
    for (const char *c = primary_ip; c != NULL && *c != 0; c++) hash = (hash ^ (uint8_t)*c) * 16777619u;
    hash = (hash ^ 0xFFu) * 16777619u;
    for (const char *c = local_ip; c != NULL && *c != 0; c++) hash = (hash ^ (uint8_t)*c) * 16777619u;
    return (int64_t)(((uint64_t)hash << 32) | ((uint64_t)(local_port & 0xFFFF) << 16) | (uint64_t)(primary_port & 0xFFFF));
}

static inline int curlew_socket_local_port(int fd) {
    struct sockaddr_storage address;
    socklen_t length = sizeof(address);
    if (fd < 0 || getsockname(fd, (struct sockaddr *)&address, &length) != 0) return -1;
    if (address.ss_family == AF_INET) return ntohs(((struct sockaddr_in *)&address)->sin_port);
    if (address.ss_family == AF_INET6) return ntohs(((struct sockaddr_in6 *)&address)->sin6_port);
    return -1;
}

/// Whether a connection has nothing waiting to be read: 1 when a non-blocking peek finds no byte and no end of
/// stream, 0 when bytes (or the peer's FIN, or an error) are waiting. Costs one system call, reads nothing.
static inline int curlew_socket_is_quiet(int fd) {
    if (fd < 0) return 0;
    char byte;
    ssize_t got = recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 1;
    return 0;
}

/// Restricts a transfer and its redirects to http and https. The bitmask options are deprecated in favour of
/// the *_STR ones, but set no string that libcurl must copy and parse again for every transfer.
static inline CURLcode curlew_easy_allow_only_http(CURL *handle) {
#pragma clang diagnostic push
#pragma clang diagnostic ignored "-Wdeprecated-declarations"
    CURLcode code = curl_easy_setopt(handle, CURLOPT_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
    if (code == CURLE_OK) {
        code = curl_easy_setopt(handle, CURLOPT_REDIR_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
    }
#pragma clang diagnostic pop
    return code;
}

// MARK: easy handle information

static inline CURLcode curlew_easy_getinfo_long(CURL *handle, CURLINFO info, long *value) {
    return curl_easy_getinfo(handle, info, value);
}
static inline CURLcode curlew_easy_getinfo_off_t(CURL *handle, CURLINFO info, curl_off_t *value) {
    return curl_easy_getinfo(handle, info, value);
}
static inline CURLcode curlew_easy_getinfo_string(CURL *handle, CURLINFO info, char **value) {
    return curl_easy_getinfo(handle, info, value);
}
static inline CURLcode curlew_easy_getinfo_pointer(CURL *handle, CURLINFO info, void **value) {
    return curl_easy_getinfo(handle, info, value);
}

// MARK: multi handle options

static inline CURLMcode curlew_multi_setopt_long(CURLM *multi, CURLMoption option, long value) {
    return curl_multi_setopt(multi, option, value);
}
static inline CURLMcode curlew_multi_setopt_pointer(CURLM *multi, CURLMoption option, void *value) {
    return curl_multi_setopt(multi, option, value);
}
static inline CURLMcode curlew_multi_setopt_socket_callback(CURLM *multi, curl_socket_callback cb) {
    return curl_multi_setopt(multi, CURLMOPT_SOCKETFUNCTION, cb);
}
static inline CURLMcode curlew_multi_setopt_timer_callback(CURLM *multi, curl_multi_timer_callback cb) {
    return curl_multi_setopt(multi, CURLMOPT_TIMERFUNCTION, cb);
}

// The `data.result` member of CURLMsg sits in an anonymous union Swift imports awkwardly.
static inline CURLcode curlew_msg_result(const CURLMsg *message) {
    return message->data.result;
}

// MARK: share handle with process-wide locks

// One mutex per curl_lock_data kind; the share handle lives for the whole process. A function-local
// static, because a file-scope static in a header is not emitted through Swift's clang importer.
static inline pthread_mutex_t *curlew_share_mutex(curl_lock_data data) {
    static pthread_mutex_t locks[CURL_LOCK_DATA_LAST];
    return &locks[data];
}

static inline void curlew_share_lock(CURL *handle, curl_lock_data data, curl_lock_access access, void *userptr) {
    (void)handle; (void)access; (void)userptr;
    pthread_mutex_lock(curlew_share_mutex(data));
}
static inline void curlew_share_unlock(CURL *handle, curl_lock_data data, void *userptr) {
    (void)handle; (void)userptr;
    pthread_mutex_unlock(curlew_share_mutex(data));
}

/// A share handle with the process-wide locks that shares DNS and TLS sessions; NULL if libcurl has no memory.
static inline CURLSH *curlew_share_make(void) {
    CURLSH *share = curl_share_init();
    if (share == NULL) { return NULL; }
    curl_share_setopt(share, CURLSHOPT_LOCKFUNC, curlew_share_lock);
    curl_share_setopt(share, CURLSHOPT_UNLOCKFUNC, curlew_share_unlock);
    curl_share_setopt(share, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS);
    curl_share_setopt(share, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION);
    return share;
}

/// Creates a share handle that shares DNS and TLS sessions between multi handles on different threads.
static inline CURLSH *curlew_share_create(void) {
    for (int index = 0; index < CURL_LOCK_DATA_LAST; index++) {
        pthread_mutex_init(curlew_share_mutex((curl_lock_data)index), NULL);
    }
    return curlew_share_make();
}

/// A share handle like the process's (DNS, TLS sessions) that also holds a cookie store: one per client that keeps
/// cookies. Its locks are the process share's mutexes, initialised when that was created (call it first).
static inline CURLSH *curlew_share_create_with_cookies(void) {
    CURLSH *share = curlew_share_make();
    if (share == NULL) { return NULL; }
    curl_share_setopt(share, CURLSHOPT_SHARE, CURL_LOCK_DATA_COOKIE);
    return share;
}

// MARK: waking a loop

/// A non-blocking, close-on-exec eventfd a loop polls beside libcurl's sockets.
static inline int curlew_wakeup_create(void) {
    return eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
}
static inline void curlew_wakeup_signal(int fd) {
    uint64_t one = 1;
    ssize_t written = write(fd, &one, sizeof one);
    (void)written;  // EAGAIN means the counter is already non-zero: the loop wakes anyway.
}
static inline void curlew_wakeup_drain(int fd) {
    uint64_t value;
    ssize_t got = read(fd, &value, sizeof value);
    (void)got;
}

// MARK: epoll, for the thread loop on libcurl's socket API
// (struct epoll_event is packed on x86_64; these keep it on the C side.)

/// Events one epoll_wait returns at most; more wait for the next call.
#define CURLEW_EPOLL_BATCH 256

static inline int curlew_epoll_create(void) {
    return epoll_create1(EPOLL_CLOEXEC);
}

/// Watches `fd` for libcurl's CURL_POLL_IN/OUT interest: added when `is_new`, changed otherwise; a number that
/// is already (or no longer) in the set is changed (or added) instead. `tag` comes back with its events (the
/// loop's multi handle the socket belongs to). Returns 0 or an errno.
static inline int curlew_epoll_watch(int epoll_fd, int fd, int what, int is_new, uint32_t tag) {
    struct epoll_event event;
    memset(&event, 0, sizeof event);
    event.data.u64 = ((uint64_t)tag << 32) | (uint32_t)fd;
    if (what & CURL_POLL_IN) event.events |= EPOLLIN;
    if (what & CURL_POLL_OUT) event.events |= EPOLLOUT;
    if (epoll_ctl(epoll_fd, is_new ? EPOLL_CTL_ADD : EPOLL_CTL_MOD, fd, &event) == 0) return 0;
    int error = errno;
    if ((is_new && error == EEXIST) || (!is_new && error == ENOENT)) {
        if (epoll_ctl(epoll_fd, is_new ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, fd, &event) == 0) return 0;
        error = errno;
    }
    return error;
}

/// The inode of the socket open under `fd` (0 if none): which socket a number names now.
static inline uint64_t curlew_socket_inode(int fd) {
    struct stat info;
    if (fstat(fd, &info) != 0) return 0;
    return (uint64_t)info.st_ino;
}

/// Stops watching `fd`; harmless if libcurl already closed it (the kernel then dropped it from the set).
static inline void curlew_epoll_unwatch(int epoll_fd, int fd) {
    (void)epoll_ctl(epoll_fd, EPOLL_CTL_DEL, fd, NULL);
}

/// Waits up to `timeout_ms` for at most CURLEW_EPOLL_BATCH events; fills `fds`, `masks` (CURL_CSELECT_*) and
/// `tags` (as given to curlew_epoll_watch) and returns how many, 0 on timeout or EINTR, -1 on any other error.
static inline int curlew_epoll_wait(int epoll_fd, int *fds, int *masks, uint32_t *tags, int timeout_ms) {
    struct epoll_event events[CURLEW_EPOLL_BATCH];
    int ready = epoll_wait(epoll_fd, events, CURLEW_EPOLL_BATCH, timeout_ms);
    if (ready < 0) return errno == EINTR ? 0 : -1;
    for (int i = 0; i < ready; i++) {
        int mask = 0;
        if (events[i].events & EPOLLIN) mask |= CURL_CSELECT_IN;
        if (events[i].events & EPOLLOUT) mask |= CURL_CSELECT_OUT;
        if (events[i].events & (EPOLLERR | EPOLLHUP)) mask |= CURL_CSELECT_ERR;
        fds[i] = (int)(uint32_t)events[i].data.u64;
        tags[i] = (uint32_t)(events[i].data.u64 >> 32);
        masks[i] = mask;
    }
    return ready;
}

// MARK: process-wide initialisation

static inline curl_version_info_data *curlew_version_info(void) {
    return curl_version_info(CURLVERSION_NOW);
}

/// Names the calling thread (at most 15 characters show in tools such as top and perf).
static inline void curlew_set_thread_name(const char *name) {
    prctl(PR_SET_NAME, name, 0, 0, 0);
}

/// Keeps OpenSSL from registering its exit-time cleanup, which races libcurl handles still
/// in use on other threads at process exit (the crash URLSession on Linux had). Looked up
/// dynamically so the engine does not link OpenSSL itself.
static inline void curlew_disable_openssl_atexit(void) {
    typedef int (*openssl_init_crypto_fn)(uint64_t, const void *);
    openssl_init_crypto_fn init = (openssl_init_crypto_fn)dlsym(RTLD_DEFAULT, "OPENSSL_init_crypto");
    if (init != NULL) {
        const uint64_t OPENSSL_INIT_NO_ATEXIT_FLAG = 0x00080000L;
        init(OPENSSL_INIT_NO_ATEXIT_FLAG, NULL);
    }
}

// MARK: brotli and zstd decoders

/* The engine decodes response bodies itself: libcurl's decoders never report a body whose coding ends early (a
 * truncated gzip, brotli or zstd body is a success to libcurl 7.88 and 8.14 alike). libcurl links the system's
 * brotli and zstd decoders, so their entry points are already in the process; the engine borrows them by name rather
 * than requiring their development packages, and asks for br or zstd only when both are found. The declarations
 * follow those libraries' stable C interfaces (brotli/decode.h, zstd.h). */
typedef struct curlew_zstd_in_buffer { const void *src; size_t size; size_t pos; } curlew_zstd_in_buffer;
typedef struct curlew_zstd_out_buffer { void *dst; size_t size; size_t pos; } curlew_zstd_out_buffer;

typedef struct curlew_stream_decoders {
    void *(*brotli_create)(void *alloc, void *free, void *opaque);
    /* BrotliDecoderResult: 0 error, 1 success, 2 needs more input, 3 needs more output. */
    int (*brotli_decompress)(void *state, size_t *available_in, const uint8_t **next_in, size_t *available_out,
                             uint8_t **next_out, size_t *total_out);
    void (*brotli_destroy)(void *state);
    int (*brotli_error_code)(const void *state);
    const char *(*brotli_error_string)(int code);
    void *(*zstd_create)(void);
    size_t (*zstd_free)(void *stream);
    size_t (*zstd_init)(void *stream);
    size_t (*zstd_decompress)(void *stream, curlew_zstd_out_buffer *output, curlew_zstd_in_buffer *input);
    unsigned (*zstd_is_error)(size_t code);
    const char *(*zstd_error_name)(size_t code);
} curlew_stream_decoders;

/// Looks up the brotli and zstd decoders libcurl brought into the process; a field is NULL where a symbol is not
/// there.
static inline curlew_stream_decoders curlew_find_stream_decoders(void) {
    curlew_stream_decoders found;
#define CURLEW_FIND(field, symbol) found.field = (__typeof__(found.field))dlsym(RTLD_DEFAULT, symbol)
    CURLEW_FIND(brotli_create, "BrotliDecoderCreateInstance");
    CURLEW_FIND(brotli_decompress, "BrotliDecoderDecompressStream");
    CURLEW_FIND(brotli_destroy, "BrotliDecoderDestroyInstance");
    CURLEW_FIND(brotli_error_code, "BrotliDecoderGetErrorCode");
    CURLEW_FIND(brotli_error_string, "BrotliDecoderErrorString");
    CURLEW_FIND(zstd_create, "ZSTD_createDStream");
    CURLEW_FIND(zstd_free, "ZSTD_freeDStream");
    CURLEW_FIND(zstd_init, "ZSTD_initDStream");
    CURLEW_FIND(zstd_decompress, "ZSTD_decompressStream");
    CURLEW_FIND(zstd_is_error, "ZSTD_isError");
    CURLEW_FIND(zstd_error_name, "ZSTD_getErrorName");
#undef CURLEW_FIND
    return found;
}

// MARK: libcurl's allocator

/* libcurl makes about 35 small allocations per request, 8 of them calloc and 9 realloc. In a process with more
 * than one thread (every Swift process) glibc locks its arena for each calloc and realloc, while malloc and free
 * of small blocks go through the calling thread's cache without a lock. Measured with the raw C client on one
 * core: a second (idle) thread cost it ~3 % of its requests/s; these two functions win nearly all of it back.
 * Large blocks keep glibc's own calloc (fresh pages need no zeroing) and realloc (mremap, no copy). */
#define CURLEW_SMALL_BLOCK (64 * 1024)

/* memset through a pointer the optimiser cannot see through: clang turns malloc followed by a zero fill (memset or
 * explicit_bzero alike) back into calloc, and so back into the arena lock. */
static void *(*volatile curlew_zero_fill)(void *, int, size_t) = memset;

static void *curlew_curl_calloc(size_t count, size_t size) {
    size_t total;
    if (__builtin_mul_overflow(count, size, &total)) return NULL;
    if (total >= CURLEW_SMALL_BLOCK) return calloc(count, size);
    void *block = malloc(total);
    if (block != NULL) curlew_zero_fill(block, 0, total);
    return block;
}

static void *curlew_curl_realloc(void *old, size_t size) {
    if (old == NULL) return malloc(size);
    if (size == 0 || size >= CURLEW_SMALL_BLOCK) return realloc(old, size);
    size_t usable = malloc_usable_size(old);
    if (usable >= CURLEW_SMALL_BLOCK) return realloc(old, size);
    if (size <= usable && size >= usable / 2) return old;
    void *block = malloc(size);
    if (block == NULL) return NULL;
    memcpy(block, old, usable < size ? usable : size);
    free(old);
    return block;
}

/// curl_global_init with the allocator above. If libcurl was initialised before (by another library in the
/// process), libcurl keeps the allocator it has, which is just as correct.
static inline CURLcode curlew_global_init(long flags) {
    return curl_global_init_mem(flags, malloc, free, curlew_curl_realloc, strdup, curlew_curl_calloc);
}

/// With CURLOPT_NOSIGNAL libcurl no longer blocks SIGPIPE, so a peer that closes a socket
/// mid-write would kill the process.
static inline void curlew_ignore_sigpipe(void) {
    signal(SIGPIPE, SIG_IGN);
}

/* The CPUs this process may run on (taskset, cpusets): the raw syscall, since glibc declares
 * sched_getaffinity and CPU_COUNT only under _GNU_SOURCE, which Swift's Glibc module is not built with. */
static inline int curlew_allowed_cpu_count(void) {
    unsigned long mask[32];
    long bytes = syscall(SYS_sched_getaffinity, 0, sizeof(mask), mask);
    if (bytes <= 0) return -1;
    int count = 0;
    for (long i = 0; i < bytes / (long)sizeof(unsigned long); i++) count += __builtin_popcountl(mask[i]);
    return count;
}

#endif
