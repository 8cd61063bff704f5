"""WsgiDAV (PyPI) for the upload tests, served by hypercorn: a WebDAV server that follows RFC 4918 where nginx's
module does not. A PUT into a folder that does not exist fails with 409 Conflict (nginx answers 500 without
create_full_put_path), and MKCOL makes a folder (405 when it is there, 409 when its parent is missing), as Apache's
mod_dav, sabre/dav and IIS do.

/dav-strict/ is the folder CURLEW_WEBDAV_ROOT. The others are the same folder, served differently:
- /dav-no-mkcol/: MKCOL is forbidden (403);
- /dav-flaky-mkcol/: the first MKCOL of each folder answers 503 Service Unavailable, later ones go through;
- /dav-down-mkcol/: every MKCOL answers 503 Service Unavailable;
- /dav-mkcol-race/: the first MKCOL of each folder makes it and answers 500, as WsgiDAV answers the loser of two
  MKCOLs of one folder sent at once (by two runs sharing the destination);
- /dav-racing/: a PUT refused with 409 has its folder made right after its answer, as another run sharing the
  destination (a shard) would make it between that PUT and the client's MKCOL.
Every request is logged to CURLEW_WEBDAV_LOG as `METHOD STATUS PATH` (the path percent-encoded, as nginx's test
log writes it), one line each, written when its answer is ready."""

import os
import threading
import urllib.parse

from wsgidav.wsgidav_app import WsgiDAVApp

ROOT = os.environ["CURLEW_WEBDAV_ROOT"]
LOG = open(os.environ["CURLEW_WEBDAV_LOG"], "a", buffering=1)

dav = WsgiDAVApp({
    "provider_mapping": {
        "/dav-strict": ROOT, "/dav-no-mkcol": ROOT, "/dav-flaky-mkcol": ROOT, "/dav-racing": ROOT,
        "/dav-mkcol-race": ROOT, "/dav-down-mkcol": ROOT,
    },
    "simple_dc": {"user_mapping": {"*": True}},
    "verbose": 1,
    "logging": {"enable": False},
})


MKCOL_REFUSED_ONCE = set()
MKCOL_REFUSED_ONCE_LOCK = threading.Lock()


def refuse_first_mkcol(path):
    with MKCOL_REFUSED_ONCE_LOCK:
        if path in MKCOL_REFUSED_ONCE:
            return False
        MKCOL_REFUSED_ONCE.add(path)
        return True


def answer(start_response, status, text):
    body = text.encode()
    start_response(status, [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]


def app(environ, start_response):
    method = environ["REQUEST_METHOD"]
    # PEP 3333: PATH_INFO holds the path's bytes as latin-1 characters.
    raw_path = environ.get("PATH_INFO", "").encode("latin-1")
    path = urllib.parse.quote(raw_path, safe="/")
    if method == "MKCOL" and path.startswith("/dav-no-mkcol/"):
        status = "403 Forbidden"
        chunks = answer(start_response, status, "MKCOL is forbidden here\n")
    elif method == "MKCOL" and path.startswith("/dav-flaky-mkcol/") and refuse_first_mkcol(path):
        status = "503 Service Unavailable"
        chunks = answer(start_response, status, "try again\n")
    elif method == "MKCOL" and path.startswith("/dav-down-mkcol/"):
        status = "503 Service Unavailable"
        chunks = answer(start_response, status, "try again later\n")
    elif method == "MKCOL" and path.startswith("/dav-mkcol-race/") and refuse_first_mkcol(path):
        # The other run's MKCOL won: the folder is there, this one is answered 500.
        os.makedirs(os.path.join(os.fsencode(ROOT), raw_path[len(b"/dav-mkcol-race/"):]), exist_ok=True)
        status = "500 Internal Server Error"
        chunks = answer(start_response, status, "the folder was made meanwhile\n")
    else:
        answered = {}

        def recording_start_response(status, headers, exc_info=None):
            answered["status"] = status
            return start_response(status, headers, exc_info)

        chunks = list(dav(environ, recording_start_response))
        status = answered.get("status", "500")
        if method == "PUT" and path.startswith("/dav-racing/") and status.startswith("409"):
            folder = os.path.dirname(raw_path[len(b"/dav-racing/"):])
            os.makedirs(os.path.join(os.fsencode(ROOT), folder), exist_ok=True)
    LOG.write(f"{method} {status.split()[0]} {path}\n")
    return chunks
