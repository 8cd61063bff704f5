#!/usr/bin/env bash
# Issue 13's performance proof: what `curlew bench`'s reporting features cost at scale, and whether --stages sends
# the planned load.
#
#   F1  GET /small, HTTP/1.1, -c BENCH_FEATURES_C (1000) -n BENCH_FEATURES_N (150000), client pinned to one core, nginx
#       on the other, three variants interleaved per repetition (plain, reporting, targets):
#         plain      curlew bench URL -c C -n N --json --no-progress
#         reporting  the same plus --hdr-log F --report F.html --threshold 'p99<1s' --threshold 'errors<1%'
#         targets    --targets FILE (4 JSON lines: /small with four query strings, so each is the same work as plain)
#       Figures: requests/s and client CPU (user + sys from /usr/bin/time) per request.
#   F2  an S2-style open-model run against nginx over TLS + HTTP/2:
#         curlew bench URL --http2 --stages '5s:2000rps,20s:2000rps,5s:0rps' --report F.html --hdr-log F
#       nginx logs every request (NGINX_ACCESS_LOG); arrivals per second (request start = $msec - $request_time,
#       counted from the interval log's StartTime) are compared with the plan (linear ramps); the report is rendered
#       with headless chromium when it is installed.
#
# Environment: BENCH_CURLEW_BIN (default: the release curlew in the root package's .build, built as `make demo`
# builds it if missing), BENCH_REPS (3), BENCH_FEATURES_C (1000), BENCH_FEATURES_N (150000), BENCH_FEATURES_SKIP
# ("f1" or "f2" to leave one out), BENCH_CLIENT_CPU (1), NGINX_CPU (0), BENCH_TIMEOUT (300 s per run).
# Output: Benchmarks/results/raw/<stamp>-features/ (git-ignored): results.tsv, arrivals.tsv, report.md, every run's files.
set -euo pipefail
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY no_proxy NO_PROXY

COMMAND_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BENCH_DIR=$(dirname "$COMMAND_DIR")
ROOT_DIR=$(dirname "$BENCH_DIR")
REPS=${BENCH_REPS:-3}
C=${BENCH_FEATURES_C:-1000}
N=${BENCH_FEATURES_N:-150000}
SKIP=${BENCH_FEATURES_SKIP:-}
CLIENT_CPU=${BENCH_CLIENT_CPU:-1}
export NGINX_CPU=${NGINX_CPU:-0}
RUN_TIMEOUT=${BENCH_TIMEOUT:-300}
STAGES=${BENCH_FEATURES_STAGES:-"5s:2000rps,20s:2000rps,5s:0rps"}

STAMP=$(date -u +%Y%m%dT%H%M%SZ)
RAW_DIR=$BENCH_DIR/results/raw/$STAMP-features
mkdir -p "$RAW_DIR"
log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

if [ -n "${BENCH_CURLEW_BIN:-}" ]; then
    CURLEW=$BENCH_CURLEW_BIN
else
    CURLEW=$(swift build -c release --package-path "$ROOT_DIR" --show-bin-path)/curlew
    if [ ! -x "$CURLEW" ]; then
        log "building curlew (release, as make demo)"
        swift build -c release --product curlew --static-swift-stdlib -Xswiftc -use-ld=lld --package-path "$ROOT_DIR" \
            >"$RAW_DIR/build.log" 2>&1
    fi
fi
[ -x "$CURLEW" ] || { echo "run_bench_features.sh: no curlew binary at $CURLEW" >&2; exit 1; }
# Each connection is a descriptor of the client's.
if [ "$(ulimit -n)" != unlimited ] && [ "$(ulimit -n)" -lt $((C + 256)) ]; then
    ulimit -n $((C + 256)) 2>/dev/null || { echo "run_bench_features.sh: needs ulimit -n >= $((C + 256))" >&2; exit 1; }
fi

NGINX_DIR=""
stop_nginx() { if [ -n "$NGINX_DIR" ]; then "$BENCH_DIR/nginx/nginx.sh" stop "$NGINX_DIR" || true; fi; }
trap stop_nginx EXIT
trap 'exit 130' INT TERM

machine_busy_ticks() { awk '/^cpu /{print $2 + $3 + $4 + $7 + $8 + $9; exit}' /proc/stat; }
CLK_TCK=$(getconf CLK_TCK)
server_ticks() {
    local pid total=0
    for pid in $NGINX_PID $(pgrep -P "$NGINX_PID" | tr '\n' ' '); do
        total=$((total + $(awk '{print $14 + $15}' "/proc/$pid/stat" 2>/dev/null || echo 0)))
    done
    echo "$total"
}

jq_field() {  # FILE FIELD -> value of the last JSON object line's field
    python3 - "$1" "$2" <<'PY' 2>/dev/null || true
import json, sys
obj = None
for line in open(sys.argv[1], errors="replace"):
    line = line.strip()
    if line.startswith("{"):
        try: obj = json.loads(line)
        except json.JSONDecodeError: pass
v = (obj or {}).get(sys.argv[2], "")
print(v if not isinstance(v, (dict, list)) else json.dumps(v, separators=(",", ":")))
PY
}

