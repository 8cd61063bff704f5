"""The fault-injecting server of `make soak` (Tests/Soak): HTTP/1.1 in cleartext on one listening socket and HTTP/2
over TLS (ALPN h2) on another, both asyncio in one process, on descriptors the supervisor bound on 127.0.0.1.

Every path is /<kind>/<request id>/<size>. A complete body is always body_for(request id, size): records
"<id>@<offset>;" back to back, cut at size bytes. The client rebuilds it from the id and size it chose, so a body that
belongs to another request, comes out of order, is cut short, or carries stray bytes never compares equal.

Kinds the client must see succeed (or fail with a typed error, never with a wrong body):
  ok            a Content-Length body
  chunked       HTTP/1.1 chunked encoding; HTTP/2 DATA frames without content-length; random piece sizes
  slow          the body in three pieces 20 ms apart
  stray         HTTP/1.1: a fake response written right after the real one, in the same write (the next request on
                that connection must not get it); HTTP/2: an unknown extension frame after the response (ignored)
  idle-close    HTTP/1.1: the connection closed without notice 0-20 ms after the response (the pool holds a dead
                connection); HTTP/2: a GOAWAY covering every stream seen, then the connection closed when they end
  goaway        HTTP/2: the response, then a GOAWAY with NO_ERROR covering every stream seen so far; streams that
                arrive after it are refused (REFUSED_STREAM), and the connection closes once the rest are answered
Kinds that must fail, with a typed error:
  reset         half the body, then a TCP reset (HTTP/1.1) or RST_STREAM INTERNAL_ERROR (HTTP/2)
  rst-no-error  HTTP/2: half the body without content-length, then RST_STREAM NO_ERROR (no END_STREAM)
  close-mid-body  half the body, then the connection closed (HTTP/2: every stream on it ends)
  short-length  one byte fewer than the Content-Length announces, then the end (HTTP/2: END_STREAM)
  chunked-truncated  HTTP/1.1: half the body in chunks, then a close without the last chunk
  stall         half the body, then nothing until the client gives up (its idle timeout)
  never-answer  nothing at all until the client gives up
  malformed     HTTP/1.1: a status line that is not HTTP; HTTP/2: a :status that is not three digits
  empty-reply   HTTP/1.1: the connection closed before a single byte
  goaway-abrupt HTTP/2: a GOAWAY whose last stream id is below this request's, so it is never answered (the client
                may retry it on a new connection, which does the same)
Content-encoded kinds, over both protocols, the body framed by an exact Content-Length (libcurl sees nothing wrong):
  gzip, deflate, raw-deflate, br      the body so encoded (raw-deflate: deflate without zlib's wrapper, as some
                servers send `deflate`); must decode to the body
  gzip-members  the body's two halves as two gzip members, back to back (RFC 1952 2.2); must decode to the body
  raw-deflate-adler  raw deflate followed by the body's Adler-32 (4 bytes), which libcurl and browsers take
  gzip-300      the gzip body with status 300 and no Location (a 3xx no client follows, whose body it gets)
  gzip-redirect a 301 whose gzip body says where, to /ok/<id>/<size>: the final body is not encoded
  gzip-cut, deflate-cut, br-cut       the encoded body without its last 4 bytes; must fail
  gzip-trailing the gzip body followed by bytes that are not another member; must fail
  compress      `Content-Encoding: compress` over the plain body: a coding no client decodes; must fail
HTTP/1.1 connections idle for 2 s are closed without notice, as servers do.
"""

import asyncio
import random
import socket
import ssl
import struct
import sys
import zlib

import h2.config
import h2.connection
import h2.events
import h2.exceptions
from hyperframe.frame import GoAwayFrame

IDLE_CLOSE_SECONDS = 2.0
# Long enough for any client timeout of the soak; a stalled request is ended by the client, not by us.
STALL_LIMIT_SECONDS = 120.0
STRAY_RESPONSE = b"HTTP/1.1 200 OK\r\nContent-Length: 26\r\n\r\nSTRAY-BYTES-NOT-A-RESPONSE"
# An extension frame type no HTTP/2 implementation knows: RFC 9113 says receivers ignore it.
UNKNOWN_FRAME_TYPE = 0xEE


def body_for(request_id, size):
    out = bytearray()
    while len(out) < size:
        out += f"{request_id}@{len(out)};".encode()
    return bytes(out[:size])


def deflated(data, wbits):
    compressor = zlib.compressobj(6, zlib.DEFLATED, wbits)
    return compressor.compress(data) + compressor.flush()


