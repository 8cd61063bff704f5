#!/usr/bin/env bash
# Debian's nginx as the benchmark server, on 127.0.0.1 only, with a config generated here.
#
#   nginx.sh start DIR   generate config + CA + certificate in DIR, start nginx, write DIR/env
#   nginx.sh stop DIR    stop the nginx started in DIR (by its PID, nothing else)
#   nginx.sh run [DIR]   start, print the endpoints, wait until Ctrl-C / TERM, then stop
#
# DIR/env (shell syntax) holds NGINX_PID, HTTP_PORT, HTTPS_PORT, CA_FILE, BASE_URL, TLS_BASE_URL, STATUS_URL.
#
# Server: 1 worker pinned to CPU $NGINX_CPU (default 0), 8,192 connections, access_log off,
# keepalive_requests 10000000, keepalive_timeout 300s.
#   GET  /small   200, a 100-byte text/plain body
#   GET  /json    ~10 KB application/json, gzip on
#   POST|PUT /upload
#                 the whole body is read before the 200 is sent (proxy_pass to a local
#                 upstream: the proxy module reads the full client body before it connects,
#                 proxy_request_buffering on); the response body is the number of body bytes
#                 nginx read (for a chunked body, the decoded size), so clients can check it;
#                 also logged to DIR/upload.log ($request_length, $content_length, $request_time).
#                 client_max_body_size 0. Body buffers go to $NGINX_BODY_TEMP (default a
#                 folder in /dev/shm, so a 1 GiB upload does not measure the disk).
#   PUT  /dav/... WebDAV into DIR/dav (for uploads that are verified byte by byte)
#   GET  STATUS_URL  nginx stub_status on the internal port (connections accepted, requests served)
# The same locations on HTTPS_PORT with `ssl http2`, certificate signed by DIR/ca.pem.
#
# Environment: NGINX_HTTP_PORT (default 18080), NGINX_HTTPS_PORT (18443), NGINX_CPU (0),
# NGINX_BIN (/usr/sbin/nginx), NGINX_ACCESS_LOG (a path: log every request there as
# '$msec $request_time $status $server_port $request_uri $connection', for arrivals per second; default off).
set -euo pipefail

NGINX_BIN=${NGINX_BIN:-/usr/sbin/nginx}
NGINX_CPU=${NGINX_CPU:-0}

port_in_use() {
    ss -Hltn "sport = :$1" 2>/dev/null | grep -q .
}

pick_port() {
    local port=$1
    local tries=0
    while port_in_use "$port"; do
        port=$((port + 1))
        tries=$((tries + 1))
        if [ "$tries" -gt 50 ]; then
            echo "nginx.sh: no free port near $1" >&2
            exit 1
        fi
    done
    echo "$port"
}

make_certificates() {
    local dir=$1
    # A private CA and a server certificate for 127.0.0.1 / localhost.
    openssl req -x509 -newkey rsa:2048 -nodes -days 30 -sha256 \
        -keyout "$dir/ca.key" -out "$dir/ca.pem" -subj "/CN=Curlew bench CA" \
        -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
        >/dev/null 2>&1
    openssl req -newkey rsa:2048 -nodes -sha256 -keyout "$dir/server.key" -out "$dir/server.csr" \
        -subj "/CN=127.0.0.1" >/dev/null 2>&1
    cat >"$dir/server.ext" <<EOF
basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth
subjectAltName=IP:127.0.0.1,DNS:localhost
EOF
    openssl x509 -req -in "$dir/server.csr" -CA "$dir/ca.pem" -CAkey "$dir/ca.key" -CAcreateserial \
        -days 30 -sha256 -extfile "$dir/server.ext" -out "$dir/server.pem" >/dev/null 2>&1
}

make_content() {
    local dir=$1
    mkdir -p "$dir/www" "$dir/dav"
    # ~10 KB of JSON: 100 records.
    {
        printf '{"items":['
        for i in $(seq 1 115); do
            [ "$i" -gt 1 ] && printf ','
            printf '{"id":%d,"name":"item-%04d","price":%d.%02d,"tags":["alpha","beta","gamma"],"active":%s}' \
                "$i" "$i" $((i * 7 % 1000)) $((i % 100)) "$([ $((i % 2)) -eq 0 ] && echo true || echo false)"
        done
        printf '],"count":115}\n'
    } >"$dir/www/data.json"
}

