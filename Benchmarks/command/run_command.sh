#!/usr/bin/env bash
# S7 and S8 of Benchmarks/README.md: the `curlew` command side by side with what people use instead.
#
#   S7  curlew upload: BENCH_S7_FILES files of 4 KiB at concurrency 16 PUT to nginx WebDAV, every file compared
#       byte for byte on nginx's disk after each run, vs `xargs -P16` running one `curl -T` per file, and vs
#       `rclone copy` with its WebDAV backend (--transfers 16) when rclone is installed and nginx answers PROPFIND.
#       Figure: files/s over the whole process (start-up and directory walk included).
#   S8  curlew bench vs the raw libcurl C client (raw-libcurl/bench_curl.c) vs wrk, GET /small, 64 connections,
#       client pinned to one core, nginx to the other. Figure: requests/s.
#   S8-scale  S8 at BENCH_SCALE_CONNECTIONS (64 1000 4000) connections: curlew bench with each loop driver
#       (--loop-driver poll, socket-action) vs raw libcurl's curl_multi_poll loop (bench_curl.c) vs raw libcurl's
#       socket-action loop (bench_curl_socket.c), with one multi handle and with one per 64 transfers (--parts 0),
#       vs wrk. Figures: requests/s and CPU per request (issue 11: the
#       cost per request should not grow with the connections open). Not in the default scenarios:
#       BENCH_COMMAND_SCENARIOS=s8scale.
#   S8-peers  S8 beside the load testers people already use, at BENCH_PEERS_CONNECTIONS (64 1000) connections:
#       curlew bench vs raw libcurl (bench_curl.c) vs wrk, h2load --h1, ab -k, hey and k6 (shared-iterations,
#       response bodies discarded), the same N requests each (wrk: a duration), alternating, every client on the same
#       core. Figures: requests/s, CPU per request, and non-2xx/failed requests as each tool reports them. Alone:
#       BENCH_COMMAND_SCENARIOS=s8peers (make bench-peers), report in results/peers-latest.md.
#   S8-checks  what each of Curlew's per-request checks costs: S8's curlew bench run as it is, and with one check
#       switched off at a time by a preloaded shim (command/without_checks.c: the connection check's peek, the whole
#       pre-request callback, the header callback, the idle-age option; BENCH_CHECKS lists them), and with all of
#       them off, beside raw libcurl, alternating. Measurement only: Curlew itself cannot turn a check off. Alone:
#       BENCH_COMMAND_SCENARIOS=s8checks (make bench-checks), report in results/checks-latest.md.
#
#   Benchmarks/command/run_command.sh      or   BENCH_SCENARIOS="S7 S8" Benchmarks/run.sh
#
# Environment (all optional): BENCH_QUICK=1 (1 repetition, small counts), BENCH_REPS (3), BENCH_S7_FILES (10000;
# quick 1000), BENCH_N_C64 (120000; quick 10000), BENCH_N_SCALE (150000; quick 12000), BENCH_SCALE_CONNECTIONS,
# BENCH_SCALE_CLIENTS (S8-scale's clients, default all), BENCH_WRK_SECONDS (3; quick 1), BENCH_CLIENT_CPU (1), NGINX_CPU (0),
# BENCH_LIBCURL_PREFIX (build every client against that libcurl instead of the system's: Benchmarks/libcurl.sh),
# BENCH_COMMAND_SCENARIOS (default "s7 s8 s8peers"), BENCH_PEERS_CONNECTIONS (64 1000), BENCH_PEERS_CLIENTS (all), BENCH_CHECKS (S8-checks' checks, default "peek prereq headers maxage"), BENCH_CURLEW_BIN (a curlew binary to use instead of building one
# with the flags `make demo` uses: `swift build -c release --product curlew --static-swift-stdlib -Xswiftc -use-ld=lld`),
# BENCH_TIMEOUT (seconds per run, 300).
#
# Output: Benchmarks/results/command-latest.md (full runs of both scenarios only, unless BENCH_LATEST=1), raw files under
# Benchmarks/results/raw/<stamp>-command/ (git-ignored).
set -euo pipefail
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY no_proxy NO_PROXY

