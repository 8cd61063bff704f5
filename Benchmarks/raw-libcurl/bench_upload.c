/*
 * raw-libcurl uploads (S4-S6): the limit for any upload client built on libcurl (and zlib).
 *
 *   bench_upload --mode raw  --url URL --file PATH [--method POST|PUT]
 *       one request, the file streamed by a read callback (read(2) into libcurl's buffer),
 *       CURLOPT_POSTFIELDSIZE_LARGE = file size, CURLOPT_UPLOAD_BUFFERSIZE 256 KiB (as Curlew)
 *   bench_upload --mode mime --url URL --file PATH
 *       multipart/form-data with curl_mime: fields a=1, b=2, then the file (curl_mime_filedata)
 *   bench_upload --mode gzip --url URL --file PATH [--level 1]
 *       the read callback deflates the file with zlib (gzip wrapper, 64 KiB input reads, as Curlew),
 *       Content-Encoding: gzip, chunked
 *   bench_upload --mode zlib --file PATH [--level 1]
 *       no network: zlib's own speed, deflating the file (gzip wrapper) into a discarded buffer
 *
 * Like Curlew, no `Expect: 100-continue`. The server (nginx.sh's /upload) answers with the number of
 * body bytes it read; the run fails unless that matches what was sent. One JSON line on stdout:
 *   {"client": "raw-libcurl", "mode": M, "requests": 1, "failures": F, "seconds": S, "bytes": FILE_BYTES,
 *    "sent_bytes": B, "server_bytes": N, "compressed_bytes": Z}
 * seconds: from the start of the request (or of deflating) to the end of the response, measured here.
 *
 * Built by run.sh with: cc -O2 -o bench_upload bench_upload.c -lcurl -lz
 */
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#define INPUT_CHUNK (64 * 1024)

struct upload {
    int fd;
    int failed;
    /* gzip */
    z_stream z;
    unsigned char *input;
    int input_ended;
    int finished;
    long long compressed;
    /* the response */
    char response[256];
    size_t response_length;
};

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static size_t read_raw(char *buffer, size_t size, size_t nitems, void *userdata) {
    struct upload *upload = userdata;
    ssize_t got = read(upload->fd, buffer, size * nitems);
    if (got < 0) {
        upload->failed = 1;
        return CURL_READFUNC_ABORT;
    }
    return (size_t)got;
}

static int gzip_init(struct upload *upload, int level) {
    memset(&upload->z, 0, sizeof upload->z);
    upload->input = malloc(INPUT_CHUNK);
    if (upload->input == NULL) {
        return -1;
    }
    /* windowBits 15 + 16: the gzip wrapper; memLevel 8: zlib's default (as Curlew). */
    return deflateInit2(&upload->z, level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) == Z_OK ? 0 : -1;
}

/* Deflates into out[0..capacity) until it is full or the stream ends; returns the bytes produced or -1. */
static long gzip_fill(struct upload *upload, unsigned char *out, size_t capacity) {
    if (upload->finished) {
        return 0;
    }
    upload->z.next_out = out;
    upload->z.avail_out = (uInt)capacity;
    while (upload->z.avail_out > 0) {
        if (upload->z.avail_in == 0 && !upload->input_ended) {
            ssize_t got = read(upload->fd, upload->input, INPUT_CHUNK);
            if (got < 0) {
                return -1;
            }
            if (got == 0) {
                upload->input_ended = 1;
            } else {
                upload->z.next_in = upload->input;
                upload->z.avail_in = (uInt)got;
            }
        }
        int status = deflate(&upload->z, upload->input_ended ? Z_FINISH : Z_NO_FLUSH);
        if (status == Z_STREAM_END) {
            upload->finished = 1;
            break;
        }
        if (status != Z_OK && status != Z_BUF_ERROR) {
            return -1;
        }
    }
    long produced = (long)(capacity - upload->z.avail_out);
    upload->compressed += produced;
    return produced;
}

