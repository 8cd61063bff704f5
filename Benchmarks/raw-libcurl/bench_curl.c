/*
 * raw-libcurl: the limit for any client built on libcurl.
 *
 * A plain libcurl multi loop (curl_multi_perform + curl_multi_info_read + curl_multi_poll):
 * C easy handles are created once and each is re-added as soon as it completes, until
 * exactly N requests have been issued. Same command line and JSON line as the Swift clients:
 *
 *   bench_curl --url URL [--concurrency C] --requests N [--cafile PATH] [--http2]
 *   {"client": "raw-libcurl", "requests": N, "failures": F, "seconds": S}
 *
 * Built by run.sh with: cc -O2 -o bench_curl bench_curl.c -lcurl
 */
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct transfer {
    CURL *easy;
    size_t bytes;
};

static size_t count_bytes(char *data, size_t size, size_t nmemb, void *userdata) {
    (void)data;
    struct transfer *transfer = userdata;
    transfer->bytes += size * nmemb;
    return size * nmemb;
}

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void usage(const char *program) {
    fprintf(stderr, "usage: %s --url URL [--concurrency C] --requests N [--cafile PATH] [--http2]\n", program);
    exit(2);
}

int main(int argc, char **argv) {
    const char *url = NULL;
    const char *cafile = NULL;
    long concurrency = 1;
    long requests = 0;
    int http2 = 0;

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--url") == 0 && i + 1 < argc) {
            url = argv[++i];
        } else if (strcmp(argv[i], "--concurrency") == 0 && i + 1 < argc) {
            concurrency = strtol(argv[++i], NULL, 10);
        } else if (strcmp(argv[i], "--requests") == 0 && i + 1 < argc) {
            requests = strtol(argv[++i], NULL, 10);
        } else if (strcmp(argv[i], "--cafile") == 0 && i + 1 < argc) {
            cafile = argv[++i];
        } else if (strcmp(argv[i], "--http2") == 0) {
            http2 = 1;
        } else {
            usage(argv[0]);
        }
    }
    if (url == NULL || concurrency < 1 || requests < 1) {
        usage(argv[0]);
    }

    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        fprintf(stderr, "curl_global_init failed\n");
        return 1;
    }
    CURLM *multi = curl_multi_init();
    if (http2) {
        curl_multi_setopt(multi, CURLMOPT_PIPELINING, (long)CURLPIPE_MULTIPLEX);
    }
    curl_multi_setopt(multi, CURLMOPT_MAXCONNECTS, concurrency);

    long handles = concurrency < requests ? concurrency : requests;
    struct transfer *transfers = calloc((size_t)handles, sizeof(struct transfer));
    if (transfers == NULL) {
        return 1;
    }
    for (long i = 0; i < handles; i++) {
        CURL *easy = curl_easy_init();
        transfers[i].easy = easy;
        curl_easy_setopt(easy, CURLOPT_URL, url);
        curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, count_bytes);
        curl_easy_setopt(easy, CURLOPT_WRITEDATA, &transfers[i]);
        curl_easy_setopt(easy, CURLOPT_PRIVATE, &transfers[i]);
        curl_easy_setopt(easy, CURLOPT_ACCEPT_ENCODING, "");
        if (http2) {
            curl_easy_setopt(easy, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2TLS);
            curl_easy_setopt(easy, CURLOPT_PIPEWAIT, 1L);
        } else {
            curl_easy_setopt(easy, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
        }
        if (cafile != NULL) {
            curl_easy_setopt(easy, CURLOPT_CAINFO, cafile);
        }
    }

    long started = 0;
    long completed = 0;
    long failures = 0;
    long printed = 0;
    double start = now_seconds();
    for (long i = 0; i < handles; i++) {
        curl_multi_add_handle(multi, transfers[i].easy);
        started++;
    }

    while (completed < requests) {
        int running = 0;
        CURLMcode mc = curl_multi_perform(multi, &running);
        if (mc != CURLM_OK) {
            fprintf(stderr, "curl_multi_perform: %s\n", curl_multi_strerror(mc));
            return 1;
        }
        CURLMsg *message;
        int queued;
        while ((message = curl_multi_info_read(multi, &queued)) != NULL) {
            if (message->msg != CURLMSG_DONE) {
                continue;
            }
            CURL *easy = message->easy_handle;
            CURLcode result = message->data.result;
            long status = 0;
            curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
            if (result != CURLE_OK || status != 200) {
                failures++;
                if (printed++ < 3) {
                    fprintf(stderr, "request failed: %s, status %ld\n", curl_easy_strerror(result), status);
                }
            }
            completed++;
            curl_multi_remove_handle(multi, easy);
            if (started < requests) {
                curl_multi_add_handle(multi, easy);
                started++;
            }
        }
        if (completed >= requests) {
            break;
        }
        mc = curl_multi_poll(multi, NULL, 0, 1000, NULL);
        if (mc != CURLM_OK) {
            fprintf(stderr, "curl_multi_poll: %s\n", curl_multi_strerror(mc));
            return 1;
        }
    }
    double elapsed = now_seconds() - start;

    printf("{\"client\": \"raw-libcurl\", \"requests\": %ld, \"failures\": %ld, \"seconds\": %.6f}\n",
           completed, failures, elapsed);
    fflush(stdout);

    for (long i = 0; i < handles; i++) {
        curl_multi_remove_handle(multi, transfers[i].easy);
        curl_easy_cleanup(transfers[i].easy);
    }
    free(transfers);
    curl_multi_cleanup(multi);
    curl_global_cleanup();
    return failures == 0 ? 0 : 1;
}