COMMAND_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BENCH_DIR=$(dirname "$COMMAND_DIR")
ROOT_DIR=$(dirname "$BENCH_DIR")
QUICK=${BENCH_QUICK:-0}
if [ "$QUICK" = "1" ]; then
    REPS=${BENCH_REPS:-1}; S7_FILES=${BENCH_S7_FILES:-1000}; N_C64=${BENCH_N_C64:-10000}; WRK_SECONDS=${BENCH_WRK_SECONDS:-1}
    N_SCALE=${BENCH_N_SCALE:-12000}
else
    REPS=${BENCH_REPS:-3}; S7_FILES=${BENCH_S7_FILES:-10000}; N_C64=${BENCH_N_C64:-120000}; WRK_SECONDS=${BENCH_WRK_SECONDS:-3}
    N_SCALE=${BENCH_N_SCALE:-150000}
fi
SCALE_CONNECTIONS=${BENCH_SCALE_CONNECTIONS:-"64 1000 4000"}
PEERS_CONNECTIONS=${BENCH_PEERS_CONNECTIONS:-"64 1000"}
PEERS_CLIENTS=${BENCH_PEERS_CLIENTS:-"raw-libcurl curlew-bench wrk h2load ab hey k6"}
CHECKS=${BENCH_CHECKS:-"peek prereq headers maxage"}
for check in $CHECKS; do
    case "$check" in
        peek | prereq | headers | maxage) ;;
        *) echo "run_command.sh: BENCH_CHECKS: no check named $check (peek, prereq, headers, maxage)" >&2; exit 2 ;;
    esac
done
SCALE_CLIENTS=${BENCH_SCALE_CLIENTS:-"raw-libcurl raw-libcurl-socket raw-libcurl-socket-parts curlew-bench-poll curlew-bench-socket-action wrk"}
CLIENT_CPU=${BENCH_CLIENT_CPU:-1}
export NGINX_CPU=${NGINX_CPU:-0}
RUN_TIMEOUT=${BENCH_TIMEOUT:-300}
SCENARIOS=${BENCH_COMMAND_SCENARIOS:-"s7 s8 s8peers"}

STAMP=$(date -u +%Y%m%dT%H%M%SZ)
RAW_DIR=$BENCH_DIR/results/raw/$STAMP-command
mkdir -p "$RAW_DIR"
RESULTS=$RAW_DIR/results.tsv
log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

for tool in /usr/bin/time taskset nginx curl curl-config cc wrk xargs python3; do
    command -v "$tool" >/dev/null || { echo "run_command.sh: $tool is missing (make bench installs it)" >&2; exit 1; }
done
if [[ " $SCENARIOS " == *" s8peers "* ]]; then
    for client in $PEERS_CLIENTS; do
        case "$client" in raw-libcurl | curlew-bench) continue ;; esac
        command -v "$client" >/dev/null || {
            echo "run_command.sh: S8-peers needs $client (make bench-peers installs it)" >&2; exit 1; }
    done
fi