# timed NAME -- command...: pinned, under /usr/bin/time; appends one row to results.tsv.
printf 'scenario\tvariant\trep\texit\twall\tuser\tsys\trequests\tfailed\tseconds\trps\tcpu_us_per_req\tload\tother_cpu_pct\textra\n' \
    >"$RAW_DIR/results.tsv"
timed() {
    local scenario=$1 variant=$2 rep=$3; shift 4
    local name="$scenario.$variant.$rep" rc=0 load busy0 busy1 srv0 srv1
    load=$(cut -d' ' -f1 /proc/loadavg)
    busy0=$(machine_busy_ticks); srv0=$(server_ticks)
    timeout --kill-after=5 "$RUN_TIMEOUT" taskset -c "$CLIENT_CPU" /usr/bin/time -f '%e %U %S' -o "$RAW_DIR/$name.time" "$@" \
        >"$RAW_DIR/$name.out" 2>"$RAW_DIR/$name.err" </dev/null || rc=$?
    busy1=$(machine_busy_ticks); srv1=$(server_ticks)
    local wall user sys requests failed seconds extra
    read -r wall user sys < <(tail -1 "$RAW_DIR/$name.time" 2>/dev/null || echo "0 0 0")
    requests=$(jq_field "$RAW_DIR/$name.out" requests)
    failed=$(jq_field "$RAW_DIR/$name.out" failed)
    seconds=$(jq_field "$RAW_DIR/$name.out" durationSeconds)
    extra=$(jq_field "$RAW_DIR/$name.out" targets)
    python3 - "$scenario" "$variant" "$rep" "$rc" "$wall" "$user" "$sys" "${requests:-0}" "${failed:-}" "${seconds:-0}" \
        "$load" "$((busy1 - busy0))" "$((srv1 - srv0))" "$CLK_TCK" "$extra" >>"$RAW_DIR/results.tsv" <<'PY'
import sys
(scenario, variant, rep, rc, wall, user, sys_, requests, failed, seconds, load, busy, srv, tck, extra) = sys.argv[1:]
wall, user, sys_, requests, seconds = float(wall), float(user), float(sys_), int(requests or 0), float(seconds or 0)
rps = requests / seconds if seconds else 0
cpu = (user + sys_) / requests * 1e6 if requests else 0
other = max(int(busy) / int(tck) - user - sys_ - int(srv) / int(tck), 0) / wall * 100 if wall else 0
print("\t".join(map(str, [scenario, variant, rep, rc, wall, user, sys_, requests, failed, f"{seconds:.3f}", f"{rps:.0f}",
                          f"{cpu:.2f}", load, f"{other:.0f}", extra])))
PY
    log "  $name: exit $rc, $(tail -1 "$RAW_DIR/results.tsv" | cut -f8-14 | tr '\t' ' ')"
}

start_nginx() {  # DIR
    NGINX_DIR=$1
    mkdir -p "$NGINX_DIR"
    "$BENCH_DIR/nginx/nginx.sh" start "$NGINX_DIR" >&2
    # shellcheck disable=SC1091
    . "$NGINX_DIR/env"
}

log "results: $RAW_DIR; curlew: $CURLEW; c=$C n=$N reps=$REPS; ulimit -n $(ulimit -n)"

# ---------------------------------------------------------------------------------------------
# F1: plain vs reporting vs targets at c = C
if [[ " $SKIP " != *" f1 "* ]]; then
    start_nginx "$RAW_DIR/nginx-f1"
    TARGETS=$RAW_DIR/targets.jsonl
    for i in 1 2 3 4; do printf '{"method": "GET", "url": "%s/small?t=%d"}\n' "$BASE_URL" "$i"; done >"$TARGETS"
    # Warm-up: nginx's first thousand connections, and the page cache of the binary.
    taskset -c "$CLIENT_CPU" "$CURLEW" bench "$BASE_URL/small" -c "$C" -n 20000 --no-progress >/dev/null 2>&1 || true
    for rep in $(seq 1 "$REPS"); do
        log "F1 repetition $rep of $REPS"
        timed f1 plain "$rep" -- "$CURLEW" bench "$BASE_URL/small" -c "$C" -n "$N" --json --no-progress
        timed f1 reporting "$rep" -- "$CURLEW" bench "$BASE_URL/small" -c "$C" -n "$N" --json --no-progress \
            --hdr-log "$RAW_DIR/f1.reporting.$rep.hlog" --report "$RAW_DIR/f1.reporting.$rep.html" \
            --threshold 'p99<1s' --threshold 'errors<1%'
        timed f1 targets "$rep" -- "$CURLEW" bench --targets "$TARGETS" -c "$C" -n "$N" --json --no-progress
    done
    stop_nginx
    NGINX_DIR=""
fi

