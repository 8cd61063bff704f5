/* S8-checks: what each of Curlew's per-request checks costs, measured by switching it off in a run of the unchanged
 * `curlew` binary. Loaded with LD_PRELOAD by run_command.sh, for measurement only: nothing in Curlew can turn a
 * check off, and no build of Curlew is changed.
 *
 * WITHOUT_CHECKS (a space-separated list) names what is switched off:
 *   peek     the check of a reused HTTP/1 connection for waiting bytes before a request is written: its
 *            recv(MSG_PEEK | MSG_DONTWAIT) of one byte answers "nothing waiting" without the system call
 *   prereq   libcurl's pre-request callback (CURLOPT_PREREQFUNCTION) is never set: no connection check, no
 *            connection registry, no credential policy on redirects
 *   headers  the header callback (CURLOPT_HEADERFUNCTION) is never set, nor its data (CURLOPT_HEADERDATA, which
 *            alone would make libcurl hand header lines to the write callback): no framing checks (two
 *            Content-Lengths, Content-Length with Transfer-Encoding), no parsed head
 *   maxage   CURLOPT_MAXAGE_CONN is never set: libcurl's default idle age instead of Curlew's 4 s. A control: no
 *            connection of a busy run nears either age, so its row shows the measurement's noise
 * Only what a plain GET with a discarded body needs works without them: `curlew bench URL`, nothing else. */
#define _GNU_SOURCE
#include <curl/curl.h>
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

static int switched_off(const char *check) {
    const char *list = getenv("WITHOUT_CHECKS");
    if (list == NULL) return 0;
    size_t length = strlen(check);
    for (const char *at = strstr(list, check); at != NULL; at = strstr(at + 1, check)) {
        int starts = at == list || at[-1] == ' ';
        int ends = at[length] == '\0' || at[length] == ' ';
        if (starts && ends) return 1;
    }
    return 0;
}

ssize_t recv(int fd, void *buffer, size_t length, int flags) {
    static ssize_t (*real_recv)(int, void *, size_t, int);
    if (real_recv == NULL) real_recv = (ssize_t(*)(int, void *, size_t, int))dlsym(RTLD_NEXT, "recv");
    if (length == 1 && flags == (MSG_PEEK | MSG_DONTWAIT) && switched_off("peek")) {
        errno = EAGAIN;
        return -1;
    }
    return real_recv(fd, buffer, length, flags);
}

#undef curl_easy_setopt
CURLcode curl_easy_setopt(CURL *handle, CURLoption option, ...) {
    static CURLcode (*real_setopt)(CURL *, CURLoption, ...);
    if (real_setopt == NULL) real_setopt = (CURLcode(*)(CURL *, CURLoption, ...))dlsym(RTLD_NEXT, "curl_easy_setopt");
    /* Every option takes one argument of a pointer's size on x86_64 and aarch64 (long, curl_off_t, pointers). */
    va_list arguments;
    va_start(arguments, option);
    void *value = va_arg(arguments, void *);
    va_end(arguments);
    if ((option == CURLOPT_PREREQFUNCTION && switched_off("prereq")) ||
        ((option == CURLOPT_HEADERFUNCTION || option == CURLOPT_HEADERDATA) && switched_off("headers")) ||
        (option == CURLOPT_MAXAGE_CONN && switched_off("maxage")))
        return CURLE_OK;
    return real_setopt(handle, option, value);
}