# Build
# shellcheck source=../libcurl.sh
. "$BENCH_DIR/libcurl.sh"
C_BIN=$C_BIN_DIR/bench_curl
mkdir -p "$C_BIN_DIR"
cc -O2 -Wall -o "$C_BIN" "$BENCH_DIR/raw-libcurl/bench_curl.c" $LIBCURL_CC_FLAGS
C_SOCKET_BIN=$C_BIN_DIR/bench_curl_socket
cc -O2 -Wall -o "$C_SOCKET_BIN" "$BENCH_DIR/raw-libcurl/bench_curl_socket.c" $LIBCURL_CC_FLAGS
WITHOUT_CHECKS_LIB=$C_BIN_DIR/without_checks.so
cc -O2 -Wall -shared -fPIC -o "$WITHOUT_CHECKS_LIB" "$COMMAND_DIR/without_checks.c" $LIBCURL_CC_FLAGS -ldl
if [[ " $SCENARIOS " == *" s8scale "* ]] || [[ " $SCENARIOS " == *" s8peers "* ]]; then
    # Each client connection is a descriptor of the client's (and of nginx's, which raises its own limit).
    largest=$(printf '%s\n' $SCALE_CONNECTIONS $PEERS_CONNECTIONS | sort -n | tail -1)
    if [ "$(ulimit -n)" != unlimited ] && [ "$(ulimit -n)" -lt $((largest + 256)) ]; then
        ulimit -n $((largest + 256)) 2>/dev/null || {
            echo "run_command.sh: S8-scale at $largest connections needs ulimit -n >= $((largest + 256)), have $(ulimit -n)" >&2; exit 1; }
    fi
fi
if [ -n "${BENCH_CURLEW_BIN:-}" ]; then
    CURLEW=$BENCH_CURLEW_BIN
else
    log "building curlew (release)"
    # The binary `make demo` builds: the Swift runtime linked in statically (see the Makefile).
    swift build -c release --product curlew --static-swift-stdlib -Xswiftc -use-ld=lld --package-path "$ROOT_DIR" \
        "${SWIFT_ROOT_FLAGS[@]}" >"$RAW_DIR/build.log" 2>&1
    CURLEW=$(swift build -c release --package-path "$ROOT_DIR" "${SWIFT_ROOT_FLAGS[@]}" --show-bin-path)/curlew
fi
[ -x "$CURLEW" ] || { echo "run_command.sh: no curlew binary at $CURLEW" >&2; exit 1; }

# Server
NGINX_DIR=$RAW_DIR/nginx
mkdir -p "$NGINX_DIR"
"$BENCH_DIR/nginx/nginx.sh" start "$NGINX_DIR" >&2
trap '"$BENCH_DIR/nginx/nginx.sh" stop "$NGINX_DIR" || true' EXIT
trap 'exit 130' INT TERM
# shellcheck disable=SC1091
. "$NGINX_DIR/env"
DAV_DIR=$NGINX_DIR/dav

# S7 input: 4 KiB of random bytes per file, 100 files per folder.
S7_SOURCE=$RAW_DIR/s7-source
if [[ " $SCENARIOS " == *" s7 "* ]]; then
    python3 - "$S7_SOURCE" "$S7_FILES" <<'PY'
import os, sys
root, count = sys.argv[1], int(sys.argv[2])
for index in range(count):
    folder = os.path.join(root, f"dir{index // 100:03d}")
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, f"file{index:05d}.bin"), "wb") as handle:
        handle.write(os.urandom(4096))
PY
fi

printf 'scenario\tclient\trep\texit\twall\tuser\tsys\tcount\tseconds\tverified\tnote\n' >"$RESULTS"

# timed NAME -- command...: runs pinned under /usr/bin/time, output in $RAW_DIR/NAME.{out,err,time}
timed() {
    local name=$1; shift
    local rc=0
    timeout --kill-after=5 "$RUN_TIMEOUT" taskset -c "$CLIENT_CPU" /usr/bin/time -f '%e %U %S' -o "$RAW_DIR/$name.time" "$@" \
        >"$RAW_DIR/$name.out" 2>"$RAW_DIR/$name.err" </dev/null || rc=$?
    echo "$rc"
}

record() {  # scenario client rep rc count seconds verified note
    local name="$1.$2.$3" wall user sys
    read -r wall user sys < <(tail -1 "$RAW_DIR/$name.time" 2>/dev/null || echo "0 0 0")
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "$wall" "$user" "$sys" "$5" "$6" "$7" "$8" >>"$RESULTS"
    log "  $1 $2 rep $3: exit $4, $5 in $6 s, verified=$7 $8"
}

