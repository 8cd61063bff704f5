#!/usr/bin/env bash
# Side-by-side benchmark of Curlew against raw libcurl, AsyncHTTPClient, URLSession, wrk and h2load.
# Invoked by `make bench` from the root; Benchmarks/README.md describes the method.
#
#   Benchmarks/run.sh            full run (3 alternating repetitions, ~2-4 s per run for fast clients)
#   BENCH_QUICK=1 Benchmarks/run.sh    smoke run: 1 repetition, small request counts
#
# Environment (all optional):
#   BENCH_REPS             repetitions (default 3, quick 1)
#   BENCH_N_C1             requests for S1 at c=1        (default 25000, quick 2000)
#   BENCH_N_C16            requests for S1 at c=16       (default 120000, quick 10000)
#   BENCH_N_C64            requests for S1 at c=64       (default 120000, quick 10000)
#   BENCH_N_H2             requests for S2 (HTTP/2, c=64) (default 100000, quick 10000)
#   BENCH_N_H2_HYPERCORN   requests for S2 against hypercorn (default 20000, quick 3000)
#   BENCH_WRK_SECONDS      duration of each wrk run      (default 3, quick 1)
#   BENCH_TIMEOUT          seconds before one client run is killed and reported failed (default 120)
#   BENCH_UPLOAD_REPS      repetitions of the upload scenarios S4-S6 (default 5, quick 1)
#   BENCH_UPLOAD_BYTES     size of the upload input files (default 1 GiB, quick 128 MiB), made by
#                          uploads/make_inputs.py in BENCH_UPLOAD_DIR (default /dev/shm/curlew-bench-upload-inputs-SIZE,
#                          removed at the end unless BENCH_UPLOAD_KEEP=1; results/raw/ if there is no /dev/shm)
#   BENCH_UPLOAD_TIMEOUT   seconds before one upload run is killed (default 120; urlsession: 60)
#   BENCH_UPLOAD_RETRIES   an upload run during which other processes took over BENCH_UPLOAD_BUSY % of a CPU
#   BENCH_UPLOAD_BUSY      (default 20) is marked noisy and run again, up to this many times (default 3)
#   BENCH_UPLOAD_VERIFY    1 (default, 0 in quick runs): once per run, PUT the S4 file and the S6 gzip body with
#                          bench-curlew-upload into nginx's WebDAV folder and compare them byte for byte
#   BENCH_SCENARIOS        space-separated subset of: s1-c1 s1-c16 s1-c64 s1-c64-unpinned s2-h2-c64
#                          s2-h2-hypercorn-c64 s3-json-c16 s10-openapi-c16 s4-upload s5-multipart s6-gzip
#                          (s2-h2-hypercorn-c64, S2 against hypercorn from PyPI with its defaults: a GOAWAY after
#                          1,000 requests per connection; only when named, it needs `pip install hypercorn`)
#   BENCH_CURLEW_VARIANTS  other bench-curlew binaries, e.g. built from other commits, as "NAME=PATH NAME2=PATH2":
#                          client curlew-at-NAME runs PATH with curlew-engine's arguments right after it, so an A/B
#                          of two commits runs in one sitting (S1, S2)
#   BENCH_CLIENTS          space-separated subset of the client ids below
#   BENCH_SKIP_BUILD=1     use the binaries already built
#   BENCH_CLIENT_CPU       CPU the pinned client runs on (default 1); nginx's worker uses NGINX_CPU (default 0)
#   BENCH_LIBCURL_PREFIX   build every client (C, Swift, curlew) against the libcurl extracted into this prefix
#                          instead of the system's (Benchmarks/libcurl.sh; `make bench-libcurl-backports`)
#   BENCH_WAIT_QUIET       before each run, wait up to this many seconds for the machine to go idle
#                          (other processes under 20% of a CPU for 1 s); default 0 = don't wait
#
# Clients: raw-libcurl curlew-engine curlew-engine-socket (the thread loop's socket-action driver) curlew-at-NAME
#          curlew-engine-plain curlew-dispatch async-http-client urlsession
# plus the ceilings wrk (S1) and h2load (S2); for the uploads also curl's command line (curl-T, curl-F,
# gzip-curl, gzip-curl-T; see uploads/cli_upload.sh) and zlib (deflate alone, no network, S6).
#
# Output: Benchmarks/results/latest.md (full runs only: not for BENCH_QUICK=1, BENCH_SCENARIOS or BENCH_CLIENTS runs,
# unless BENCH_LATEST=1; a run of only
# s4-upload s5-multipart s6-gzip writes results/uploads-latest.md);
# the report, every run's stdout, stderr and `/usr/bin/time -v` output, and the nginx config
# under Benchmarks/results/raw/<timestamp>/ (git-ignored).
set -euo pipefail

