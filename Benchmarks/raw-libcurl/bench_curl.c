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
 * Built by run.sh with: cc -O2 -o bench_curl bench_curl.c -lcurl (bench_common.h beside it)
 */
#include "bench_common.h"

int main(int argc, char **argv) {
    struct bench_options options = parse_options(argc, argv);

    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        fprintf(stderr, "curl_global_init failed\n");
        return 1;
    }
    CURLM *multi = curl_multi_init();
    if (options.http2) {
        curl_multi_setopt(multi, CURLMOPT_PIPELINING, (long)CURLPIPE_MULTIPLEX);
    }
    curl_multi_setopt(multi, CURLMOPT_MAXCONNECTS, options.concurrency);

    long handles = 0;
    struct transfer *transfers = make_transfers(&options, &handles);

    long started = 0;
    long completed = 0;
    long failures = 0;
    double start = now_seconds();
    for (long i = 0; i < handles; i++) {
        curl_multi_add_handle(multi, transfers[i].easy);
        started++;
    }

    while (completed < options.requests) {
        int running = 0;
        CURLMcode mc = curl_multi_perform(multi, &running);
        if (mc != CURLM_OK) {
            fprintf(stderr, "curl_multi_perform: %s\n", curl_multi_strerror(mc));
            return 1;
        }
        finish_transfers(multi, &options, &started, &completed, &failures);
        if (completed >= options.requests) {
            break;
        }
        mc = curl_multi_poll(multi, NULL, 0, 1000, NULL);
        if (mc != CURLM_OK) {
            fprintf(stderr, "curl_multi_poll: %s\n", curl_multi_strerror(mc));
            return 1;
        }
    }
    double elapsed = now_seconds() - start;

    report_and_free("raw-libcurl", multi, transfers, handles, completed, failures, elapsed);
    curl_multi_cleanup(multi);
    curl_global_cleanup();
    return failures == 0 ? 0 : 1;
}