run_s8() {
    local rep=$1 url=$BASE_URL/small rc json
    rc=$(timed "s8.raw-libcurl.$rep" "$C_BIN" --url "$url" --concurrency 64 --requests "$N_C64")
    json=$(grep '^{' "$RAW_DIR/s8.raw-libcurl.$rep.out" || echo '{}')
    record s8 raw-libcurl "$rep" "$rc" "$(jq_field "$json" requests)" "$(jq_field "$json" seconds)" "$(jq_field "$json" failures)" ""

    rc=$(timed "s8.curlew-bench.$rep" "$CURLEW" bench "$url" -c 64 --requests "$N_C64" --json --no-progress)
    json=$(grep '^{' "$RAW_DIR/s8.curlew-bench.$rep.out" || echo '{}')
    record s8 curlew-bench "$rep" "$rc" "$(jq_field "$json" requests)" "$(jq_field "$json" durationSeconds)" "$(jq_field "$json" failed)" ""

    rc=$(timed "s8.wrk.$rep" wrk -t1 -c64 -d"${WRK_SECONDS}s" "$url")
    local out=$RAW_DIR/s8.wrk.$rep.out requests seconds
    requests=$(sed -nE 's/^ *([0-9]+) requests in ([0-9.]+)s.*/\1/p' "$out")
    seconds=$(sed -nE 's/^ *([0-9]+) requests in ([0-9.]+)s.*/\2/p' "$out")
    local bad
    bad=$(sed -nE 's/.*Non-2xx or 3xx responses: ([0-9]+).*/\1/p' "$out")
    record s8 wrk "$rep" "$rc" "${requests:-0}" "${seconds:-0}" "${bad:-0}" "duration-based"
}

# One S8-scale point: every client at C connections, N requests (wrk: WRK_SECONDS), as scenario s8scale-cC.
run_s8scale() {
    local rep=$1 url=$BASE_URL/small connections rc json scenario
    for connections in $SCALE_CONNECTIONS; do
        scenario=s8scale-c$connections
        for client in raw-libcurl raw-libcurl-socket raw-libcurl-socket-parts; do
            [[ " $SCALE_CLIENTS " == *" $client "* ]] || continue
            local binary=$C_BIN parts=()
            [ "$client" = raw-libcurl ] || binary=$C_SOCKET_BIN
            # One multi handle per 64 transfers in flight, as Curlew's socket-action driver spreads them.
            [ "$client" = raw-libcurl-socket-parts ] && parts=(--parts 0)
            rc=$(timed "$scenario.$client.$rep" "$binary" --url "$url" --concurrency "$connections" --requests "$N_SCALE" \
                "${parts[@]}")
            json=$(grep '^{' "$RAW_DIR/$scenario.$client.$rep.out" || echo '{}')
            record "$scenario" "$client" "$rep" "$rc" "$(jq_field "$json" requests)" "$(jq_field "$json" seconds)" \
                "$(jq_field "$json" failures)" ""
        done
        for driver in poll socket-action; do
            local client=curlew-bench-$driver
            [[ " $SCALE_CLIENTS " == *" $client "* ]] || continue
            rc=$(timed "$scenario.$client.$rep" "$CURLEW" bench "$url" -c "$connections" --requests "$N_SCALE" \
                --loop-driver "$driver" --json --no-progress)
            json=$(grep '^{' "$RAW_DIR/$scenario.$client.$rep.out" || echo '{}')
            record "$scenario" "$client" "$rep" "$rc" "$(jq_field "$json" requests)" "$(jq_field "$json" durationSeconds)" \
                "$(jq_field "$json" failed)" ""
        done
        [[ " $SCALE_CLIENTS " == *" wrk "* ]] || continue
        rc=$(timed "$scenario.wrk.$rep" wrk -t1 -c"$connections" -d"${WRK_SECONDS}s" "$url")
        local out=$RAW_DIR/$scenario.wrk.$rep.out requests seconds bad
        requests=$(sed -nE 's/^ *([0-9]+) requests in ([0-9.]+)s.*/\1/p' "$out")
        seconds=$(sed -nE 's/^ *([0-9]+) requests in ([0-9.]+)s.*/\2/p' "$out")
        bad=$(sed -nE 's/.*Non-2xx or 3xx responses: ([0-9]+).*/\1/p' "$out")
        record "$scenario" wrk "$rep" "$rc" "${requests:-0}" "${seconds:-0}" "${bad:-0}" "duration-based"
    done
}

