"""HTTP/1.1 over TLS that leaves stray bytes on a kept-alive connection, for the check of pooled connections when a
request allowed HTTP/2 and the server's ALPN chose HTTP/1.1 (most https servers that do not speak HTTP/2).

    tls_stray_server.py LISTEN_FD CERTIFICATE KEY LOG

ALPN offers only http/1.1. `GET /first` is answered with the body `first`, then, 20 ms later in a TLS record of its
own, a complete fake response no request asked for. `GET /held-first` waits until a file `release` appears beside
LOG, then is answered the same way with the fake response right behind the answer (its own TLS record, in the same TCP
segment: the socket is corked while both are written). Every
other GET is answered with the body `own:<target>`. Every request is
logged to LOG as `request <connection> <index on connection> <target>` when it is read, and `stray <connection>
<index>` once the fake response is written, so tests wait on the server's word."""

import asyncio
import os
import socket
import ssl
import sys

STRAY_RESPONSE = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: keep-alive\r\n\r\nwrong"
CONNECTIONS = 0


def response(body):
    return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: keep-alive\r\n\r\n%s" % (len(body), body)


async def released(path):
    """Waits (at most 60 s) until the test creates `path`."""
    for _ in range(12000):
        if os.path.exists(path):
            return
        await asyncio.sleep(0.005)


async def serve(reader, writer, log, release_path):
    global CONNECTIONS
    connection = CONNECTIONS
    CONNECTIONS += 1
    index = 0
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            target = head.split(b"\r\n", 1)[0].split(b" ")[1].decode("latin-1")
            log.write(f"request {connection} {index} {target}\n")
            if target in ("/first", "/held-first"):
                held = target == "/held-first"
                if held:
                    await released(release_path)
                    # Both records leave in one segment (the kernel holds the first until the cork is pulled): the
                    # fake is in the client's socket with the answer, before the client can hand the connection on,
                    # however the machine schedules this process.
                    writer.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_CORK, 1)
                writer.write(response(b"first"))
                await writer.drain()
                if not held:
                    await asyncio.sleep(0.02)
                writer.write(STRAY_RESPONSE)
                await writer.drain()
                if held:
                    writer.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_CORK, 0)
                log.write(f"stray {connection} {index}\n")
            else:
                writer.write(response(b"own:" + target.encode("latin-1")))
                await writer.drain()
            index += 1
    except (asyncio.IncompleteReadError, ConnectionError, ssl.SSLError):
        pass
    finally:
        writer.close()


async def main():
    listen_fd, certificate, key, log_path = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
    log = open(log_path, "a", buffering=1)
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(certificate, key)
    tls.set_alpn_protocols(["http/1.1"])
    server = await asyncio.start_server(
        lambda reader, writer: serve(reader, writer, log, os.path.join(os.path.dirname(log_path), "release")),
        sock=socket.socket(fileno=listen_fd), ssl=tls)
    print("tls stray server ready", file=sys.stderr, flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main())
