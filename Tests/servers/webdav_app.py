"""WsgiDAV (PyPI) for the upload tests, served by hypercorn: a WebDAV server that follows RFC 4918 where nginx's
module does not. A PUT into a folder that does not exist fails with 409 Conflict (nginx answers 500 without
create_full_put_path), and MKCOL makes a folder (405 when it is there, 409 when its parent is missing), as Apache's
mod_dav, sabre/dav and IIS do.

/dav-strict/ is the folder CURLEW_WEBDAV_ROOT; /dav-no-mkcol/ is the same folder with MKCOL forbidden (403).
Every request is logged to CURLEW_WEBDAV_LOG as `METHOD STATUS PATH` (the path percent-encoded, as nginx's test
log writes it), one line each, written when its answer is ready."""

import os
import urllib.parse

from wsgidav.wsgidav_app import WsgiDAVApp

ROOT = os.environ["CURLEW_WEBDAV_ROOT"]
LOG = open(os.environ["CURLEW_WEBDAV_LOG"], "a", buffering=1)

dav = WsgiDAVApp({
    "provider_mapping": {"/dav-strict": ROOT, "/dav-no-mkcol": ROOT},
    "simple_dc": {"user_mapping": {"*": True}},
    "verbose": 1,
    "logging": {"enable": False},
})


def app(environ, start_response):
    method = environ["REQUEST_METHOD"]
    # PEP 3333: PATH_INFO holds the path's bytes as latin-1 characters.
    path = urllib.parse.quote(environ.get("PATH_INFO", "").encode("latin-1"), safe="/")
    if method == "MKCOL" and path.startswith("/dav-no-mkcol/"):
        body = b"MKCOL is forbidden here\n"
        status = "403 Forbidden"
        start_response(status, [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
        chunks = [body]
    else:
        answered = {}

        def recording_start_response(status, headers, exc_info=None):
            answered["status"] = status
            return start_response(status, headers, exc_info)

        chunks = list(dav(environ, recording_start_response))
        status = answered.get("status", "500")
    LOG.write(f"{method} {status.split()[0]} {path}\n")
    return chunks