# sum: the total of the numbers (or sums such as 1+2) on standard input, one per line; 0 for none.
sum() {
    local total=0 value
    while read -r value; do [ -n "$value" ] && total=$((total + value)); done
    echo "$total"
}

# S8-checks: raw libcurl, curlew bench, curlew bench without each check of $CHECKS, and without all of them.
run_s8checks() {
    local rep=$1 url=$BASE_URL/small rc json variant without client
    rc=$(timed "s8checks.raw-libcurl.$rep" "$C_BIN" --url "$url" --concurrency 64 --requests "$N_C64")
    json=$(grep '^{' "$RAW_DIR/s8checks.raw-libcurl.$rep.out" || echo '{}')
    record s8checks raw-libcurl "$rep" "$rc" "$(jq_field "$json" requests)" "$(jq_field "$json" seconds)" \
        "$(jq_field "$json" failures)" ""
    for variant in none $CHECKS all; do
        case "$variant" in
            none) without=""; client=curlew-bench ;;
            all) without=$CHECKS; client=curlew-bench-without-all ;;
            *) without=$variant; client=curlew-bench-without-$variant ;;
        esac
        rc=$(WITHOUT_CHECKS="$without" LD_PRELOAD="$WITHOUT_CHECKS_LIB" timed "s8checks.$client.$rep" \
            "$CURLEW" bench "$url" -c 64 --requests "$N_C64" --json --no-progress)
        json=$(grep '^{' "$RAW_DIR/s8checks.$client.$rep.out" || echo '{}')
        record s8checks "$client" "$rep" "$rc" "$(jq_field "$json" requests)" "$(jq_field "$json" durationSeconds)" \
            "$(jq_field "$json" failed)" "without: ${without:-nothing}"
    done
}