# S7 and S8 (the `curlew` command) run from a script of their own, command/run_command.sh; a list of only those
# (BENCH_SCENARIOS="S7 S8", or SCENARIOS=S7,S8) goes straight there. S9 (S3 uploads beside rclone and the AWS CLI,
# command/run_s3.sh) runs only when asked for alone: BENCH_SCENARIOS=S9.
REQUESTED_SCENARIOS=${BENCH_SCENARIOS:-${SCENARIOS:-}}
if [ -n "$REQUESTED_SCENARIOS" ]; then
    COMMAND_SCENARIOS=""
    OTHER_SCENARIOS=""
    for scenario in ${REQUESTED_SCENARIOS//,/ }; do
        case "$scenario" in
            S7 | s7 | s7-*) COMMAND_SCENARIOS="$COMMAND_SCENARIOS s7" ;;
            S8-peers | s8-peers | s8peers) COMMAND_SCENARIOS="$COMMAND_SCENARIOS s8peers" ;;
            S8-scale | s8-scale | s8scale) COMMAND_SCENARIOS="$COMMAND_SCENARIOS s8scale" ;;
            S8 | s8 | s8-*) COMMAND_SCENARIOS="$COMMAND_SCENARIOS s8" ;;
            S9 | s9 | s9-*) S3_SCENARIO=1 ;;
            *) OTHER_SCENARIOS="$OTHER_SCENARIOS $scenario" ;;
        esac
    done
    if [ -n "${S3_SCENARIO:-}" ] && [ -z "$COMMAND_SCENARIOS" ] && [ -z "$OTHER_SCENARIOS" ]; then
        exec "$(dirname "${BASH_SOURCE[0]}")/command/run_s3.sh"
    fi
    if [ -n "$COMMAND_SCENARIOS" ] && [ -z "$OTHER_SCENARIOS" ]; then
        BENCH_COMMAND_SCENARIOS=$COMMAND_SCENARIOS exec "$(dirname "${BASH_SOURCE[0]}")/command/run_command.sh"
    fi
fi

# Loopback only: no client may go through a proxy taken from the environment.
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY no_proxy NO_PROXY

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT_DIR=$(dirname "$BENCH_DIR")
COMMAND_LINE="$0${*:+ $*}"
ENV_LINE=$(env | grep -E '^(BENCH_|NGINX_)' | sort | tr '\n' ' ' || true)

QUICK=${BENCH_QUICK:-0}
if [ "$QUICK" = "1" ]; then
    REPS=${BENCH_REPS:-1}
    N_C1=${BENCH_N_C1:-2000}
    N_C16=${BENCH_N_C16:-10000}
    N_C64=${BENCH_N_C64:-10000}
    N_H2=${BENCH_N_H2:-10000}
    N_H2_HYPERCORN=${BENCH_N_H2_HYPERCORN:-3000}
    WRK_SECONDS=${BENCH_WRK_SECONDS:-1}
    UPLOAD_REPS=${BENCH_UPLOAD_REPS:-1}
    UPLOAD_BYTES=${BENCH_UPLOAD_BYTES:-134217728}
    UPLOAD_VERIFY=${BENCH_UPLOAD_VERIFY:-0}
else
    REPS=${BENCH_REPS:-3}
    N_C1=${BENCH_N_C1:-25000}
    N_C16=${BENCH_N_C16:-120000}
    N_C64=${BENCH_N_C64:-120000}
    N_H2=${BENCH_N_H2:-100000}
    N_H2_HYPERCORN=${BENCH_N_H2_HYPERCORN:-20000}
    WRK_SECONDS=${BENCH_WRK_SECONDS:-3}
    UPLOAD_REPS=${BENCH_UPLOAD_REPS:-5}
    UPLOAD_BYTES=${BENCH_UPLOAD_BYTES:-1073741824}
    UPLOAD_VERIFY=${BENCH_UPLOAD_VERIFY:-1}
fi
UPLOAD_TIMEOUT=${BENCH_UPLOAD_TIMEOUT:-120}
UPLOAD_RETRIES=${BENCH_UPLOAD_RETRIES:-3}
UPLOAD_BUSY=${BENCH_UPLOAD_BUSY:-20}
RUN_TIMEOUT=${BENCH_TIMEOUT:-120}
WAIT_QUIET=${BENCH_WAIT_QUIET:-0}
CLIENT_CPU=${BENCH_CLIENT_CPU:-1}
export NGINX_CPU=${NGINX_CPU:-0}
SCENARIOS=${BENCH_SCENARIOS:-"s1-c1 s1-c16 s1-c64 s1-c64-unpinned s2-h2-c64 s3-json-c16 s10-openapi-c16 s4-upload s5-multipart s6-gzip"}
CURLEW_VARIANT_CLIENTS=""
for variant in ${BENCH_CURLEW_VARIANTS:-}; do CURLEW_VARIANT_CLIENTS="$CURLEW_VARIANT_CLIENTS curlew-at-${variant%%=*}"; done
CLIENTS=${BENCH_CLIENTS:-"raw-libcurl curlew-engine$CURLEW_VARIANT_CLIENTS curlew-engine-socket curlew-route curlew-engine-plain curlew-dispatch async-http-client urlsession wrk h2load curl-T curl-F gzip-curl gzip-curl-T zlib curlew-openapi ahc-openapi"}

STAMP=$(date -u +%Y%m%dT%H%M%SZ)
RESULTS_DIR=$BENCH_DIR/results
RAW_DIR=$RESULTS_DIR/raw/$STAMP
mkdir -p "$RAW_DIR"
MANIFEST=$RAW_DIR/manifest.tsv
BUILD_LOG=$RAW_DIR/build.log
NGINX_DIR=$RAW_DIR/nginx
# shellcheck source=libcurl.sh
. "$BENCH_DIR/libcurl.sh"

