#!/usr/bin/env bash
# S8-accuracy of Benchmarks/README.md: the latency each load tester reports against a server whose latency
# distribution is known, beside the analytic answer.
#
#   open model   curlew-loopback-server's /freeze/F?every_ms=P (SwiftNIO, pinned to NGINX_CPU) stalls for the first F ms
#                of every P ms and answers at once otherwise. At a constant arrival rate the q-quantile of latency is
#                F - (1 - q) * P where positive (p99 = F - P/100, max = F). Clients at BENCH_ACCURACY_RATE requests/s
#                for BENCH_ACCURACY_SECONDS:
#                  curlew bench URL --rate R -d D -c C     (latency from each request's scheduled time)
#                  k6 constant-arrival-rate, rate R, preAllocatedVUs C (latency from the send)
#                  hey -c C -q R/C -z D                     (a rate per worker: a closed model that waits out stalls)
#                and, closed models at 4 connections (coordinated omission: each stall is one sample per connection):
#                  curlew bench URL -c 4 -d D,  hey -c 4 -z D,  wrk -t1 -c4 -d D --latency
#   fixed delay  /delay/50 at 16 connections, closed model, every tool: p50 = p99 = 50 ms and 320 requests/s.
#
#   Benchmarks/command/run_accuracy.sh     or   make bench-accuracy
#
# Environment (all optional): BENCH_ACCURACY_RATE (1000), BENCH_ACCURACY_SECONDS (15, a multiple of P/1000),
# BENCH_ACCURACY_FREEZE_MS (300), BENCH_ACCURACY_PERIOD_MS (1500), BENCH_ACCURACY_CONNECTIONS (512: more than
# R * F / 1000 requests wait out each freeze), BENCH_CLIENT_CPU (1), NGINX_CPU (0, the server's core), BENCH_CURLEW_BIN,
# BENCH_SERVER_BIN (a curlew-loopback-server binary).
#
# Output: Benchmarks/results/accuracy-latest.md, raw files under Benchmarks/results/raw/<stamp>-accuracy/ (git-ignored).
set -euo pipefail
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY no_proxy NO_PROXY

COMMAND_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BENCH_DIR=$(dirname "$COMMAND_DIR")
ROOT_DIR=$(dirname "$BENCH_DIR")
RATE=${BENCH_ACCURACY_RATE:-1000}
SECONDS_=${BENCH_ACCURACY_SECONDS:-15}
FREEZE_MS=${BENCH_ACCURACY_FREEZE_MS:-300}
PERIOD_MS=${BENCH_ACCURACY_PERIOD_MS:-1500}
CONNECTIONS=${BENCH_ACCURACY_CONNECTIONS:-512}
CLIENT_CPU=${BENCH_CLIENT_CPU:-1}
SERVER_CPU=${NGINX_CPU:-0}

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
for tool in taskset python3 k6 hey wrk; do
    command -v "$tool" >/dev/null || { echo "run_accuracy.sh: $tool is missing (make bench-accuracy installs it)" >&2; exit 1; }
done
if [ "$(ulimit -n)" != unlimited ] && [ "$(ulimit -n)" -lt $((CONNECTIONS + 256)) ]; then
    ulimit -n $((CONNECTIONS + 256))
fi

# The binaries `make demo` builds: release, the Swift runtime linked in statically.
build_flags=(-c release --static-swift-stdlib -Xswiftc -use-ld=lld --package-path "$ROOT_DIR")
CURLEW=${BENCH_CURLEW_BIN:-}
SERVER=${BENCH_SERVER_BIN:-}
if [ -z "$CURLEW" ] || [ -z "$SERVER" ]; then
    log "building curlew and curlew-loopback-server (release)"
    swift build "${build_flags[@]}" --product curlew >&2
    swift build "${build_flags[@]}" --product curlew-loopback-server >&2
    bin=$(swift build "${build_flags[@]}" --show-bin-path)
    CURLEW=${CURLEW:-$bin/curlew} SERVER=${SERVER:-$bin/curlew-loopback-server}
fi

STAMP=$(date -u +%Y%m%dT%H%M%SZ)
RAW_DIR=$BENCH_DIR/results/raw/$STAMP-accuracy
mkdir -p "$RAW_DIR"
taskset -c "$SERVER_CPU" "$SERVER" >"$RAW_DIR/server.out" 2>"$RAW_DIR/server.err" &
SERVER_PID=$!
trap 'kill "$SERVER_PID" 2>/dev/null || true' EXIT
trap 'exit 130' INT TERM
for _ in $(seq 1 100); do grep -q '^listening ' "$RAW_DIR/server.out" 2>/dev/null && break; sleep 0.1; done
BASE_URL=$(sed -n 's/^listening //p' "$RAW_DIR/server.out")
[ -n "$BASE_URL" ] || { echo "run_accuracy.sh: the server did not start; see $RAW_DIR" >&2; exit 1; }
FREEZE_URL="$BASE_URL/freeze/$FREEZE_MS?every_ms=$PERIOD_MS"
DELAY_URL="$BASE_URL/delay/50"
log "server $BASE_URL (PID $SERVER_PID); results in $RAW_DIR"