# ---------------------------------------------------------------------------------------------
# F2: stages over TLS + HTTP/2, arrivals per second from nginx's access log
if [[ " $SKIP " != *" f2 "* ]]; then
    NGINX_ACCESS_LOG=$RAW_DIR/f2-access.log start_nginx "$RAW_DIR/nginx-f2"
    # The warm-up is logged too; the analysis keeps only the TLS port's /small?f2 requests.
    timed f2 stages 1 -- "$CURLEW" bench "$TLS_BASE_URL/small?f2" --http2 --cacert "$CA_FILE" --stages "$STAGES" \
        --report "$RAW_DIR/f2.html" --hdr-log "$RAW_DIR/f2.hlog" --json --no-progress
    sleep 2  # nginx flushes its access log buffer every second
    stop_nginx
    NGINX_DIR=""
    python3 - "$RAW_DIR/f2-access.log" "$RAW_DIR/f2.hlog" "$STAGES" "$HTTPS_PORT" >"$RAW_DIR/arrivals.tsv" <<'PY'
import re, sys
log_path, hlog_path, stages, port = sys.argv[1:]
start = None
for line in open(hlog_path):
    m = re.match(r"#\[StartTime: ([\d.]+)", line)
    if m:
        start = float(m.group(1))
arrivals = []
for line in open(log_path):
    parts = line.split()
    if len(parts) >= 5 and parts[3] == port and parts[4].startswith("/small?f2"):
        arrivals.append(float(parts[0]) - float(parts[1]))
arrivals.sort()
if start is None:
    start = arrivals[0]
# The plan: each stage ramps linearly from the previous level to its own.
plan = []
level = 0.0
for stage in stages.split(","):
    duration, rate = stage.split(":")
    seconds = float(re.match(r"([\d.]+)", duration).group(1)) * {"s": 1, "m": 60}[duration.rstrip("0123456789.")[-1:] or "s"]
    target = float(rate.rstrip("rps"))
    plan.append((seconds, level, target))
    level = target
expected = []
for seconds, begin, end in plan:
    for i in range(int(seconds)):
        expected.append(begin + (end - begin) * (i + 0.5) / seconds)
counts = [0] * (len(expected) + 2)
for t in arrivals:
    index = int(t - start)
    if 0 <= index < len(counts):
        counts[index] += 1
print("second\tplanned\tarrived\tdeviation_pct")
for i, planned in enumerate(expected):
    deviation = (counts[i] - planned) / planned * 100 if planned else 0
    print(f"{i}\t{planned:.0f}\t{counts[i]}\t{deviation:+.1f}")
print(f"# total planned {sum(expected):.0f}, arrived {len(arrivals)}, start {start:.3f}, first arrival +{arrivals[0] - start:.3f} s")
PY
    cat "$RAW_DIR/arrivals.tsv" >&2
    if command -v chromium >/dev/null; then
        timeout 120 chromium --headless --no-sandbox --disable-gpu --window-size=1400,2400 \
            --screenshot="$RAW_DIR/f2-report.png" "file://$RAW_DIR/f2.html" >"$RAW_DIR/chromium.log" 2>&1 || true
        log "report screenshot: $RAW_DIR/f2-report.png ($(stat -c %s "$RAW_DIR/f2-report.png" 2>/dev/null || echo none) bytes)"
    fi
fi

{
    echo "date=$(date -u '+%Y-%m-%d %H:%M:%S UTC')"
    echo "loadavg=$(cut -d' ' -f1-3 /proc/loadavg)"
    echo "curlew=$CURLEW ($("$CURLEW" --version 2>/dev/null | head -1))"
    echo "c=$C n=$N reps=$REPS stages=$STAGES client_cpu=$CLIENT_CPU nginx_cpu=$NGINX_CPU ulimit_n=$(ulimit -n)"
} >"$RAW_DIR/meta.txt"
python3 - "$RAW_DIR/results.tsv" >"$RAW_DIR/report.md" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
by = {}
for row in rows:
    by.setdefault((row["scenario"], row["variant"]), []).append(row)
base = by.get(("f1", "plain"))
def med(rs, key): return statistics.median(float(r[key]) for r in rs)
print("| scenario | variant | req/s (median) | min–max | µs CPU/req (median) | req/s ÷ plain | CPU/req ÷ plain | failed | exit | 1-min load | other CPU % |")
print("|---|---|---:|---:|---:|---:|---:|---:|---|---|---|")
for (scenario, variant), rs in by.items():
    rps, cpu = med(rs, "rps"), med(rs, "cpu_us_per_req")
    ratio = f"{rps / med(base, 'rps'):.3f}" if base and scenario == "f1" else "–"
    cratio = f"{cpu / med(base, 'cpu_us_per_req'):.3f}" if base and scenario == "f1" else "–"
    lo, hi = min(float(r["rps"]) for r in rs), max(float(r["rps"]) for r in rs)
    print(f"| {scenario} | {variant} | {rps:,.0f} | {lo:,.0f}–{hi:,.0f} | {cpu:.1f} | {ratio} | {cratio} | "
          f"{','.join(r['failed'] for r in rs)} | {','.join(r['exit'] for r in rs)} | {','.join(r['load'] for r in rs)} | "
          f"{','.join(r['other_cpu_pct'] for r in rs)} |")
PY
cat "$RAW_DIR/report.md"