log() {
    printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2
}

for tool in /usr/bin/time taskset nginx curl-config cc; do
    command -v "$tool" >/dev/null || { echo "run.sh: $tool is missing (apt-get install time util-linux nginx-light libcurl4-openssl-dev)" >&2; exit 1; }
done

# ---------------------------------------------------------------------------------------------
# Build

CURLEW_BUILD=ok
SWIFT_BUILD=ok
build() {
    log "building raw-libcurl"
    mkdir -p "$C_BIN_DIR"
    cc -O2 -Wall -o "$C_BIN_DIR/bench_curl" "$BENCH_DIR/raw-libcurl/bench_curl.c" $LIBCURL_CC_FLAGS
    cc -O2 -Wall -o "$C_BIN_DIR/bench_upload" "$BENCH_DIR/raw-libcurl/bench_upload.c" $LIBCURL_CC_FLAGS -lz

    log "building the Swift clients (release; a first build takes minutes)"
    if swift build -c release --package-path "$BENCH_DIR" "${SWIFT_BENCH_FLAGS[@]}" >"$BUILD_LOG" 2>&1; then
        :
    else
        CURLEW_BUILD=failed
        log "the full build failed (see $BUILD_LOG); building without CurlewEngine"
        rm -f "$(swift build -c release --package-path "$BENCH_DIR" "${SWIFT_BENCH_FLAGS[@]}" --show-bin-path 2>/dev/null)/bench-curlew"
        rm -f "$(swift build -c release --package-path "$BENCH_DIR" "${SWIFT_BENCH_FLAGS[@]}" --show-bin-path 2>/dev/null)/bench-curlew-upload"
        if ! CURLEW_BENCH_NO_ENGINE=1 swift build -c release --package-path "$BENCH_DIR" "${SWIFT_BENCH_FLAGS[@]}" >>"$BUILD_LOG" 2>&1; then
            SWIFT_BUILD=failed
            log "the Swift clients do not build either (see $BUILD_LOG)"
        fi
    fi
    # Warnings in our own sources (dependencies' warnings are theirs).
    if grep -E "(Benchmarks/Sources|Sources/CurlewEngine)/.*warning:" "$BUILD_LOG" >/dev/null 2>&1; then
        log "build warnings in Curlew/benchmark sources (see $BUILD_LOG):"
        grep -E "(Benchmarks/Sources|Sources/CurlewEngine)/.*warning:" "$BUILD_LOG" | sort -u >&2 || true
    fi
}
if [ "${BENCH_SKIP_BUILD:-0}" = "1" ]; then
    log "skipping the build (BENCH_SKIP_BUILD=1)"
else
    build
fi
SWIFT_BIN=$(swift build -c release --package-path "$BENCH_DIR" "${SWIFT_BENCH_FLAGS[@]}" --show-bin-path 2>/dev/null || echo "$BENCH_DIR/.build/release")
if [ ! -x "$SWIFT_BIN/bench-curlew" ]; then CURLEW_BUILD=failed; fi

# ---------------------------------------------------------------------------------------------
# Server

mkdir -p "$NGINX_DIR"
"$BENCH_DIR/nginx/nginx.sh" start "$NGINX_DIR" >&2
cleanup() {
    "$BENCH_DIR/nginx/nginx.sh" stop "$NGINX_DIR" || true
    if [ -n "${HYPERCORN_PID:-}" ]; then kill "$HYPERCORN_PID" 2>/dev/null || true; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM
# shellcheck disable=SC1091
. "$NGINX_DIR/env"

# hypercorn (PyPI) for s2-h2-hypercorn-c64 only: one process on nginx's CPU, HTTP/2 over TLS with nginx's certificate,
# every setting at hypercorn's default (a GOAWAY after 1,000 requests per connection, 5 s idle close, no access log).
# The app answers every path with a short text body (Tests/servers/hypercorn_app.py, the tests' own).
HYPERCORN_PID="" HYPERCORN_WORKERS=""
case " $SCENARIOS " in
    *" s2-h2-hypercorn-c64 "*)
        HYPERCORN_PORT=${BENCH_HYPERCORN_PORT:-18543}
        while ss -Hltn "sport = :$HYPERCORN_PORT" 2>/dev/null | grep -q .; do HYPERCORN_PORT=$((HYPERCORN_PORT + 1)); done
        taskset -c "$NGINX_CPU" python3 -m hypercorn --workers 1 --bind "127.0.0.1:$HYPERCORN_PORT" \
            --certfile "$NGINX_DIR/server.pem" --keyfile "$NGINX_DIR/server.key" \
            "$ROOT_DIR/Tests/servers/hypercorn_app.py:app" </dev/null >"$RAW_DIR/hypercorn.log" 2>&1 &
        HYPERCORN_PID=$!
        HYPERCORN_URL=https://127.0.0.1:$HYPERCORN_PORT
        for _ in $(seq 1 100); do
            curl -s -o /dev/null --cacert "$CA_FILE" "$HYPERCORN_URL/small" && break
            kill -0 "$HYPERCORN_PID" 2>/dev/null || break
            sleep 0.1
        done
        curl -s -o /dev/null --cacert "$CA_FILE" "$HYPERCORN_URL/small" \
            || { log "hypercorn did not start (pip install hypercorn?): $(tail -3 "$RAW_DIR/hypercorn.log")"; exit 1; }
        # hypercorn serves from a worker process of its own, also on NGINX_CPU.
        HYPERCORN_WORKERS=$(pgrep -P "$HYPERCORN_PID" | tr '\n' ' ')
        log "hypercorn $(python3 -m pip show hypercorn 2>/dev/null | awk '/^Version/{print $2}') PID $HYPERCORN_PID at $HYPERCORN_URL" ;;