write_config() {
    local dir=$1 http_port=$2 https_port=$3 upstream_port=$4 body_temp=$5
    # worker_cpu_affinity takes a bit mask: CPU n is a 1 followed by n zeros.
    local mask="1"
    for _ in $(seq 1 "$NGINX_CPU"); do mask="${mask}0"; done
    local user_line=""
    if [ "$(id -u)" -eq 0 ]; then
        user_line="user root;"
    fi
    # Debian's libnginx-mod-http-dav-ext (a bench dependency) adds PROPFIND, which rclone's WebDAV backend lists
    # folders with (S7); nginx-light alone answers it with 405.
    local dav_module_line="" dav_ext_line=""
    if [ -f /usr/lib/nginx/modules/ngx_http_dav_ext_module.so ]; then
        dav_module_line="load_module /usr/lib/nginx/modules/ngx_http_dav_ext_module.so;"
        dav_ext_line="dav_ext_methods PROPFIND OPTIONS;"
    fi
    local access_line="access_log off;"
    if [ -n "${NGINX_ACCESS_LOG:-}" ]; then access_line="access_log $NGINX_ACCESS_LOG timed buffer=256k flush=1s;"; fi
    # A 100-byte body for /small.
    local small
    small=$(printf 'curlew-bench-small-%081d' 0)

    local locations
    locations=$(cat <<EOF
        location = /small {
            default_type text/plain;
            return 200 "$small";
        }
        location = /json {
            try_files /data.json =404;
        }
        location = /upload {
            limit_except POST PUT { deny all; }
            client_max_body_size 0;
            client_body_buffer_size 1m;
            proxy_request_buffering on;
            proxy_pass_request_body off;
            proxy_set_header Content-Length "";
            proxy_set_header Transfer-Encoding "";
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            # Evaluated when the request goes upstream, i.e. after the whole body was read: the body's size
            # (for a chunked body, the decoded size nginx counted), echoed back by the upstream.
            proxy_set_header X-Body-Bytes \$content_length;
            proxy_pass http://upload_sink;
            access_log $dir/upload.log upload;
        }
        location /dav/ {
            root $dir;
            client_max_body_size 0;
            client_body_temp_path $body_temp/dav;
            dav_methods PUT DELETE MKCOL;
            $dav_ext_line
            create_full_put_path on;
        }
EOF
)

    cat >"$dir/nginx.conf" <<EOF
$user_line
$dav_module_line
worker_processes 1;
worker_cpu_affinity $mask;
# S8-scale holds 4,000 client connections, each also a descriptor of the worker's.
worker_rlimit_nofile 16384;
daemon off;
pid $dir/nginx.pid;
error_log $dir/error.log warn;

events {
    worker_connections 8192;
}

http {
    types {
        application/json json;
        text/plain txt;
    }
    default_type application/octet-stream;
    log_format timed '\$msec \$request_time \$status \$server_port \$request_uri \$connection';
    log_format upload '\$request_method \$status request_length=\$request_length content_length=\$content_length request_time=\$request_time';
    $access_line
    sendfile on;
    tcp_nodelay on;
    keepalive_requests 10000000;
    keepalive_timeout 300s;
    http2_max_concurrent_streams 256;
    gzip on;
    gzip_types application/json;
    gzip_min_length 256;
    client_body_temp_path $body_temp/body;
    proxy_temp_path $dir/tmp/proxy;
    fastcgi_temp_path $dir/tmp/fastcgi;
    uwsgi_temp_path $dir/tmp/uwsgi;
    scgi_temp_path $dir/tmp/scgi;
    root $dir/www;

    upstream upload_sink {
        server 127.0.0.1:$upstream_port;
        keepalive 16;
    }

    # The upstream behind /upload: answers once the front end has read the whole body.
    # Also /status (stub_status): connections accepted and requests served, for the harness.
    server {
        listen 127.0.0.1:$upstream_port;
        location = /status {
            stub_status;
        }
        location = /upload {
            default_type text/plain;
            return 200 "\$http_x_body_bytes\n";
        }
        location / {
            default_type text/plain;
            return 200 "ok\n";
        }
    }

    server {
        listen 127.0.0.1:$http_port reuseport backlog=4096;
$locations
    }

    server {
        listen 127.0.0.1:$https_port ssl http2 backlog=4096;
        ssl_certificate $dir/server.pem;
        ssl_certificate_key $dir/server.key;
        ssl_protocols TLSv1.2 TLSv1.3;
        ssl_session_cache shared:SSL:1m;
$locations
    }
}
EOF
}

