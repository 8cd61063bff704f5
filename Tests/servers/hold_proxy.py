#!/usr/bin/env python3
"""A reverse proxy that makes "the server stored it, the client never heard" happen on purpose.

Usage: hold_proxy.py {fd0} UPSTREAM_PORT MARKER_FILE HOLD_REGEX [--idempotency] [--hold-every-match]
                     [--only-targets FILE] [--pass-first N]

HTTP/1.1 on the listening descriptor the supervisor bound on 127.0.0.1. Every request is read whole (Content-Length
or chunked; an `Expect: 100-continue` is answered here) and sent to 127.0.0.1:UPSTREAM_PORT with its headers as they
came (Host included, so SigV4 signatures still verify). Then:

  * the first time "METHOD TARGET" matches HOLD_REGEX and the upstream answered 2xx, the line "stored METHOD TARGET" is
    appended to MARKER_FILE and the response is never sent: the connection is held until the client goes away
    (or 10 minutes pass). A test waits for the line and kills the client at exactly that moment.
  * otherwise the upstream's response is passed on (with a Content-Length body).

--hold-every-match holds every request that matches HOLD_REGEX and is answered 2xx, not only the first (each logged
"stored METHOD TARGET"): a client with several connections then cannot go on past the held writes on another one.

--only-targets FILE narrows the matches to requests whose path, percent-decoded and without its query, is a line of FILE
(UTF-8): one shard's files among several shards that share a destination.

--pass-first N passes the first N matches the upstream answered 2xx on, and holds from the next one.

Once the file MARKER_FILE.hold exists, its text is the HOLD_REGEX from then on (a test that kills a client several
times holds other writes each round, on the one proxy address its journal is bound to).

Once the file MARKER_FILE.release exists, nothing more is held (held connections stay held): a re-run that follows the
killed client goes through.

--idempotency makes the proxy the store's Idempotency-Key layer (draft-ietf-httpapi-idempotency-key-header): the
first 2xx response to a key is kept, and a request that repeats the key is answered with it, never forwarded, and
logged as "replayed KEY" in MARKER_FILE.
"""

import http.client
import os
import re
import socket
import socketserver
import sys
import threading
import urllib.parse

HOLD_LIMIT_SECONDS = 600
HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "expect", "proxy-connection", "te", "upgrade"}


def read_line(stream):
    line = stream.readline(65537)
    if not line:
        raise EOFError
    return line


def read_request(stream, connection):
    request_line = read_line(stream).decode("latin-1").rstrip("\r\n")
    while not request_line:
        request_line = read_line(stream).decode("latin-1").rstrip("\r\n")
    method, target, _ = request_line.split(" ", 2)
    headers = []
    while True:
        line = read_line(stream).decode("latin-1").rstrip("\r\n")
        if not line:
            break
        name, value = line.split(":", 1)
        headers.append((name.strip(), value.strip()))
    lower = {name.lower(): value for name, value in headers}
    if lower.get("expect", "").lower() == "100-continue":
        connection.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
    if "chunked" in lower.get("transfer-encoding", "").lower():
        body = bytearray()
        while True:
            size = int(read_line(stream).split(b";")[0].strip(), 16)
            if size == 0:
                while read_line(stream).strip():
                    pass
                break
            body += stream.read(size)
            read_line(stream)
    else:
        body = stream.read(int(lower.get("content-length", "0")))
    return method, target, headers, bytes(body)


class Proxy(socketserver.ThreadingMixIn, socketserver.TCPServer):
    daemon_threads = True
    allow_reuse_address = True