esac

# ---------------------------------------------------------------------------------------------
# Runs

printf 'scenario\tclient\trep\tstatus\tnote\tprefix\texit\tload\tbusy_ticks\tnginx_ticks\tconnections\tserved\tcommand\n' >"$MANIFEST"

CLK_TCK=$(getconf CLK_TCK)
NGINX_WORKERS=$(pgrep -P "$NGINX_PID" | tr '\n' ' ')

# Busy CPU ticks of the whole machine (user nice system irq softirq steal) and of nginx's processes:
# what is left after the client's and nginx's own CPU is other processes competing with the run.
machine_busy_ticks() {
    awk '/^cpu /{print $2 + $3 + $4 + $7 + $8 + $9; exit}' /proc/stat
}
nginx_ticks() {
    local pid total=0 ticks
    for pid in $NGINX_PID $NGINX_WORKERS $HYPERCORN_PID $HYPERCORN_WORKERS; do
        ticks=$(awk '{print $14 + $15}' "/proc/$pid/stat" 2>/dev/null || echo 0)
        total=$((total + ticks))
    done
    echo "$total"
}

# With BENCH_WAIT_QUIET=S: wait up to S seconds until the machine has been idle for one second.
wait_quiet() {
    [ "$WAIT_QUIET" -gt 0 ] || return 0
    local deadline=$((SECONDS + WAIT_QUIET)) before after
    while [ "$SECONDS" -lt "$deadline" ]; do
        before=$(machine_busy_ticks)
        sleep 1
        after=$(machine_busy_ticks)
        if [ $((after - before)) -le $((CLK_TCK / 5)) ]; then return 0; fi
    done
}

# "accepted-connections served-requests" from nginx's stub_status.
nginx_counters() {
    curl -s --max-time 2 "$STATUS_URL" | awk 'NR == 3 { print $1, $3 }'
}

# run_one SCENARIO CLIENT REP PIN NOTE -- command...
# Runs the command under `timeout` and `/usr/bin/time -v`, optionally pinned, and records it.
run_one() {
    local scenario=$1 client=$2 rep=$3 pin=$4
    shift 5
    local prefix="$RAW_DIR/$scenario.$client.$rep"
    local -a pin_cmd=()
    if [ "$pin" = "pinned" ]; then pin_cmd=(taskset -c "$CLIENT_CPU"); fi
    local rc=0 load busy0 busy1 nginx0 nginx1 accepted0 served0 accepted1 served1 limit=${ONE_TIMEOUT:-$RUN_TIMEOUT}
    wait_quiet
    load=$(cut -d' ' -f1 /proc/loadavg)
    read -r accepted0 served0 < <(nginx_counters)
    busy0=$(machine_busy_ticks)
    nginx0=$(nginx_ticks)
    timeout --kill-after=5 "$limit" "${pin_cmd[@]}" /usr/bin/time -v -o "$prefix.time" "$@" \
        >"$prefix.out" 2>"$prefix.err" </dev/null || rc=$?
    busy1=$(machine_busy_ticks)
    nginx1=$(nginx_ticks)
    read -r accepted1 served1 < <(nginx_counters)
    local status=ran
    if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then status=timeout; fi
    local connections=$((accepted1 - accepted0 - 1)) served=$((served1 - served0 - 1))
    # nginx's counters say nothing about a run against hypercorn.
    case "$scenario" in *hypercorn*) connections="" served="" ;; esac
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$scenario" "$client" "$rep" "$status" "" "$prefix" "$rc" "$load" \
        "$((busy1 - busy0))" "$((nginx1 - nginx0))" "$connections" "$served" \
        "${pin_cmd[*]}${pin_cmd:+ }$*" >>"$MANIFEST"
    log "  $scenario $client rep $rep: exit $rc $(head -c 200 "$prefix.out" | tr '\n' ' ')"
}

skip_one() {
    local scenario=$1 client=$2 rep=$3 note=$4
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$scenario" "$client" "$rep" "skipped" "$note" "" "" "" "" "" "" "" "" >>"$MANIFEST"
}

# upload_run_noisy: true if, during the run just recorded, other processes took more than BENCH_UPLOAD_BUSY
# percent of a CPU (machine-wide busy time minus the client's and nginx's own CPU), as report.py computes it.
upload_run_noisy() {
    local prefix busy nginx
    read -r prefix busy nginx < <(tail -n 1 "$MANIFEST" | awk -F'\t' '{ print $6, $9, $10 }')
    [ -f "$prefix.time" ] || return 1
    awk -v busy="$busy" -v nginx="$nginx" -v tck="$CLK_TCK" -v limit="$UPLOAD_BUSY" -F': ' '
        /User time/ { cpu += $2 } /System time/ { cpu += $2 }
        /Elapsed \(wall clock\)/ { n = split($2, p, ":"); wall = 0; for (i = 1; i <= n; i++) wall = wall * 60 + p[i] }
        END { if (wall <= 0) exit 1; other = (busy / tck - cpu - nginx / tck) / wall * 100; exit !(other > limit) }' "$prefix.time"
}