pinned() {  # NAME command...: the client pinned, output in RAW_DIR/NAME.{out,err}
    local name=$1; shift
    timeout --kill-after=5 $((SECONDS_ * 4 + 60)) taskset -c "$CLIENT_CPU" "$@" >"$RAW_DIR/$name.out" 2>"$RAW_DIR/$name.err" \
        </dev/null || echo "exit $?" >"$RAW_DIR/$name.failed"
}

cat >"$RAW_DIR/k6.js" <<'JS'
import http from "k6/http";
const open = __ENV.MODEL === "open";
export const options = {
  discardResponseBodies: true,
  summaryTrendStats: ["min", "med", "p(90)", "p(99)", "p(99.9)", "max", "count"],
  scenarios: {
    load: open
      ? { executor: "constant-arrival-rate", rate: Number(__ENV.RATE), timeUnit: "1s", duration: __ENV.DURATION,
          preAllocatedVUs: Number(__ENV.VUS), maxVUs: Number(__ENV.VUS) }
      : { executor: "constant-vus", vus: Number(__ENV.VUS), duration: __ENV.DURATION },
  },
};
export default function () { http.get(__ENV.URL); }
JS
k6_run() {  # NAME MODEL URL VUS DURATION
    pinned "$1" env K6_NO_USAGE_REPORT=true k6 run --quiet --no-color --summary-export "$RAW_DIR/$1.json" \
        -e MODEL="$2" -e URL="$3" -e VUS="$4" -e DURATION="$5" -e RATE="$RATE" "$RAW_DIR/k6.js"
}

log "open model: $RATE requests/s for $SECONDS_ s against $FREEZE_URL"
pinned open.curlew-bench "$CURLEW" bench "$FREEZE_URL" --rate "$RATE" -d "${SECONDS_}s" -c "$CONNECTIONS" --json --no-progress
k6_run open.k6 open "$FREEZE_URL" "$CONNECTIONS" "${SECONDS_}s"
per_worker=$(python3 -c "print($RATE / $CONNECTIONS)")
pinned open.hey hey -c "$CONNECTIONS" -q "$per_worker" -z "${SECONDS_}s" "$FREEZE_URL"
log "closed model, 4 connections, against the same server"
pinned closed.curlew-bench "$CURLEW" bench "$FREEZE_URL" -c 4 -d "${SECONDS_}s" --json --no-progress
pinned closed.hey hey -c 4 -z "${SECONDS_}s" "$FREEZE_URL"
pinned closed.wrk wrk -t1 -c4 -d"${SECONDS_}s" --latency "$FREEZE_URL"
k6_run closed.k6 closed "$FREEZE_URL" 4 "${SECONDS_}s"
log "fixed delay: $DELAY_URL at 16 connections"
pinned delay.curlew-bench "$CURLEW" bench "$DELAY_URL" -c 16 -d 10s --json --no-progress
pinned delay.hey hey -c 16 -z 10s "$DELAY_URL"
pinned delay.wrk wrk -t1 -c16 -d10s --latency "$DELAY_URL"
k6_run delay.k6 closed "$DELAY_URL" 16 10s

{
    echo "date=$(date -u '+%Y-%m-%d %H:%M:%S UTC')"
    echo "machine=$(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(uname -srm)"
    echo "loadavg=$(cut -d' ' -f1-3 /proc/loadavg)"
    echo "rate=$RATE"
    echo "seconds=$SECONDS_"
    echo "freeze_ms=$FREEZE_MS"
    echo "period_ms=$PERIOD_MS"
    echo "connections=$CONNECTIONS"
    echo "client_cpu=$CLIENT_CPU"
    echo "server_cpu=$SERVER_CPU"
    echo "versions=$(k6 version 2>&1 | head -1 | cut -d' ' -f1-2); hey $(dpkg-query -W -f '${Version}' hey 2>/dev/null); $(wrk -v 2>&1 | head -1 | cut -d' ' -f1-2)"
    echo "raw_dir=results/raw/$STAMP-accuracy"
} >"$RAW_DIR/meta.txt"
python3 "$COMMAND_DIR/report_accuracy.py" "$RAW_DIR" >"$RAW_DIR/report.md"
cp "$RAW_DIR/report.md" "$BENCH_DIR/results/accuracy-latest.md"
log "wrote $BENCH_DIR/results/accuracy-latest.md"
cat "$RAW_DIR/report.md"