# One S8-peers point per connection count, as scenario s8peers-cC: every client of PEERS_CLIENTS in turn, N requests
# (N_C64 at 64 connections, N_SCALE above; wrk runs WRK_SECONDS). Each tool's own count of requests that did not get a
# 2xx goes in the `verified` column (0 when all succeeded).
run_s8peers() {
    local rep=$1 url=$BASE_URL/small connections requests client rc out json count seconds bad scenario
    for connections in $PEERS_CONNECTIONS; do
        scenario=s8peers-c$connections
        requests=$N_SCALE
        [ "$connections" -le 64 ] && requests=$N_C64
        for client in $PEERS_CLIENTS; do
            out=$RAW_DIR/$scenario.$client.$rep.out
            count="" seconds="" bad=""
            case "$client" in
                raw-libcurl)
                    rc=$(timed "$scenario.$client.$rep" "$C_BIN" --url "$url" --concurrency "$connections" --requests "$requests")
                    json=$(grep '^{' "$out" || echo '{}')
                    count=$(jq_field "$json" requests) seconds=$(jq_field "$json" seconds) bad=$(jq_field "$json" failures) ;;
                curlew-bench)
                    rc=$(timed "$scenario.$client.$rep" "$CURLEW" bench "$url" -c "$connections" --requests "$requests" \
                        --json --no-progress)
                    json=$(grep '^{' "$out" || echo '{}')
                    count=$(jq_field "$json" requests) seconds=$(jq_field "$json" durationSeconds) bad=$(jq_field "$json" failed) ;;
                wrk)
                    rc=$(timed "$scenario.$client.$rep" wrk -t1 -c"$connections" -d"${WRK_SECONDS}s" "$url")
                    count=$(sed -nE 's/^ *([0-9]+) requests in ([0-9.]+)s.*/\1/p' "$out")
                    seconds=$(sed -nE 's/^ *([0-9]+) requests in ([0-9.]+)s.*/\2/p' "$out")
                    bad=$(sed -nE 's/.*Non-2xx or 3xx responses: ([0-9]+).*/\1/p' "$out")
                    bad=$((${bad:-0} + $(sed -nE 's/.*Socket errors: connect ([0-9]+), read ([0-9]+), write ([0-9]+), timeout ([0-9]+).*/\1+\2+\3+\4/p' "$out" | sum))) ;;
                h2load)
                    rc=$(timed "$scenario.$client.$rep" h2load --h1 -t 1 -c "$connections" -n "$requests" "$url")
                    # "finished in 1.23s, 81234.00 req/s, …" and "requests: N total, N started, N done, N succeeded, F failed, E errored, T timeout"
                    # h2load prints milliseconds for short runs ("finished in 30.75ms") and seconds for longer ones.
                    seconds=$(sed -nE 's/^finished in ([0-9.]+)(m?s),.*/\1 \2/p' "$out" \
                        | awk '{ printf "%.6f", $2 == "ms" ? $1 / 1000 : $1 }')
                    count=$(sed -nE 's/^requests: ([0-9]+) total.*/\1/p' "$out")
                    bad=$(sed -nE 's/^requests: .* ([0-9]+) failed, ([0-9]+) errored, ([0-9]+) timeout.*/\1+\2+\3/p' "$out" | sum)
                    local non2xx
                    non2xx=$(sed -nE 's/^status codes: [0-9]+ 2xx, ([0-9]+) 3xx, ([0-9]+) 4xx, ([0-9]+) 5xx.*/\1+\2+\3/p' "$out" | sum)
                    bad=$((${bad:-0} + ${non2xx:-0})) ;;
                ab)
                    rc=$(timed "$scenario.$client.$rep" ab -k -q -c "$connections" -n "$requests" "$url")
                    seconds=$(sed -nE 's/^Time taken for tests: +([0-9.]+) seconds.*/\1/p' "$out")
                    count=$(sed -nE 's/^Complete requests: +([0-9]+).*/\1/p' "$out")
                    bad=$(sed -nE 's/^(Failed requests|Non-2xx responses): +([0-9]+).*/\2/p' "$out" | sum) ;;
                hey)
                    rc=$(timed "$scenario.$client.$rep" hey -n "$requests" -c "$connections" "$url")
                    seconds=$(sed -nE 's/^ *Total:[[:space:]]+([0-9.]+) secs.*/\1/p' "$out")
                    count=$(sed -nE 's/^ *\[[0-9]+\][[:space:]]+([0-9]+) responses.*/\1/p' "$out" | sum)
                    bad=$(sed -nE 's/^ *\[([^2][0-9]*)\][[:space:]]+([0-9]+) responses.*/\2/p' "$out" | sum)
                    # hey lists transport errors under "Error distribution:" as "[N] message".
                    local errors
                    errors=$(sed -n '/^Error distribution:/,$p' "$out" | sed -nE 's/^ *\[([0-9]+)\].*/\1/p' | sum)
                    bad=$((${bad:-0} + ${errors:-0})) count=$((${count:-0} + ${errors:-0})) ;;
                k6)
                    local script=$RAW_DIR/s8peers.k6.js summary=$RAW_DIR/$scenario.$client.$rep.summary.json
                    cat >"$script" <<'JS'