# run_upload_one SCENARIO CLIENT REP -- command...: run_one, repeated up to BENCH_UPLOAD_RETRIES more times while
# other processes were busy during the run; the noisy attempts stay in the manifest as "noisy" (not in medians).
run_upload_one() {
    local scenario=$1 client=$2 rep=$3 attempt=0
    shift 4
    while true; do
        local label=$rep
        [ "$attempt" -gt 0 ] && label=$rep.retry$attempt
        run_one "$scenario" "$client" "$label" pinned "" "$@"
        if [ "$attempt" -lt "$UPLOAD_RETRIES" ] && upload_run_noisy; then
            sed -i '$ s/\tran\t/\tnoisy\t/' "$MANIFEST"
            log "    noisy (other processes busy), again"
            attempt=$((attempt + 1))
            wait_quiet
        else
            return 0
        fi
    done
}

# run_upload_scenario ID REP: S4-S6, one request of a 1 GiB file per run, client pinned.
run_upload_scenario() {
    local id=$1 rep=$2
    local url=$BASE_URL/upload mode file
    case "$id" in
        s4-upload) mode=raw; file=$UPLOAD_RANDOM ;;
        s5-multipart) mode=multipart; file=$UPLOAD_RANDOM ;;
        s6-gzip) mode=gzip; file=$UPLOAD_LINES ;;
    esac
    # One untimed upload first: the first 1 GiB nginx buffers after a pause costs it about twice the CPU of the
    # next ones (this VM gets its freed memory back slowly), which would count against whichever client is first.
    if [ "$mode" != gzip ]; then
        taskset -c "$CLIENT_CPU" "$C_BIN_DIR/bench_upload" --mode raw --url "$url" --file "$file" >/dev/null 2>&1 || true
    fi
    local client
    for client in $CLIENTS; do
        ONE_TIMEOUT=$UPLOAD_TIMEOUT
        case "$client:$mode" in
            raw-libcurl:raw) run_upload_one "$id" "$client" "$rep" -- "$C_BIN_DIR/bench_upload" --mode raw --url "$url" --file "$file" ;;
            raw-libcurl:multipart) run_upload_one "$id" "$client" "$rep" -- "$C_BIN_DIR/bench_upload" --mode mime --url "$url" --file "$file" ;;
            raw-libcurl:gzip) run_upload_one "$id" "$client" "$rep" -- "$C_BIN_DIR/bench_upload" --mode gzip --level 1 --url "$url" --file "$file" ;;
            zlib:gzip) run_upload_one "$id" "$client" "$rep" -- "$C_BIN_DIR/bench_upload" --mode zlib --level 1 --file "$file" ;;
            curlew-engine:*)
                if [ "$CURLEW_BUILD" != ok ]; then
                    skip_one "$id" "$client" "$rep" "bench-curlew-upload did not build (CurlewEngine); see raw/$STAMP/build.log"
                else
                    run_upload_one "$id" "$client" "$rep" -- "$SWIFT_BIN/bench-curlew-upload" --mode "$mode" --level 1 --url "$url" --file "$file"
                fi ;;
            async-http-client:raw)
                if [ "$SWIFT_BUILD" != ok ]; then
                    skip_one "$id" "$client" "$rep" "did not build; see raw/$STAMP/build.log"
                else
                    run_upload_one "$id" "$client" "$rep" -- "$SWIFT_BIN/bench-ahc-upload" --url "$url" --file "$file"
                fi ;;
            async-http-client:*) skip_one "$id" "$client" "$rep" "n/a: AsyncHTTPClient has no multipart forms and no request compression" ;;
            urlsession:raw)
                if [ "$SWIFT_BUILD" != ok ]; then
                    skip_one "$id" "$client" "$rep" "did not build; see raw/$STAMP/build.log"
                else
                    # Capped: slow on Linux; a run over 60 s counts as timed out.
                    ONE_TIMEOUT=$((UPLOAD_TIMEOUT < 60 ? UPLOAD_TIMEOUT : 60))
                    run_upload_one "$id" "$client" "$rep" -- "$SWIFT_BIN/bench-urlsession-upload" --url "$url" --file "$file"
                fi ;;
            urlsession:*) skip_one "$id" "$client" "$rep" "n/a: URLSession has no multipart forms and no request compression" ;;
            curl-T:raw | curl-F:multipart | gzip-curl:gzip | gzip-curl-T:gzip)
                run_upload_one "$id" "$client" "$rep" -- "$BENCH_DIR/uploads/cli_upload.sh" "$client" "$url" "$file" ;;
            *) ;;  # not a client of this scenario
        esac
        ONE_TIMEOUT=
    done
}

