#!/usr/bin/env python3
"""The input files of the upload scenarios (S4-S6), made once and reused (deterministic content).

    make_inputs.py DIR [SIZE_BYTES]

DIR/random.bin   SIZE bytes: a 1 MiB pseudo-random block (seed 42) repeated; incompressible for
                 deflate (its 32 KiB window never sees a repeat). For S4 and S5.
DIR/lines.jsonl  about SIZE bytes of JSON lines (seed 7), whole lines only: a 64 MiB block of distinct
                 records repeated, compressible like real logs (zlib -1 gets it to about a fifth). For S6.
Existing files of the right size are kept.
"""
import os
import random
import sys

MIB = 1 << 20


def make_random(path, size):
    block = random.Random(42).randbytes(MIB)
    with open(path + ".tmp", "wb") as out:
        left = size
        while left > 0:
            out.write(block[: min(left, MIB)])
            left -= MIB
    os.replace(path + ".tmp", path)


def make_lines(path, size):
    rng = random.Random(7)
    levels = ["debug", "info", "info", "info", "warn", "error"]
    services = ["auth", "billing", "search", "upload", "gateway", "catalog", "mailer"]
    paths = ["/v1/users", "/v1/orders", "/v1/items", "/v2/search", "/v1/files", "/health", "/v1/sessions"]
    words = ("request completed cache miss retry scheduled upstream timeout user created order shipped "
             "payment declined token refreshed file stored quota exceeded").split()
    lines = []
    total = 0
    n = 0
    while total < 64 * MIB:
        n += 1
        line = ('{"ts":"2026-11-%02dT%02d:%02d:%02d.%03dZ","level":"%s","service":"%s","method":"%s",'
                '"path":"%s/%d","status":%d,"duration_ms":%.3f,"bytes":%d,"user":"u%06d","trace":"%016x",'
                '"msg":"%s"}\n') % (
            1 + n // 2000000 % 28, rng.randrange(24), rng.randrange(60), rng.randrange(60), rng.randrange(1000),
            rng.choice(levels), rng.choice(services), rng.choice(["GET", "GET", "POST", "PUT", "DELETE"]),
            rng.choice(paths), rng.randrange(100000), rng.choice([200, 200, 200, 201, 204, 304, 404, 500]),
            rng.random() * 250, rng.randrange(1 << 20), rng.randrange(1000000), rng.getrandbits(64),
            " ".join(rng.choice(words) for _ in range(rng.randrange(3, 9))))
        lines.append(line)
        total += len(line)
    block = "".join(lines).encode()
    with open(path + ".tmp", "wb") as out:
        left = size
        while left >= len(block):
            out.write(block)
            left -= len(block)
        if left > 0:
            cut = block.rfind(b"\n", 0, left) + 1
            out.write(block[:cut])
    os.replace(path + ".tmp", path)


def main():
    folder = sys.argv[1]
    size = int(sys.argv[2]) if len(sys.argv) > 2 else 1 << 30
    os.makedirs(folder, exist_ok=True)
    random_path = os.path.join(folder, "random.bin")
    if not (os.path.exists(random_path) and os.path.getsize(random_path) == size):
        make_random(random_path, size)
    lines_path = os.path.join(folder, "lines.jsonl")
    if not (os.path.exists(lines_path) and abs(os.path.getsize(lines_path) - size) < 64 * MIB):
        make_lines(lines_path, size)
    for path in (random_path, lines_path):
        print(f"{path} {os.path.getsize(path)}")


if __name__ == "__main__":
    main()