import http from "k6/http";
export const options = {
  discardResponseBodies: true,
  scenarios: { s8: { executor: "shared-iterations", vus: Number(__ENV.VUS), iterations: Number(__ENV.ITERATIONS), maxDuration: "10m" } },
};
export default function () { http.get(__ENV.URL); }
JS
                    rc=$(timed "$scenario.$client.$rep" env K6_NO_USAGE_REPORT=true k6 run --quiet --no-color \
                        --summary-export "$summary" -e URL="$url" -e VUS="$connections" -e ITERATIONS="$requests" "$script")
                    read -r count seconds bad < <(python3 - "$summary" <<'PY' || echo "0 0 0"
import json, sys
metrics = json.load(open(sys.argv[1]))["metrics"]
requests = metrics["http_reqs"]
# http_req_failed is a rate: "passes" counts the requests that failed (non-2xx/3xx or a transport error).
print(requests["count"], requests["count"] / requests["rate"], metrics["http_req_failed"].get("passes", 0))
PY
                    ) ;;
                *) echo "run_command.sh: unknown S8-peers client $client" >&2; exit 2 ;;
            esac
            record "$scenario" "$client" "$rep" "$rc" "${count:-0}" "${seconds:-0}" "${bad:-0}" ""
        done
    done
}

# verify TARGET: every source file present in DAV_DIR/TARGET with the same bytes, and nothing else there.
verify() {
    local target=$DAV_DIR/$1 stored
    stored=$(find "$target" -type f 2>/dev/null | wc -l)
    if [ "$stored" -ne "$S7_FILES" ]; then echo "no:$stored files stored"; return; fi
    if diff -r -q "$S7_SOURCE" "$target" >"$RAW_DIR/$1.diff" 2>&1; then echo "yes"; else echo "no:$(wc -l <"$RAW_DIR/$1.diff") differences"; fi
}

run_s7() {
    local rep=$1 target rc verdict json
    target=s7-curlew-$rep
    rc=$(timed "s7.curlew-upload.$rep" "$CURLEW" upload "$S7_SOURCE" "$BASE_URL/dav/$target/" --concurrency 16 --json --no-progress)
    verdict=$(verify "$target")
    json=$(grep '^{' "$RAW_DIR/s7.curlew-upload.$rep.out" || echo '{}')
    record s7 curlew-upload "$rep" "$rc" "$(jq_field "$json" uploaded)" "" "$verdict" "failed=$(jq_field "$json" failed)"
    rm -rf "${DAV_DIR:?}/$target"

    target=s7-xargs-$rep
    rc=$(timed "s7.xargs-curl.$rep" bash -c 'cd "$1" && find . -type f -printf "%P\n" | xargs -P16 -I{} curl -sS -f -o /dev/null -T {} "$2/{}"' \
        _ "$S7_SOURCE" "$BASE_URL/dav/$target")
    verdict=$(verify "$target")
    record s7 xargs-curl "$rep" "$rc" "$S7_FILES" "" "$verdict" ""
    rm -rf "${DAV_DIR:?}/$target"

    # rclone's WebDAV backend lists folders with PROPFIND, which nginx answers only with the dav-ext module
    # (not in Debian's nginx-light): without it the row says so instead of timing a run that cannot work.
    command -v rclone >/dev/null || return 0
    target=s7-rclone-$rep
    if [ "$(curl -s -o /dev/null -w '%{http_code}' -X PROPFIND -H 'Depth: 0' "$BASE_URL/dav/")" = "405" ]; then
        record s7 rclone-webdav "$rep" "-" "$S7_FILES" "" "no:nginx has no PROPFIND (dav-ext module)" ""
        return 0
    fi
    rc=$(timed "s7.rclone-webdav.$rep" rclone copy "$S7_SOURCE" ":webdav:$target" --webdav-url "$BASE_URL/dav/" --webdav-vendor other \
        --transfers 16 --checkers 16 --config /dev/null)
    verdict=$(verify "$target")
    record s7 rclone-webdav "$rep" "$rc" "$S7_FILES" "" "$verdict" ""
    rm -rf "${DAV_DIR:?}/$target"
}