# run_json_scenario ID REP: S3, GET /json (gzip) decoded into a Decodable model, c = 16, client pinned.
# Only the Swift clients that decode run it: the route layer, and the engine with the same JSONDecoder
# (as curlew-engine, so the report's ratio column is the route layer's cost).
run_json_scenario() {
    local id=$1 rep=$2
    local -a common=(--url "$BASE_URL/json" --concurrency 16 --requests "$N_C16" --decode)
    local client
    for client in $CLIENTS; do
        case "$client" in
            curlew-engine | curlew-route)
                local layer=engine
                [ "$client" = curlew-route ] && layer=route
                if [ "$CURLEW_BUILD" != ok ]; then
                    skip_one "$id" "$client" "$rep" "bench-curlew-route did not build; see raw/$STAMP/build.log"
                else
                    run_one "$id" "$client" "$rep" pinned "" "$SWIFT_BIN/bench-curlew-route" --layer "$layer" "${common[@]}"
                fi ;;
            *) ;;  # not a client of this scenario (it does not decode)
        esac
    done
}

# run_openapi_scenario ID REP: S10, GET /small through a swift-openapi-runtime ClientTransport (what a generated
# client calls), c = 16, client pinned: Curlew's CurlewTransport beside AsyncHTTPClient's.
run_openapi_scenario() {
    local id=$1 rep=$2
    local -a common=(--url "$BASE_URL/small" --concurrency 16 --requests "$N_C16")
    local client
    for client in $CLIENTS; do
        case "$client" in
            curlew-openapi)
                if [ "$CURLEW_BUILD" != ok ]; then
                    skip_one "$id" "$client" "$rep" "bench-openapi-curlew did not build; see raw/$STAMP/build.log"
                else
                    run_one "$id" "$client" "$rep" pinned "" "$SWIFT_BIN/bench-openapi-curlew" --loops 1 "${common[@]}"
                fi ;;
            ahc-openapi)
                if [ "$SWIFT_BUILD" != ok ]; then
                    skip_one "$id" "$client" "$rep" "did not build; see raw/$STAMP/build.log"
                else
                    run_one "$id" "$client" "$rep" pinned "" "$SWIFT_BIN/bench-openapi-ahc" "${common[@]}"
                fi ;;
            *) ;;  # not a client of this scenario
        esac
    done
}

# run_scenario ID REP
run_scenario() {
    local id=$1 rep=$2
    case "$id" in
        s3-json-c16)
            [ "$rep" -le "$REPS" ] && run_json_scenario "$id" "$rep"
            return 0 ;;
        s10-openapi-c16)
            [ "$rep" -le "$REPS" ] && run_openapi_scenario "$id" "$rep"
            return 0 ;;
        s4-upload | s5-multipart | s6-gzip)
            [ "$rep" -le "$UPLOAD_REPS" ] && run_upload_scenario "$id" "$rep"
            return 0 ;;
    esac
    [ "$rep" -le "$REPS" ] || return 0
    local url concurrency requests pin loops http2="" cafile=""
    case "$id" in
        s1-c1) url=$BASE_URL/small; concurrency=1; requests=$N_C1; pin=pinned; loops=1 ;;
        s1-c16) url=$BASE_URL/small; concurrency=16; requests=$N_C16; pin=pinned; loops=1 ;;
        s1-c64) url=$BASE_URL/small; concurrency=64; requests=$N_C64; pin=pinned; loops=1 ;;
        s1-c64-unpinned) url=$BASE_URL/small; concurrency=64; requests=$N_C64; pin=unpinned; loops=2 ;;
        s2-h2-c64) url=$TLS_BASE_URL/small; concurrency=64; requests=$N_H2; pin=pinned; loops=1
            http2=--http2; cafile=$CA_FILE ;;
        s2-h2-hypercorn-c64) url=$HYPERCORN_URL/small; concurrency=64; requests=$N_H2_HYPERCORN; pin=pinned; loops=1
            http2=--http2; cafile=$CA_FILE ;;
        *) echo "run.sh: unknown scenario $id" >&2; exit 2 ;;
    esac
    local -a common=(--url "$url" --concurrency "$concurrency" --requests "$requests")
    if [ -n "$http2" ]; then common+=(--cafile "$cafile" --http2); fi

    local client
    for client in $CLIENTS; do
        case "$client" in
            raw-libcurl)
                run_one "$id" "$client" "$rep" "$pin" "" "$C_BIN_DIR/bench_curl" "${common[@]}" ;;
            curlew-engine | curlew-engine-socket | curlew-engine-plain | curlew-dispatch)
                local mode=executor driver=poll
                [ "$client" = curlew-engine-plain ] && mode=plain
                [ "$client" = curlew-dispatch ] && mode=dispatch
                [ "$client" = curlew-engine-socket ] && driver=socket-action
                if [ "$CURLEW_BUILD" != ok ]; then
                    skip_one "$id" "$client" "$rep" "bench-curlew did not build (CurlewEngine); see raw/$STAMP/build.log"
                else
                    run_one "$id" "$client" "$rep" "$pin" "" "$SWIFT_BIN/bench-curlew" --mode "$mode" --loops "$loops" \
                        --loop-driver "$driver" "${common[@]}"
                fi ;;
            curlew-at-*)
                local variant binary=""
                for variant in ${BENCH_CURLEW_VARIANTS:-}; do
                    [ "curlew-at-${variant%%=*}" = "$client" ] && binary=${variant#*=}
                done
                if [ ! -x "$binary" ]; then
                    skip_one "$id" "$client" "$rep" "no binary for $client in BENCH_CURLEW_VARIANTS"
                else
                    run_one "$id" "$client" "$rep" "$pin" "" "$binary" --mode executor --loops "$loops" "${common[@]}"
                fi ;;
            curlew-route)
                if [ "$CURLEW_BUILD" != ok ]; then
                    skip_one "$id" "$client" "$rep" "bench-curlew-route did not build; see raw/$STAMP/build.log"
                else
                    run_one "$id" "$client" "$rep" "$pin" "" "$SWIFT_BIN/bench-curlew-route" --layer route --loops "$loops" "${common[@]}"
                fi ;;
            async-http-client)
                if [ "$SWIFT_BUILD" != ok ]; then
                    skip_one "$id" "$client" "$rep" "did not build; see raw/$STAMP/build.log"
                else
                    run_one "$id" "$client" "$rep" "$pin" "" "$SWIFT_BIN/bench-ahc" "${common[@]}"
                fi ;;
            urlsession)
                if [ "$SWIFT_BUILD" != ok ]; then
                    skip_one "$id" "$client" "$rep" "did not build; see raw/$STAMP/build.log"
                elif [ -n "$http2" ]; then
                    skip_one "$id" "$client" "$rep" "URLSession on Linux cannot trust a private CA (no CA option; libcurl's compiled-in bundle)"
                else
                    run_one "$id" "$client" "$rep" "$pin" "" "$SWIFT_BIN/bench-urlsession" "${common[@]}"
                fi ;;
            wrk)
                if [ -z "$http2" ]; then
                    run_one "$id" "$client" "$rep" "$pin" "" wrk -t1 -c"$concurrency" -d"${WRK_SECONDS}s" "$url"
                fi ;;
            h2load)
                if [ -n "$http2" ]; then
                    run_one "$id" "$client" "$rep" "$pin" "" h2load -n"$requests" -c1 -m"$concurrency" -t1 "$url"
                fi ;;
            curlew-openapi | ahc-openapi) ;;  # S10 only
            *) echo "run.sh: unknown client $client" >&2; exit 2 ;;
        esac
    done
}

