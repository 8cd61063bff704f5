/*
 * What the raw-libcurl GET clients (bench_curl.c, bench_curl_socket.c) share: the command line, the easy handle's
 * options and the counting of results, so the two loops differ only in how they drive libcurl.
 */
#ifndef BENCH_COMMON_H
#define BENCH_COMMON_H

#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct transfer {
    CURL *easy;
    size_t bytes;
};

struct bench_options {
    const char *url;
    const char *cafile;
    long concurrency;
    long requests;
    int http2;
    /* bench_curl_socket only: multi handles sharing the transfers (0: one per 64 transfers in flight). */
    long parts;
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
    fprintf(stderr, "usage: %s --url URL [--concurrency C] --requests N [--cafile PATH] [--http2] [--parts P]\n",
            program);
    exit(2);
}

static struct bench_options parse_options(int argc, char **argv) {
    struct bench_options options = {.concurrency = 1, .parts = 1};
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--url") == 0 && i + 1 < argc) {
            options.url = argv[++i];
        } else if (strcmp(argv[i], "--concurrency") == 0 && i + 1 < argc) {
            options.concurrency = strtol(argv[++i], NULL, 10);
        } else if (strcmp(argv[i], "--requests") == 0 && i + 1 < argc) {
            options.requests = strtol(argv[++i], NULL, 10);
        } else if (strcmp(argv[i], "--cafile") == 0 && i + 1 < argc) {
            options.cafile = argv[++i];
        } else if (strcmp(argv[i], "--http2") == 0) {
            options.http2 = 1;
        } else if (strcmp(argv[i], "--parts") == 0 && i + 1 < argc) {
            options.parts = strtol(argv[++i], NULL, 10);
        } else {
            usage(argv[0]);
        }
    }
    if (options.url == NULL || options.concurrency < 1 || options.requests < 1) {
        usage(argv[0]);
    }
    return options;
}

/* Creates the easy handle of one transfer slot, set up once for every request it will make. */
static void make_transfer(struct transfer *transfer, const struct bench_options *options) {
    CURL *easy = curl_easy_init();
    transfer->easy = easy;
    curl_easy_setopt(easy, CURLOPT_URL, options->url);
    curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, count_bytes);
    curl_easy_setopt(easy, CURLOPT_WRITEDATA, transfer);
    curl_easy_setopt(easy, CURLOPT_PRIVATE, transfer);
    curl_easy_setopt(easy, CURLOPT_ACCEPT_ENCODING, "");
    if (options->http2) {
        curl_easy_setopt(easy, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2TLS);
        curl_easy_setopt(easy, CURLOPT_PIPEWAIT, 1L);
    } else {
        curl_easy_setopt(easy, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
    }
    if (options->cafile != NULL) {
        curl_easy_setopt(easy, CURLOPT_CAINFO, options->cafile);
    }
}

/* The transfer slots: as many as requests in flight, never more than requests; `*count` says how many. */
static struct transfer *make_transfers(const struct bench_options *options, long *count) {
    *count = options->concurrency < options->requests ? options->concurrency : options->requests;
    struct transfer *transfers = calloc((size_t)*count, sizeof(struct transfer));
    if (transfers == NULL) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    for (long i = 0; i < *count; i++) {
        make_transfer(&transfers[i], options);
    }
    return transfers;
}

/* Prints the JSON line every client prints, then removes and frees the slots. */
static inline void report_and_free(const char *client, CURLM *multi, struct transfer *transfers, long count, long completed,
                            long failures, double elapsed) {
    printf("{\"client\": \"%s\", \"requests\": %ld, \"failures\": %ld, \"seconds\": %.6f}\n", client, completed,
           failures, elapsed);
    fflush(stdout);
    for (long i = 0; i < count; i++) {
        curl_multi_remove_handle(multi, transfers[i].easy);
        curl_easy_cleanup(transfers[i].easy);
    }
    free(transfers);
}

/* Reads libcurl's completion messages: counts each finished request, a failure if it did not end in 200, and
 * sends its handle out again while fewer than N requests were started. Every message is read before any handle
 * is removed: libcurl 7.88's curl_multi_remove_handle walks the messages still queued, so removing each handle as
 * its message is read costs the square of the transfers that finished together. */
static void finish_transfers(CURLM *multi, const struct bench_options *options, long *started, long *completed,
                             long *failures) {
    static long printed = 0;
    static CURL **handles = NULL;
    static CURLcode *results = NULL;
    static long capacity = 0;
    long count = 0;
    CURLMsg *message;
    int queued;
    while ((message = curl_multi_info_read(multi, &queued)) != NULL) {
        if (message->msg != CURLMSG_DONE) {
            continue;
        }
        if (count == capacity) {
            capacity = capacity ? capacity * 2 : 256;
            handles = realloc(handles, (size_t)capacity * sizeof *handles);
            results = realloc(results, (size_t)capacity * sizeof *results);
            if (handles == NULL || results == NULL) {
                fprintf(stderr, "out of memory\n");
                exit(1);
            }
        }
        handles[count] = message->easy_handle;
        results[count] = message->data.result;
        count++;
    }
    for (long i = 0; i < count; i++) {
        CURL *easy = handles[i];
        long status = 0;
        curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
        if (results[i] != CURLE_OK || status != 200) {
            (*failures)++;
            if (printed++ < 3) {
                fprintf(stderr, "request failed: %s, status %ld\n", curl_easy_strerror(results[i]), status);
            }
        }
        (*completed)++;
        curl_multi_remove_handle(multi, easy);
        if (*started < options->requests) {
            curl_multi_add_handle(multi, easy);
            (*started)++;
        }
    }
}

#endif