jq_field() {  # JSON FIELD -> value (empty if missing)
    python3 -c 'import json,sys; v=json.loads(sys.argv[1]).get(sys.argv[2], ""); print(v if not isinstance(v, (dict, list)) else len(v))' "$1" "$2" 2>/dev/null || true
}

log "results: $RAW_DIR; curlew: $CURLEW; reps=$REPS s7_files=$S7_FILES n_c64=$N_C64"
for rep in $(seq 1 "$REPS"); do
    log "repetition $rep of $REPS"
    for scenario in $SCENARIOS; do
        case "$scenario" in
            s7) run_s7 "$rep" ;;
            s8) run_s8 "$rep" ;;
            s8scale) run_s8scale "$rep" ;;
            s8peers) run_s8peers "$rep" ;;
            s8checks) run_s8checks "$rep" ;;
            *) echo "run_command.sh: unknown scenario $scenario" >&2; exit 2 ;;
        esac
    done
done

{
    echo "date=$(date -u '+%Y-%m-%d %H:%M:%S UTC')"
    echo "machine=$(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(uname -srm)"
    echo "loadavg=$(cut -d' ' -f1-3 /proc/loadavg)"
    echo "libcurl=$LIBCURL_VERSION${BENCH_LIBCURL_PREFIX:+ (from $BENCH_LIBCURL_PREFIX)}"
    echo "nginx=$(nginx -v 2>&1 | sed 's/^nginx version: //')"
    echo "wrk=$(wrk -v 2>&1 | head -1 | cut -d' ' -f1-2)"
    echo "reps=$REPS"
    echo "s7_files=$S7_FILES"
    echo "n_c64=$N_C64"
    echo "n_scale=$N_SCALE"
    echo "scale_connections=$SCALE_CONNECTIONS"
    echo "peers_connections=$PEERS_CONNECTIONS"
    echo "checks=$CHECKS"
    for peer in h2load ab hey k6; do
        command -v "$peer" >/dev/null || continue
        case "$peer" in
            h2load) echo "h2load=$(h2load --version 2>&1 | head -1)" ;;
            ab) echo "ab=$(ab -V 2>&1 | head -1 | sed 's/^This is //; s/ <.*//')" ;;
            hey) echo "hey=hey $(dpkg-query -W -f '${Version}' hey 2>/dev/null) (Debian)" ;;
            k6) echo "k6=$(k6 version 2>&1 | head -1)" ;;
        esac
    done
    echo "wrk_seconds=$WRK_SECONDS"
    echo "client_cpu=$CLIENT_CPU"
    echo "nginx_cpu=$NGINX_CPU"
    echo "raw_dir=results/raw/$STAMP-command"
} >"$RAW_DIR/meta.txt"
python3 "$COMMAND_DIR/report_command.py" "$RAW_DIR" >"$RAW_DIR/report.md"
# Only a full run (S7 and S8, not quick) replaces the committed report, unless BENCH_LATEST=1 says so; a full run of
# S8-peers alone (make bench-peers) writes its own.
if { [ "$QUICK" != "1" ] && [[ " $SCENARIOS " == *" s7 "* ]] && [[ " $SCENARIOS " == *" s8 "* ]]; } || [ "${BENCH_LATEST:-0}" = "1" ]; then
    cp "$RAW_DIR/report.md" "$BENCH_DIR/results/command-latest.md"
    log "wrote $BENCH_DIR/results/command-latest.md"
elif [ "$QUICK" != "1" ] && [ "$(echo $SCENARIOS)" = s8peers ]; then
    cp "$RAW_DIR/report.md" "$BENCH_DIR/results/peers-latest.md"
    log "wrote $BENCH_DIR/results/peers-latest.md"
elif [ "$QUICK" != "1" ] && [ "$(echo $SCENARIOS)" = s8checks ]; then
    cp "$RAW_DIR/report.md" "$BENCH_DIR/results/checks-latest.md"
    log "wrote $BENCH_DIR/results/checks-latest.md"
fi
cat "$RAW_DIR/report.md"