# ---------------------------------------------------------------------------------------------
# Upload inputs (S4-S6), made once, and a byte-for-byte check of what Curlew sends

UPLOAD_RANDOM="" UPLOAD_LINES="" UPLOAD_VERIFIED=""
case " $SCENARIOS " in
    *" s4-upload "* | *" s5-multipart "* | *" s6-gzip "*)
        # In tmpfs by default: this machine's page cache is trimmed while it runs (its RSS as a VM is reclaimed),
        # so an input on disk may be read partly from the disk, by whichever client comes first after a pause.
        UPLOAD_DIR=${BENCH_UPLOAD_DIR:-}
        if [ -z "$UPLOAD_DIR" ]; then
            if [ -d /dev/shm ] && [ -w /dev/shm ]; then
                UPLOAD_DIR=/dev/shm/curlew-bench-upload-inputs-$UPLOAD_BYTES
            else
                UPLOAD_DIR=$RESULTS_DIR/raw/upload-inputs-$UPLOAD_BYTES
            fi
        fi
        log "upload inputs ($UPLOAD_BYTES bytes each) in $UPLOAD_DIR"
        python3 "$BENCH_DIR/uploads/make_inputs.py" "$UPLOAD_DIR" "$UPLOAD_BYTES" >&2
        UPLOAD_RANDOM=$UPLOAD_DIR/random.bin
        UPLOAD_LINES=$UPLOAD_DIR/lines.jsonl
        # Memory, not disk: removed when the run ends unless BENCH_UPLOAD_KEEP=1 (or BENCH_UPLOAD_DIR was given).
        if [ "${BENCH_UPLOAD_KEEP:-0}" != "1" ] && [ -z "${BENCH_UPLOAD_DIR:-}" ]; then
            case "$UPLOAD_DIR" in
                /dev/shm/curlew-bench-upload-inputs-*)
                    trap 'cleanup; rm -rf "$UPLOAD_DIR"' EXIT ;;
            esac
        fi
        if [ "$UPLOAD_VERIFY" = "1" ] && [ "$CURLEW_BUILD" = ok ]; then
            # WebDAV PUT into nginx's folder, then compare: the raw body as is, the gzip body decompressed.
            log "verifying Curlew's upload bodies byte for byte (WebDAV PUT)"
            UPLOAD_VERIFIED="raw: failed; gzip: failed"
            raw_ok=failed gzip_ok=failed
            if "$SWIFT_BIN/bench-curlew-upload" --mode raw --method PUT --no-check --url "$BASE_URL/dav/verify/raw.bin" \
                --file "$UPLOAD_RANDOM" >"$RAW_DIR/verify.raw.out" 2>&1 \
                && cmp -s "$UPLOAD_RANDOM" "$NGINX_DIR/dav/verify/raw.bin"; then raw_ok=identical; fi
            rm -f "$NGINX_DIR/dav/verify/raw.bin"
            if "$SWIFT_BIN/bench-curlew-upload" --mode gzip --level 1 --method PUT --no-check \
                --url "$BASE_URL/dav/verify/lines.gz" --file "$UPLOAD_LINES" >"$RAW_DIR/verify.gzip.out" 2>&1 \
                && gzip -dc "$NGINX_DIR/dav/verify/lines.gz" | cmp -s "$UPLOAD_LINES" -; then gzip_ok=identical; fi
            rm -f "$NGINX_DIR/dav/verify/lines.gz"
            UPLOAD_VERIFIED="raw body: $raw_ok; gzip body decompressed: $gzip_ok"
            log "  $UPLOAD_VERIFIED"
        fi ;;