def encoded(kind, body):
    """(Content-Encoding, bytes) for a content-encoded kind, or None for any other kind."""
    if kind in ("gzip", "gzip-cut", "gzip-trailing", "gzip-300"):
        data = deflated(body, 31)
        if kind == "gzip-cut":
            data = data[:-4]
        elif kind == "gzip-trailing":
            data += b"NOT-A-GZIP-MEMBER"
        return "gzip", data
    if kind == "gzip-members":
        half = len(body) // 2
        return "gzip", deflated(body[:half], 31) + deflated(body[half:], 31)
    if kind in ("deflate", "deflate-cut"):
        data = deflated(body, 15)
        return "deflate", data[:-4] if kind == "deflate-cut" else data
    if kind == "raw-deflate":
        return "deflate", deflated(body, -15)
    if kind == "raw-deflate-adler":
        return "deflate", deflated(body, -15) + struct.pack(">I", zlib.adler32(body))
    if kind in ("br", "br-cut"):
        import brotlicffi

        # Quality 5: fast enough for the soak's 300 KB bodies.
        data = brotlicffi.compress(body, quality=5)
        return "br", data[:-4] if kind == "br-cut" else data
    if kind == "compress":
        return "compress", body
    return None


def parse_target(target):
    parts = target.split("/")
    if len(parts) != 4:
        return None
    try:
        return parts[1], parts[2], int(parts[3])
    except ValueError:
        return None


