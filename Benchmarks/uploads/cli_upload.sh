#!/usr/bin/env bash
# curl's command line (and gzip) uploading one file, for S4-S6; prints the same JSON line as the other
# upload clients and exits non-zero unless nginx.sh's /upload read every byte.
#
#   cli_upload.sh VARIANT URL FILE
#
#   curl-T            curl -T FILE URL                        PUT, streamed from the file, Content-Length
#   curl-data-binary  curl --data-binary @FILE URL            POST; curl reads the whole file into memory first
#                     (curl 7.88 refuses a 1 GiB file: "out of memory"; not in run.sh's default clients)
#   curl-F            curl -F a=1 -F b=2 -F file=@FILE URL    multipart/form-data, streamed, Content-Length
#   gzip-curl         gzip -1 -c FILE | curl --data-binary @- -H 'Content-Encoding: gzip' URL
#                     (curl reads all of stdin into memory, then sends it with Content-Length)
#   gzip-curl-T       gzip -1 -c FILE | curl -T - -X POST -H 'Content-Encoding: gzip' URL   (streamed, chunked)
#
# seconds: curl's own %{time_total} for the single-curl variants (the transfer, as the other clients time
# theirs, without process start-up); the wall time of the whole pipeline for the gzip variants (with
# --data-binary @- curl's timer starts only after gzip has finished). wall_seconds is always the wall time.
set -uo pipefail

variant=$1 url=$2 file=$3
out=$(mktemp)
trap 'rm -f "$out"' EXIT
bytes=$(stat -c %s "$file")
format='%{http_code} %{size_upload} %{time_total}'
common=(-sS --http1.1 -o "$out" -w "$format")

start=$(date +%s%N)
case "$variant" in
    curl-T) result=$(curl "${common[@]}" -T "$file" "$url") ;;
    curl-data-binary) result=$(curl "${common[@]}" -H 'Content-Type: application/octet-stream' --data-binary "@$file" "$url") ;;
    curl-F) result=$(curl "${common[@]}" -F a=1 -F b=2 -F "file=@$file;type=application/octet-stream" "$url") ;;
    gzip-curl) result=$(gzip -1 -c "$file" | curl "${common[@]}" -H 'Content-Encoding: gzip' \
        -H 'Content-Type: application/x-ndjson' --data-binary @- "$url") ;;
    gzip-curl-T) result=$(gzip -1 -c "$file" | curl "${common[@]}" -X POST -H 'Content-Encoding: gzip' \
        -H 'Content-Type: application/x-ndjson' -T - "$url") ;;
    *) echo "cli_upload.sh: unknown variant $variant" >&2; exit 2 ;;
esac
rc=$?
end=$(date +%s%N)

read -r code sent total <<<"$result"
code=${code:-0} sent=${sent:-0} total=${total:-0}
server=$(tr -dc '0-9' <"$out")
server=${server:--1}
wall=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.6f", (b - a) / 1e9 }')
case "$variant" in
    gzip-curl | gzip-curl-T) seconds=$wall mode=gzip ;;
    curl-F) seconds=$total mode=multipart ;;
    *) seconds=$total mode=raw ;;
esac

problem=""
if [ "$rc" -ne 0 ] || [ "${code:-0}" != 200 ]; then
    problem="exit $rc, status ${code:-?}"
else
    case "$variant" in
        curl-T | curl-data-binary) [ "$server" = "$bytes" ] || problem="the server read $server bytes, the file has $bytes" ;;
        curl-F | gzip-curl) { [ "$server" = "$sent" ] && [ "$server" -gt 0 ]; } || problem="the server read $server bytes, $sent were sent" ;;
        gzip-curl-T)
            # chunked: curl counts the chunk framing too, the server the decoded body
            awk -v s="$server" -v u="$sent" 'BEGIN { exit !(s > 0 && u >= s && u <= s + s / 100 + 64) }' \
                || problem="the server read $server bytes, $sent were sent" ;;
    esac
fi
[ -z "$problem" ] || echo "$variant: upload failed: $problem" >&2
printf '{"client": "%s", "mode": "%s", "requests": 1, "failures": %d, "seconds": %s, "wall_seconds": %s, "bytes": %s, "sent_bytes": %s, "server_bytes": %s}\n' \
    "$variant" "$mode" "$([ -z "$problem" ] && echo 0 || echo 1)" "$seconds" "$wall" "$bytes" "${sent%.*}" "$server"
[ -z "$problem" ]