start() {
    local dir=$1
    mkdir -p "$dir" "$dir/tmp"
    dir=$(cd "$dir" && pwd)
    if [ -f "$dir/env" ]; then
        # shellcheck disable=SC1091
        . "$dir/env"
        if kill -0 "$NGINX_PID" 2>/dev/null; then
            echo "nginx.sh: nginx already running in $dir (PID $NGINX_PID)" >&2
            exit 1
        fi
    fi
    local http_port https_port upstream_port body_temp
    http_port=$(pick_port "${NGINX_HTTP_PORT:-18080}")
    https_port=$(pick_port "${NGINX_HTTPS_PORT:-18443}")
    upstream_port=$(pick_port $((https_port + 100)))
    body_temp=${NGINX_BODY_TEMP:-}
    if [ -z "$body_temp" ]; then
        if [ -d /dev/shm ] && [ -w /dev/shm ]; then
            body_temp=$(mktemp -d /dev/shm/curlew-nginx-body.XXXXXX)
        else
            body_temp=$dir/tmp
        fi
    fi
    mkdir -p "$body_temp"

    make_certificates "$dir"
    make_content "$dir"
    write_config "$dir" "$http_port" "$https_port" "$upstream_port" "$body_temp"
    "$NGINX_BIN" -t -q -p "$dir" -c "$dir/nginx.conf"

    # Master and worker start on CPU $NGINX_CPU; the worker is also pinned by worker_cpu_affinity.
    taskset -c "$NGINX_CPU" "$NGINX_BIN" -p "$dir" -c "$dir/nginx.conf" </dev/null >>"$dir/stdout.log" 2>&1 &
    local pid=$!

    # Ready when both ports accept connections.
    local waited=0
    until curl -s -o /dev/null "http://127.0.0.1:$http_port/small" \
        && curl -s -o /dev/null --cacert "$dir/ca.pem" "https://127.0.0.1:$https_port/small"; do
        if ! kill -0 "$pid" 2>/dev/null || [ "$waited" -gt 50 ]; then
            echo "nginx.sh: nginx did not start; $dir/error.log:" >&2
            cat "$dir/error.log" >&2 || true
            kill "$pid" 2>/dev/null || true
            exit 1
        fi
        sleep 0.1
        waited=$((waited + 1))
    done

    cat >"$dir/env" <<EOF
NGINX_PID=$pid
NGINX_DIR=$dir
NGINX_BODY_TEMP=$body_temp
HTTP_PORT=$http_port
HTTPS_PORT=$https_port
CA_FILE=$dir/ca.pem
BASE_URL=http://127.0.0.1:$http_port
TLS_BASE_URL=https://127.0.0.1:$https_port
STATUS_URL=http://127.0.0.1:$upstream_port/status
EOF
    echo "nginx PID $pid (worker on CPU $NGINX_CPU)"
    echo "  http:  http://127.0.0.1:$http_port/small  /json  /upload  /dav/"
    echo "  https: https://127.0.0.1:$https_port/small (ssl http2)"
    echo "  CA:    $dir/ca.pem"
}

stop() {
    local dir=$1
    [ -f "$dir/env" ] || return 0
    local NGINX_PID="" NGINX_BODY_TEMP=""
    # shellcheck disable=SC1091
    . "$dir/env"
    if [ -n "$NGINX_PID" ] && kill -0 "$NGINX_PID" 2>/dev/null; then
        # SIGQUIT: graceful shutdown of the master, which stops its worker.
        kill -QUIT "$NGINX_PID" 2>/dev/null || true
        local waited=0
        while kill -0 "$NGINX_PID" 2>/dev/null && [ "$waited" -lt 50 ]; do
            sleep 0.1
            waited=$((waited + 1))
        done
        if kill -0 "$NGINX_PID" 2>/dev/null; then
            kill -TERM "$NGINX_PID" 2>/dev/null || true
        fi
    fi
    case "$NGINX_BODY_TEMP" in
        /dev/shm/curlew-nginx-body.*) rm -rf "$NGINX_BODY_TEMP" ;;
    esac
    rm -f "$dir/env"
}

case "${1:-}" in
    start)
        [ $# -eq 2 ] || { echo "usage: $0 start DIR" >&2; exit 2; }
        start "$2"
        ;;
    stop)
        [ $# -eq 2 ] || { echo "usage: $0 stop DIR" >&2; exit 2; }
        stop "$2"
        ;;
    run)
        dir=${2:-$(mktemp -d /tmp/curlew-nginx.XXXXXX)}
        trap 'stop "$dir"' EXIT
        trap 'exit 0' INT TERM
        start "$dir"
        echo "Ctrl-C to stop."
        # shellcheck disable=SC1091
        . "$dir/env"
        while kill -0 "$NGINX_PID" 2>/dev/null; do sleep 1; done
        ;;
    *)
        echo "usage: $0 start DIR | stop DIR | run [DIR]" >&2
        exit 2
        ;;
esac