def random_pieces(data):
    pieces = []
    offset = 0
    while offset < len(data):
        step = random.randint(1, max(1, len(data) // 3))
        pieces.append(data[offset : offset + step])
        offset += step
    return pieces


# HTTP/1.1


def h1_head(status_line, fields):
    return (status_line + "\r\n" + "".join(f"{name}: {value}\r\n" for name, value in fields) + "\r\n").encode()


def h1_chunk(piece):
    return f"{len(piece):x}\r\n".encode() + piece + b"\r\n"


def reset(writer):
    sock = writer.get_extra_info("socket")
    if sock is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


async def wait_for_client_to_leave(reader):
    try:
        await asyncio.wait_for(reader.read(), STALL_LIMIT_SECONDS)
    except (asyncio.TimeoutError, ConnectionError):
        pass


async def answer_h1(kind, request_id, size, reader, writer):
    """Answers one request; returns whether the connection stays open for the next."""
    body = body_for(request_id, size)
    half = body[: len(body) // 2]
    length_head = h1_head("HTTP/1.1 200 OK", [("Content-Length", len(body))])
    chunked_head = h1_head("HTTP/1.1 200 OK", [("Transfer-Encoding", "chunked")])
    if kind == "ok":
        writer.write(length_head + body)
        return True
    if kind == "chunked":
        writer.write(chunked_head + b"".join(h1_chunk(piece) for piece in random_pieces(body)) + b"0\r\n\r\n")
        return True
    if kind == "slow":
        writer.write(length_head)
        third = max(1, len(body) // 3)
        for offset in range(0, len(body), third):
            await asyncio.sleep(0.02)
            writer.write(body[offset : offset + third])
            await writer.drain()
        return True
    if kind == "stray":
        writer.write(length_head + body + STRAY_RESPONSE)
        return True
    if kind == "idle-close":
        writer.write(length_head + body)
        await writer.drain()
        await asyncio.sleep(random.uniform(0, 0.02))
        return False
    if kind == "reset":
        writer.write(length_head + half)
        await writer.drain()
        reset(writer)
        return False
    if kind == "close-mid-body":
        writer.write(length_head + half)
        return False
    if kind == "short-length":
        writer.write(length_head + body[:-1])
        return False
    if kind == "chunked-truncated":
        writer.write(chunked_head + b"".join(h1_chunk(piece) for piece in random_pieces(half)))
        return False
    if kind == "stall":
        writer.write(length_head + half)
        await writer.drain()
        await wait_for_client_to_leave(reader)
        return False
    if kind == "never-answer":
        await wait_for_client_to_leave(reader)
        return False
    if kind == "malformed":
        writer.write(b"HTTP/1.1 two hundred OK\r\nnot a header line\r\n\r\n" + half)
        return False
    if kind == "empty-reply":
        return False
    if kind == "gzip-redirect":
        data = deflated(b"moved to /ok", 31)
        location = f"/ok/{request_id}/{size}"
        fields = [("Content-Length", len(data)), ("Content-Encoding", "gzip"), ("Location", location)]
        writer.write(h1_head("HTTP/1.1 301 Moved Permanently", fields) + data)
        return True
    coded = encoded(kind, body)
    if coded is not None:
        coding, data = coded
        status = "HTTP/1.1 300 Multiple Choices" if kind == "gzip-300" else "HTTP/1.1 200 OK"
        writer.write(h1_head(status, [("Content-Length", len(data)), ("Content-Encoding", coding)]) + data)
        return True
    writer.write(h1_head("HTTP/1.1 404 Not Found", [("Content-Length", 0)]))
    return True


async def serve_h1(reader, writer):
    try:
        while True:
            try:
                head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), IDLE_CLOSE_SECONDS)
            except (asyncio.TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
                return
            lines = head.decode("latin-1").split("\r\n")
            request_line = lines[0].split(" ")
            length = 0
            for line in lines[1:]:
                name, _, value = line.partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value.strip())
            if length:
                await reader.readexactly(length)
            route = parse_target(request_line[1]) if len(request_line) == 3 else None
            if route is None:
                writer.write(h1_head("HTTP/1.1 400 Bad Request", [("Content-Length", 0), ("Connection", "close")]))
                return
            if not await answer_h1(*route, reader, writer):
                return
            await writer.drain()
    except (ConnectionError, asyncio.IncompleteReadError):
        pass
    finally:
        if not writer.transport.is_closing():
            writer.close()


# HTTP/2


class H2Connection(asyncio.Protocol):
    def __init__(self):
        config = h2.config.H2Configuration(
            client_side=False, header_encoding="utf-8", validate_outbound_headers=False
        )
        self.h2 = h2.connection.H2Connection(config=config)
        self.transport = None
        self.closed = False
        self.window_opened = {}
        self.ended_streams = set()
        self.open_streams = set()
        self.highest_stream = 0
        # Set once a GOAWAY went out: streams above it are refused, and the connection closes when the rest end.
        self.goaway_last_stream = None

    def connection_made(self, transport):
        self.transport = transport
        self.h2.initiate_connection()
        self.flush()

    def connection_lost(self, exc):
        self.closed = True
        for event in self.window_opened.values():
            event.set()

    def flush(self):
        data = self.h2.data_to_send()
        if data and not self.closed:
            self.transport.write(data)

    def data_received(self, data):
        try:
            events = self.h2.receive_data(data)
        except h2.exceptions.ProtocolError:
            self.flush()
            self.transport.close()
            return
        for event in events:
            if isinstance(event, h2.events.RequestReceived):
                self.highest_stream = max(self.highest_stream, event.stream_id)
                if self.goaway_last_stream is not None and event.stream_id > self.goaway_last_stream:
                    self.h2.reset_stream(event.stream_id, error_code=h2.errors.ErrorCodes.REFUSED_STREAM)
                    continue
                self.open_streams.add(event.stream_id)
                path = dict(event.headers).get(":path", "")
                asyncio.ensure_future(self.answer(event.stream_id, path))
            elif isinstance(event, h2.events.DataReceived):
                self.h2.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
            elif isinstance(event, h2.events.WindowUpdated):
                if event.stream_id == 0:
                    for opened in self.window_opened.values():
                        opened.set()
                elif event.stream_id in self.window_opened:
                    self.window_opened[event.stream_id].set()
            elif isinstance(event, h2.events.StreamReset):
                self.end(event.stream_id)
            elif isinstance(event, h2.events.ConnectionTerminated):
                self.transport.close()
        self.flush()

    def end(self, stream_id):
        self.ended_streams.add(stream_id)
        self.open_streams.discard(stream_id)
        opened = self.window_opened.pop(stream_id, None)
        if opened:
            opened.set()
        if self.goaway_last_stream is not None and not self.open_streams and not self.closed:
            self.transport.close()

    def live(self, stream_id):
        return not self.closed and stream_id not in self.ended_streams

    async def send(self, stream_id, data, end_stream):
        offset = 0
        while offset < len(data):
            while True:
                if not self.live(stream_id):
                    return False
                try:
                    window = self.h2.local_flow_control_window(stream_id)
                except h2.exceptions.StreamClosedError:
                    return False
                if window > 0:
                    break
                opened = self.window_opened.setdefault(stream_id, asyncio.Event())
                opened.clear()
                await opened.wait()
            step = min(window, self.h2.max_outbound_frame_size, len(data) - offset)
            self.h2.send_data(stream_id, data[offset : offset + step])
            offset += step
            self.flush()
            await asyncio.sleep(0)
        if end_stream and self.live(stream_id):
            self.h2.end_stream(stream_id)
            self.flush()
        return True

    def send_headers(self, stream_id, status="200", length=None, end_stream=False, coding=None, location=None):
        fields = [(":status", status), ("content-type", "application/octet-stream")]
        if length is not None:
            fields.append(("content-length", str(length)))
        if coding is not None:
            fields.append(("content-encoding", coding))
        if location is not None:
            fields.append(("location", location))
        self.h2.send_headers(stream_id, fields, end_stream=end_stream)
        self.flush()

    def go_away(self, last_stream):
        # Written past h2's state machine, which allows nothing more on a connection once it sent a GOAWAY: this server
        # keeps answering the streams the GOAWAY covers, as RFC 9113 (6.8) has servers do.
        if self.goaway_last_stream is None and not self.closed:
            self.goaway_last_stream = last_stream
            self.transport.write(GoAwayFrame(0, last_stream_id=last_stream, error_code=0).serialize())

    async def answer(self, stream_id, path):
        try:
            await self.answer_route(stream_id, path)
        except (h2.exceptions.ProtocolError, h2.exceptions.StreamClosedError):
            pass
        finally:
            self.end(stream_id)

    async def answer_route(self, stream_id, path):
        route = parse_target(path)
        if route is None:
            self.send_headers(stream_id, status="404", length=0, end_stream=True)
            return
        kind, request_id, size = route
        body = body_for(request_id, size)
        half = body[: len(body) // 2]
        if kind == "gzip-redirect":
            data = deflated(b"moved to /ok", 31)
            location = f"/ok/{request_id}/{size}"
            self.send_headers(stream_id, status="301", length=len(data), coding="gzip", location=location)
            await self.send(stream_id, data, end_stream=True)
            return
        coded = encoded(kind, body)
        if coded is not None:
            coding, data = coded
            status = "300" if kind == "gzip-300" else "200"
            self.send_headers(stream_id, status=status, length=len(data), coding=coding)
            await self.send(stream_id, data, end_stream=True)
            return
        if kind in ("ok", "stray", "goaway", "idle-close"):
            self.send_headers(stream_id, length=len(body))
            if not await self.send(stream_id, body, end_stream=True):
                return
            if kind == "stray" and self.live(stream_id):
                payload = bytes(random.getrandbits(8) for _ in range(random.randint(0, 64)))
                frame = struct.pack(">I", len(payload))[1:] + bytes([UNKNOWN_FRAME_TYPE, 0]) + struct.pack(">I", 0)
                self.transport.write(frame + payload)
            elif kind in ("goaway", "idle-close"):
                self.go_away(self.highest_stream)
        elif kind == "chunked":
            self.send_headers(stream_id)
            for piece in random_pieces(body):
                if not await self.send(stream_id, piece, end_stream=False):
                    return
            await self.send(stream_id, b"", end_stream=True)
        elif kind == "slow":
            self.send_headers(stream_id, length=len(body))
            third = max(1, len(body) // 3)
            for offset in range(0, len(body), third):
                await asyncio.sleep(0.02)
                if not await self.send(stream_id, body[offset : offset + third], end_stream=False):
                    return
            await self.send(stream_id, b"", end_stream=True)
        elif kind in ("reset", "rst-no-error"):
            self.send_headers(stream_id, length=len(body) if kind == "reset" else None)
            if await self.send(stream_id, half, end_stream=False) and self.live(stream_id):
                code = h2.errors.ErrorCodes.INTERNAL_ERROR if kind == "reset" else h2.errors.ErrorCodes.NO_ERROR
                self.h2.reset_stream(stream_id, error_code=code)
                self.flush()
        elif kind == "close-mid-body":
            self.send_headers(stream_id, length=len(body))
            if await self.send(stream_id, half, end_stream=False):
                self.transport.close()
        elif kind == "short-length":
            self.send_headers(stream_id, length=len(body))
            await self.send(stream_id, body[:-1], end_stream=True)
        elif kind == "stall":
            self.send_headers(stream_id, length=len(body))
            if await self.send(stream_id, half, end_stream=False):
                await self.wait_until_ended(stream_id)
        elif kind == "never-answer":
            await self.wait_until_ended(stream_id)
        elif kind == "malformed":
            self.send_headers(stream_id, status="2x0", length=len(body))
            await self.send(stream_id, body, end_stream=True)
        elif kind == "goaway-abrupt":
            self.go_away(max(0, stream_id - 2))
        else:
            self.send_headers(stream_id, status="404", length=0, end_stream=True)

    async def wait_until_ended(self, stream_id):
        opened = self.window_opened.setdefault(stream_id, asyncio.Event())
        loop = asyncio.get_running_loop()
        deadline = loop.time() + STALL_LIMIT_SECONDS
        while self.live(stream_id) and loop.time() < deadline:
            opened.clear()
            try:
                await asyncio.wait_for(opened.wait(), 1.0)
            except asyncio.TimeoutError:
                pass


async def main():
    h1_fd, h2_fd, certificate, key = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(certificate, key)
    tls.set_alpn_protocols(["h2"])
    h1_socket = socket.socket(fileno=h1_fd)
    h2_socket = socket.socket(fileno=h2_fd)
    h1_server = await asyncio.start_server(serve_h1, sock=h1_socket, backlog=1024)
    loop = asyncio.get_running_loop()
    h2_server = await loop.create_server(H2Connection, sock=h2_socket, ssl=tls, backlog=1024)
    print("fault server ready", file=sys.stderr, flush=True)
    async with h1_server, h2_server:
        await asyncio.gather(h1_server.serve_forever(), h2_server.serve_forever())


if __name__ == "__main__":
    asyncio.run(main())
