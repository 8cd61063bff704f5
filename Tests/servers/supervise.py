#!/usr/bin/env python3
"""Runs one test server and guarantees it dies with the test process that started it.

Usage:
    supervise.py [--listen N] [--cleanup-dir DIR] -- PROGRAM [ARGS...]

--listen N      bind N TCP sockets on 127.0.0.1:0 *before* starting PROGRAM and pass them
                to it. The ports are decided by the kernel, so two concurrent test runs can
                never race for the same port. In PROGRAM's arguments, {fd0}, {fd1}, ...
                become the inherited descriptor numbers and {port0}, ... the ports.
{python}        in PROGRAM's arguments becomes this interpreter (so `{python} -m gunicorn`
                uses the interpreter that has the packages, whatever PATH says).
--cleanup-dir   a directory removed after PROGRAM is gone, when the parent went away.

Protocol with the parent (the Swift test process):
  * stdout carries exactly one line, "PORTS p0 p1 ...\n" (empty list without --listen),
    printed before PROGRAM starts; PROGRAM's own stdout goes to our stderr.
  * The parent keeps our stdin open and never writes to it. EOF on stdin means the parent
    exited, however it died (the kernel closes its descriptors even on SIGKILL or a crash),
    so we stop PROGRAM. The parent PID is also polled in case another process inherited
    the other end of our stdin.

PROGRAM runs in its own session so that killing its process group also reaches its workers
(gunicorn workers, nginx worker processes). It gets SIGTERM first, SIGKILL after a grace
period. If PROGRAM exits on its own, we exit with its status.
"""

import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import time

GRACE_SECONDS = 5.0
POLL_SECONDS = 0.5


def parse_arguments(argv):
    listen = 0
    cleanup_dir = None
    index = 0
    while index < len(argv) and argv[index] != "--":
        if argv[index] == "--listen":
            listen = int(argv[index + 1])
            index += 2
        elif argv[index] == "--cleanup-dir":
            cleanup_dir = argv[index + 1]
            index += 2
        else:
            sys.exit(f"supervise.py: unknown option {argv[index]!r}")
    program = argv[index + 1:]
    if not program:
        sys.exit("supervise.py: missing '-- PROGRAM [ARGS...]'")
    return listen, cleanup_dir, program


def stop_group(child):
    """SIGTERM the whole process group, then SIGKILL whatever is left after the grace period."""
    try:
        os.killpg(child.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + GRACE_SECONDS
    while time.monotonic() < deadline:
        if child.poll() is not None:
            break
        time.sleep(0.05)
    # Workers can outlive their master; the group kill reaches them too.
    try:
        os.killpg(child.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    child.wait()


def remove_directory(path):
    """Removes path, again while something still writes into it: the other daemons of a server made of several
    (slurmctld and slurmd beside munged, each under a supervisor of its own) stop at the same time as PROGRAM and
    save their state as they go. Once the folders are gone, what they write fails instead."""
    deadline = time.monotonic() + GRACE_SECONDS + 2
    while True:
        shutil.rmtree(path, ignore_errors=True)
        if not os.path.lexists(path) or time.monotonic() >= deadline:
            return
        time.sleep(0.1)


def main():
    listen, cleanup_dir, program = parse_arguments(sys.argv[1:])
    parent = os.getppid()

    sockets = []
    for _ in range(listen):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        sock.listen(1024)
        sockets.append(sock)

    substitutions = {"{python}": sys.executable}
    for number, sock in enumerate(sockets):
        substitutions[f"{{fd{number}}}"] = str(sock.fileno())
        substitutions[f"{{port{number}}}"] = str(sock.getsockname()[1])

    def substitute(argument):
        for key, value in substitutions.items():
            argument = argument.replace(key, value)
        return argument

    # Installed before the child exists so that no signal can kill us and orphan it.
    stopping = False

    def on_signal(signum, frame):
        nonlocal stopping
        stopping = True

    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, on_signal)

    sys.stdout.write("PORTS" + "".join(f" {s.getsockname()[1]}" for s in sockets) + "\n")
    sys.stdout.flush()

    child = subprocess.Popen(
        [substitute(argument) for argument in program],
        stdin=subprocess.DEVNULL,
        stdout=sys.stderr.fileno(),
        pass_fds=[s.fileno() for s in sockets],
        start_new_session=True,
    )
    for sock in sockets:
        sock.close()  # The child holds its own copies.

    while not stopping:
        status = child.poll()
        if status is not None:
            # PROGRAM died by itself (bad config, port in use, crash): report it as ours.
            try:
                os.killpg(child.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            sys.exit(status if status >= 0 else 128 - status)
        if os.getppid() != parent:
            break
        try:
            readable, _, _ = select.select([sys.stdin.fileno()], [], [], POLL_SECONDS)
            if readable and not os.read(sys.stdin.fileno(), 4096):
                break
        except OSError:
            break  # stdin reset or invalid: the parent is gone just the same.

    stop_group(child)
    if cleanup_dir:
        remove_directory(cleanup_dir)


if __name__ == "__main__":
    main()