esac

LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
log "results: $RAW_DIR"
log "N: c1=$N_C1 c16=$N_C16 c64=$N_C64 h2=$N_H2, wrk ${WRK_SECONDS}s, reps=$REPS, upload reps=$UPLOAD_REPS"
ALL_REPS=$REPS
case " $SCENARIOS " in
    *" s4-upload "* | *" s5-multipart "* | *" s6-gzip "*) [ "$UPLOAD_REPS" -gt "$ALL_REPS" ] && ALL_REPS=$UPLOAD_REPS ;;
esac
for rep in $(seq 1 "$ALL_REPS"); do
    log "repetition $rep of $ALL_REPS"
    for scenario in $SCENARIOS; do
        run_scenario "$scenario" "$rep"
    done
done

# ---------------------------------------------------------------------------------------------
# Report

{
    echo "date=$(date -u '+%Y-%m-%d %H:%M:%S UTC')"
    echo "nproc=$(nproc)"
    echo "loadavg=before $LOAD_BEFORE, after $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "uname=$(uname -srm)"
    echo "cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
    echo "libcurl=$LIBCURL_VERSION${BENCH_LIBCURL_PREFIX:+ (from $BENCH_LIBCURL_PREFIX)}"
    echo "nginx=$(nginx -v 2>&1 | sed 's/^nginx version: //')"
    echo "swift=$(swift --version 2>/dev/null | head -1)"
    echo "wrk=$(wrk -v 2>&1 | head -1 | cut -d' ' -f1-2)"
    echo "h2load=$(h2load --version 2>&1 | head -1)"
    echo "command=${ENV_LINE}${COMMAND_LINE}"
    echo "reps=$REPS"
    echo "n_c1=$N_C1"
    echo "n_c16=$N_C16"
    echo "n_c64=$N_C64"
    echo "n_h2=$N_H2"
    echo "n_h2_hypercorn=$N_H2_HYPERCORN"
    echo "hypercorn=$( [ -n "$HYPERCORN_PID" ] && python3 -m pip show hypercorn 2>/dev/null | awk '/^Version/{print $2}')"
    echo "curlew_variants=${BENCH_CURLEW_VARIANTS:-}"
    echo "wrk_seconds=$WRK_SECONDS"
    echo "client_cpu=$CLIENT_CPU"
    echo "clk_tck=$CLK_TCK"
    echo "nginx_cpu=$NGINX_CPU"
    echo "curlew_build=$CURLEW_BUILD"
    echo "upload_reps=$UPLOAD_REPS"
    echo "upload_bytes=$UPLOAD_BYTES"
    echo "upload_verified=$UPLOAD_VERIFIED"
    echo "gzip=$(gzip --version | head -1)"
    echo "zlib=$(awk '/define ZLIB_VERSION /{gsub(/"/, "", $3); print $3}' /usr/include/zlib.h 2>/dev/null)"
    echo "raw_dir=results/raw/$STAMP"
} >"$RAW_DIR/meta.txt"

python3 "$BENCH_DIR/report.py" "$RAW_DIR" >"$RAW_DIR/report.md"
# Only a full run replaces the full results: a smoke run, or one limited to some scenarios (other than the upload
# set) or some clients, leaves results/latest.md alone (BENCH_LATEST=1 forces it). A run of only the upload
# scenarios (S4-S6, all clients) writes results/uploads-latest.md instead.
LATEST_NAME=latest.md
PARTIAL=""
if [ -z "$(printf '%s\n' $SCENARIOS | grep -vE '^(s4-upload|s5-multipart|s6-gzip)$' || true)" ]; then
    LATEST_NAME=uploads-latest.md
elif [ -n "$REQUESTED_SCENARIOS" ]; then
    PARTIAL="a scenario list"
fi
[ -n "${BENCH_CLIENTS:-}" ] && PARTIAL="a client list"
[ "$QUICK" = "1" ] && PARTIAL="a quick run"
if [ -z "$PARTIAL" ] || [ "${BENCH_LATEST:-0}" = "1" ]; then
    cp "$RAW_DIR/report.md" "$RESULTS_DIR/$LATEST_NAME"
    log "wrote $RESULTS_DIR/$LATEST_NAME"
else
    log "$PARTIAL: report in $RAW_DIR/report.md (results/$LATEST_NAME left as it was)"
fi
cat "$RAW_DIR/report.md"

# A full run (no scenario list) also measures the command: S7, S8 and S8-peers, report in results/command-latest.md.
if [ -z "$REQUESTED_SCENARIOS" ]; then
    "$BENCH_DIR/command/run_command.sh"
fi