def make_handler(upstream_port, marker_path, hold, idempotency, every_match, only_targets, pass_first):
    marker_lock = threading.Lock()
    replies = {}
    held = threading.Event()
    passed = [0]
    release_path = marker_path + ".release"
    hold_path = marker_path + ".hold"
    current_hold = [None, hold]

    def hold_pattern():
        """HOLD_REGEX, or the text of MARKER_FILE.hold once it exists (read again whenever it changes)."""
        try:
            with open(hold_path, encoding="utf-8") as replacement:
                text = replacement.read()
        except FileNotFoundError:
            return hold
        if current_hold[0] != text:
            current_hold[0], current_hold[1] = text, re.compile(text)
        return current_hold[1]

    def matches(method, target):
        if not hold_pattern().search(f"{method} {target}"):
            return False
        if only_targets is None:
            return True
        return urllib.parse.unquote(target.split("?", 1)[0]) in only_targets

    def should_hold(status, method, target):
        """Called under marker_lock for each answered request."""
        if not 200 <= status < 300 or not matches(method, target) or os.path.exists(release_path):
            return False
        if passed[0] < pass_first:
            passed[0] += 1
            return False
        return every_match or not held.is_set()

    def mark(line):
        with marker_lock, open(marker_path, "a") as marker:
            marker.write(line + "\n")

    class Handler(socketserver.StreamRequestHandler):
        def handle(self):
            upstream = http.client.HTTPConnection("127.0.0.1", upstream_port, timeout=120)
            try:
                while True:
                    try:
                        method, target, headers, body = read_request(self.rfile, self.connection)
                    except (EOFError, ConnectionError, ValueError):
                        return
                    key = next((v for n, v in headers if n.lower() == "idempotency-key"), None)
                    if idempotency and key is not None and key in replies:
                        mark(f"replayed {key}")
                        self.connection.sendall(replies[key])
                        continue
                    upstream.putrequest(method, target, skip_host=True, skip_accept_encoding=True)
                    for name, value in headers:
                        if name.lower() not in HOP_BY_HOP and name.lower() != "content-length":
                            upstream.putheader(name, value)
                    if body or method not in ("GET", "HEAD", "DELETE"):
                        upstream.putheader("Content-Length", str(len(body)))
                    upstream.endheaders(body)
                    response = upstream.getresponse()
                    payload = response.read()
                    head = f"HTTP/1.1 {response.status} {response.reason}\r\n"
                    for name, value in response.getheaders():
                        if name.lower() in HOP_BY_HOP or (name.lower() == "content-length" and method != "HEAD"):
                            continue
                        head += f"{name}: {value}\r\n"
                    if method != "HEAD":
                        head += f"Content-Length: {len(payload)}\r\n"
                    reply = head.encode("latin-1") + b"\r\n" + (payload if method != "HEAD" else b"")
                    if idempotency and key is not None and 200 <= response.status < 300:
                        replies[key] = reply
                    with marker_lock:
                        hold_this = should_hold(response.status, method, target)
                        if hold_this:
                            held.set()
                    if hold_this:
                        mark(f"stored {method} {target}")
                        self.connection.settimeout(HOLD_LIMIT_SECONDS)
                        try:
                            while self.connection.recv(65536):
                                pass
                        except OSError:
                            pass
                        return
                    self.connection.sendall(reply)
            finally:
                upstream.close()

    return Handler


def main():
    fd, upstream_port, marker_path, hold = sys.argv[1:5]
    idempotency = "--idempotency" in sys.argv[5:]
    every_match = "--hold-every-match" in sys.argv[5:]
    options = sys.argv[5:]
    only_targets = None
    if "--only-targets" in options:
        with open(options[options.index("--only-targets") + 1], encoding="utf-8") as targets:
            only_targets = set(targets.read().split("\n")) - {""}
    pass_first = int(options[options.index("--pass-first") + 1]) if "--pass-first" in options else 0
    listener = socket.socket(fileno=int(fd))
    handler = make_handler(
        int(upstream_port), marker_path, re.compile(hold), idempotency, every_match, only_targets, pass_first)
    server = Proxy(listener.getsockname(), handler, bind_and_activate=False)
    server.socket.close()
    server.socket = listener
    server.serve_forever()


if __name__ == "__main__":
    main()