static size_t read_gzip(char *buffer, size_t size, size_t nitems, void *userdata) {
    struct upload *upload = userdata;
    long produced = gzip_fill(upload, (unsigned char *)buffer, size * nitems);
    if (produced < 0) {
        upload->failed = 1;
        return CURL_READFUNC_ABORT;
    }
    return (size_t)produced;
}

static size_t keep_response(char *data, size_t size, size_t nmemb, void *userdata) {
    struct upload *upload = userdata;
    size_t count = size * nmemb;
    size_t room = sizeof upload->response - 1 - upload->response_length;
    size_t copied = count < room ? count : room;
    memcpy(upload->response + upload->response_length, data, copied);
    upload->response_length += copied;
    upload->response[upload->response_length] = 0;
    return count;
}

static void usage(const char *program) {
    fprintf(stderr, "usage: %s --mode raw|mime|gzip|zlib --file PATH [--url URL] [--method POST|PUT] [--level N]\n",
            program);
    exit(2);
}

static void report(const char *mode, int failed, double seconds, long long bytes, long long sent, long long server,
                   long long compressed) {
    printf("{\"client\": \"raw-libcurl\", \"mode\": \"%s\", \"requests\": 1, \"failures\": %d, \"seconds\": %.6f, "
           "\"bytes\": %lld, \"sent_bytes\": %lld, \"server_bytes\": %lld, \"compressed_bytes\": %lld}\n",
           mode, failed ? 1 : 0, seconds, bytes, sent, server, compressed);
    fflush(stdout);
}

int main(int argc, char **argv) {
    const char *mode = NULL, *url = NULL, *path = NULL, *method = "POST";
    int level = 1;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--mode") == 0 && i + 1 < argc) {
            mode = argv[++i];
        } else if (strcmp(argv[i], "--url") == 0 && i + 1 < argc) {
            url = argv[++i];
        } else if (strcmp(argv[i], "--file") == 0 && i + 1 < argc) {
            path = argv[++i];
        } else if (strcmp(argv[i], "--method") == 0 && i + 1 < argc) {
            method = argv[++i];
        } else if (strcmp(argv[i], "--level") == 0 && i + 1 < argc) {
            level = atoi(argv[++i]);
        } else {
            usage(argv[0]);
        }
    }
    if (mode == NULL || path == NULL) {
        usage(argv[0]);
    }
    int is_zlib = strcmp(mode, "zlib") == 0;
    if (!is_zlib && url == NULL) {
        usage(argv[0]);
    }

    struct upload upload;
    memset(&upload, 0, sizeof upload);
    upload.fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat status;
    if (upload.fd < 0 || fstat(upload.fd, &status) != 0) {
        fprintf(stderr, "cannot open %s: %s\n", path, strerror(errno));
        return 2;
    }
    long long file_bytes = (long long)status.st_size;

    if (is_zlib) {
        unsigned char *out = malloc(256 * 1024);
        if (out == NULL || gzip_init(&upload, level) != 0) {
            fprintf(stderr, "zlib: deflateInit2 failed\n");
            return 1;
        }
        double start = now_seconds();
        long produced;
        while ((produced = gzip_fill(&upload, out, 256 * 1024)) > 0) {
        }
        double elapsed = now_seconds() - start;
        int failed = produced < 0 || upload.z.total_in != (uLong)file_bytes;
        if (failed) {
            fprintf(stderr, "zlib: deflate failed or read %lu of %lld bytes\n", upload.z.total_in, file_bytes);
        }
        report("zlib", failed, elapsed, file_bytes, 0, 0, upload.compressed);
        deflateEnd(&upload.z);
        return failed;
    }

    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        fprintf(stderr, "curl_global_init failed\n");
        return 1;
    }
    CURL *easy = curl_easy_init();
    struct curl_slist *headers = curl_slist_append(NULL, "Expect:");
    curl_mime *mime = NULL;
    curl_easy_setopt(easy, CURLOPT_URL, url);
    curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(easy, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
    curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, keep_response);
    curl_easy_setopt(easy, CURLOPT_WRITEDATA, &upload);
    curl_easy_setopt(easy, CURLOPT_UPLOAD_BUFFERSIZE, 256L * 1024);

    if (strcmp(mode, "raw") == 0) {
        curl_easy_setopt(easy, CURLOPT_POST, 1L);
        curl_easy_setopt(easy, CURLOPT_READFUNCTION, read_raw);
        curl_easy_setopt(easy, CURLOPT_READDATA, &upload);
        curl_easy_setopt(easy, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)file_bytes);
        headers = curl_slist_append(headers, "Content-Type: application/octet-stream");
    } else if (strcmp(mode, "mime") == 0) {
        close(upload.fd);
        upload.fd = -1;
        mime = curl_mime_init(easy);
        curl_mimepart *part = curl_mime_addpart(mime);
        curl_mime_name(part, "a");
        curl_mime_data(part, "1", CURL_ZERO_TERMINATED);
        part = curl_mime_addpart(mime);
        curl_mime_name(part, "b");
        curl_mime_data(part, "2", CURL_ZERO_TERMINATED);
        part = curl_mime_addpart(mime);
        curl_mime_name(part, "file");
        curl_mime_filedata(part, path);
        curl_mime_type(part, "application/octet-stream");
        curl_easy_setopt(easy, CURLOPT_MIMEPOST, mime);
    } else if (strcmp(mode, "gzip") == 0) {
        if (gzip_init(&upload, level) != 0) {
            fprintf(stderr, "zlib: deflateInit2 failed\n");
            return 1;
        }
        curl_easy_setopt(easy, CURLOPT_POST, 1L);
        curl_easy_setopt(easy, CURLOPT_READFUNCTION, read_gzip);
        curl_easy_setopt(easy, CURLOPT_READDATA, &upload);
        curl_easy_setopt(easy, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)-1);
        headers = curl_slist_append(headers, "Content-Encoding: gzip");
        headers = curl_slist_append(headers, "Content-Type: application/x-ndjson");
    } else {
        usage(argv[0]);
    }
    if (strcmp(method, "POST") != 0) {
        curl_easy_setopt(easy, CURLOPT_CUSTOMREQUEST, method);
    }
    curl_easy_setopt(easy, CURLOPT_HTTPHEADER, headers);

    double start = now_seconds();
    CURLcode result = curl_easy_perform(easy);
    double elapsed = now_seconds() - start;

    long code = 0;
    curl_off_t sent = 0;
    curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &code);
    curl_easy_getinfo(easy, CURLINFO_SIZE_UPLOAD_T, &sent);
    long long server = strtoll(upload.response, NULL, 10);
    int failed = 0;
    if (result != CURLE_OK || code != 200 || upload.failed) {
        fprintf(stderr, "upload failed: %s, status %ld\n", curl_easy_strerror(result), code);
        failed = 1;
    } else if (strcmp(mode, "raw") == 0 && server != file_bytes) {
        fprintf(stderr, "the server read %lld bytes, the file has %lld\n", server, file_bytes);
        failed = 1;
    } else if (strcmp(mode, "mime") == 0 && (server != (long long)sent || server <= file_bytes)) {
        fprintf(stderr, "the server read %lld bytes, %lld were sent (file %lld)\n", server, (long long)sent, file_bytes);
        failed = 1;
    } else if (strcmp(mode, "gzip") == 0 && (server != upload.compressed || !upload.finished)) {
        fprintf(stderr, "the server read %lld bytes, zlib produced %lld\n", server, upload.compressed);
        failed = 1;
    }
    report(mode, failed, elapsed, file_bytes, (long long)sent, server, upload.compressed);

    curl_easy_cleanup(easy);
    curl_mime_free(mime);
    curl_slist_free_all(headers);
    if (upload.input != NULL) {
        deflateEnd(&upload.z);
    }
    curl_global_cleanup();
    return failed;
}
