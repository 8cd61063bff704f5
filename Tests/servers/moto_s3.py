#!/usr/bin/env python3
"""moto's S3 (and IAM) server on an inherited listening socket, for Curlew's upload tests.

Usage (under supervise.py --listen 1):
    moto_s3.py --fd {fd0} --port {port0} --dir DIR [--check-signatures]

--check-signatures  moto verifies every SigV4 signature after INITIAL_NO_AUTH_ACTION_COUNT=3 unsigned calls,
                    which this script spends itself (boto3: an IAM user, an allow-all inline policy, an access
                    key). The key is written to DIR/credentials.json; without the flag the file holds dummy keys.
DIR/requests.log    one line per request, werkzeug's access-log format: the server-side count of every request.
DIR/ready           written last: the server answers and the credentials exist.

Long CompleteMultipartUploads: moto's answer is preceded by S3's whitespace keep-alive, and the Completes and aborts
of one upload are serialized around a moto race (see `app` below).

ListMultipartUploads reports each upload's real start time (moto answers one fixed 2010 date for all of them), so
a client's "begun before the file last changed" rule is tested against the times S3 reports.

Faults: a part upload (PUT with partNumber) whose key contains "corrupt-in-transit" has one byte of its body
flipped before moto stores it, as a bad network or proxy would; the client's checksums must catch it. Part 2 of a
key containing "part-two-always-fails" is answered 500 InternalError every time (and logged like any request). A
CopyObject (a PUT with x-amz-copy-source) onto a key containing "copy-refused" is answered 403 AccessDenied, as S3
answers a key allowed s3:PutObject but not s3:GetObject (a write-only backup key). The first CopyObject onto a key
containing "copy-timeout-once" is answered 400 RequestTimeout (S3's retryable 4xx). Before a CopyObject onto a key containing
"replaced-before-copy", the key's object is replaced with other bytes, as another writer might between a client's
CompleteMultipartUpload and its copy. The first CopyObject onto a key containing "copy-200-error-once" is answered
200 with an InternalError document (S3 sends a copy's status before its outcome), and the first onto a key containing
"copy-200-empty-once" 200 with only the XML declaration (as a store that failed after its 200 may), neither copying;
the first onto a key containing "copy-reply-lost-once" is made, then its connection is closed before any reply
(requests.log still logs it as 200: werkzeug logs a status as it starts to send it). The first
CompleteMultipartUpload of a key containing "complete-200-error-once" is answered 200, a space, then an
InternalError document, and nothing is completed; the first of a key containing "complete-reply-lost-then-gone"
completes the upload and loses its reply the same way, and later ones are answered 404 NoSuchUpload (as S3 answers
once it no longer knows the finished upload; moto would answer 200 again).

CopyObject honours x-amz-copy-source-if-match as S3 does (412 PreconditionFailed when the source's ETag differs);
moto 5.2.1 honours only x-amz-copy-source-if-none-match.
"""

import argparse
import io
import json
import logging
import os
import re
import socket
import sys
import threading
from xml.sax.saxutils import escape
from urllib.parse import parse_qs, unquote


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--fd", type=int, required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--dir", required=True)
    parser.add_argument("--check-signatures", action="store_true")
    args = parser.parse_args()

    if args.check_signatures:
        # Read by moto when it is imported.
        os.environ["INITIAL_NO_AUTH_ACTION_COUNT"] = "3"

    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
    from werkzeug.serving import make_server

    log = logging.getLogger("werkzeug")
    log.setLevel(logging.INFO)
    handler = logging.FileHandler(os.path.join(args.dir, "requests.log"))
    # werkzeug colours error lines for terminals; the log is for parsing.
    ansi = re.compile(r"\x1b\[[0-9;]*m")

    class Plain(logging.Formatter):
        def format(self, record):
            return ansi.sub("", super().format(record))

    handler.setFormatter(Plain("%(message)s"))
    log.addHandler(handler)
    log.propagate = False

    moto_app = DomainDispatcherApplication(create_backend_app)

    # When each multipart upload began, by upload ID.
    from datetime import datetime, timezone
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.s3 import models as s3_models

    upload_started = {}
    original_multipart_init = s3_models.FakeMultipart.__init__

    def recording_multipart_init(self, *args, **kwargs):
        original_multipart_init(self, *args, **kwargs)
        upload_started[self.id] = datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")

    s3_models.FakeMultipart.__init__ = recording_multipart_init

    def with_real_start_times(body):
        def upload_block(match):
            block = match.group(0)
            upload_id = re.search(r"<UploadId>(.*?)</UploadId>", block)
            started = upload_started.get(upload_id.group(1)) if upload_id else None
            if started is None:
                return block
            return re.sub(r"<Initiated>.*?</Initiated>", f"<Initiated>{started}</Initiated>", block)
        return re.sub(r"<Upload>.*?</Upload>", upload_block, body.decode("utf-8"), flags=re.S).encode("utf-8")

    def listing_uploads(environ, start_response):
        captured = {}

        def capture(status, headers, exc_info=None):
            captured["status"], captured["headers"] = status, headers
            return captured.setdefault("written", []).append
        body = moto_app(environ, capture)
        try:
            data = with_real_start_times(b"".join(captured.get("written", []) + list(body)))
        finally:
            getattr(body, "close", lambda: None)()
        headers = [(name, str(len(data)) if name.lower() == "content-length" else value)
                   for name, value in captured["headers"]]
        start_response(captured["status"], headers)
        return [data]

    # moto 5.2.1 answers a CompleteMultipartUpload that overlaps another one for the same upload (a client retrying
    # after its timeout while moto still joins the parts) with 500 "ValueError: seek of closed file": the first one's
    # `del bucket.multiparts[id]` (moto/s3/models.py:2717) disposes every part's buffer (MultipartDict.__delitem__
    # -> FakeMultipart.dispose -> FakeKey.dispose, models.py:1098, 535, 430) while the second still reads them in
    # FakeMultipart.complete (models.py:494 -> FakeKey.value, 202). AbortMultipartUpload races the same way. So the
    # Completes and aborts of one upload run one at a time here: a retry finds the finished object and gets moto's
    # idempotent 200, as from S3.
    upload_locks = {}
    upload_locks_guard = threading.Lock()

    def app(environ, start_response):
        query = environ.get("QUERY_STRING", "")
        upload_id = parse_qs(query).get("uploadId", [None])[0]
        if upload_id and environ["REQUEST_METHOD"] in ("POST", "DELETE"):
            with upload_locks_guard:
                lock = upload_locks.setdefault(upload_id, threading.Lock())
            if environ["REQUEST_METHOD"] == "POST":
                return completing(lambda capture: locked(lock, environ, capture), start_response)
            return locked(lock, environ, start_response)
        return unserialized_app(environ, start_response)

    def locked(lock, environ, start_response):
        with lock:
            return unserialized_app(environ, start_response)

    # S3 answers a CompleteMultipartUpload that takes a while with 200 at once, then a space every few seconds, then
    # the result or an <Error> document, so that clients' idle timeouts do not fire. moto answers only when done, and
    # joins the parts in memory: 45 s and 13 GB of RSS for 6 GiB on an idle machine here, past curlew's 60 s idle
    # timeout under load. A Complete still running after CURLEW_MOTO_KEEPALIVE_AFTER seconds is answered the S3 way
    # (logged with status 200 even if moto then fails it); a quicker one gets moto's own answer, headers and all.
    keepalive_after = float(os.environ.get("CURLEW_MOTO_KEEPALIVE_AFTER", "10"))

    def completing(call, start_response):
        result = {}
        done = threading.Event()

        def run():
            def capture(status, headers, exc_info=None):
                result["status"], result["headers"] = status, headers
                return result.setdefault("written", []).append
            try:
                body = call(capture)
                try:
                    result["body"] = b"".join(result.get("written", []) + list(body))
                finally:
                    getattr(body, "close", lambda: None)()
            except Exception as error:  # noqa: BLE001 - reported to the client like S3's InternalError
                logging.getLogger("werkzeug").exception("CompleteMultipartUpload failed")
                result["status"], result["headers"] = "500 Internal Server Error", [("Content-Type", "application/xml")]
                result["body"] = (b"<?xml version=\"1.0\"?><Error><Code>InternalError</Code><Message>"
                                  + escape(repr(error)).encode() + b"</Message></Error>")
            finally:
                done.set()

        threading.Thread(target=run, daemon=True).start()
        if done.wait(keepalive_after):
            start_response(result["status"], result["headers"])
            return [result["body"]]
        start_response("200 OK", [("Content-Type", "application/xml")])

        def spaces_then_result():
            while not done.wait(5):
                yield b" "
            yield result["body"]
        return spaces_then_result()

    faulted_once = set()
    faulted_once_guard = threading.Lock()

    def first_time(fault, path):
        """Whether `fault` has not yet struck the key at `path` (and now has)."""
        with faulted_once_guard:
            if (fault, path) in faulted_once:
                return False
            faulted_once.add((fault, path))
            return True

    def stored_object(bucket_name, key_name):
        partition, account = s3_models.s3_backends.bucket_accounts.get(bucket_name, ("aws", DEFAULT_ACCOUNT_ID))
        backend = s3_models.s3_backends[account][partition]
        return backend, backend.get_object(bucket_name, key_name)

    def copy_fault(environ):
        """The (status, S3 error code or None for no document) a CopyObject is answered with instead of moto's
        answer, or None."""
        path = environ.get("PATH_INFO", "")
        if "copy-refused" in path:
            return "403 Forbidden", "AccessDenied"
        if "copy-timeout-once" in path and first_time("copy-timeout-once", path):
            return "400 Bad Request", "RequestTimeout"
        if "copy-200-error-once" in path and first_time("copy-200-error-once", path):
            return "200 OK", "InternalError"
        if "copy-200-empty-once" in path and first_time("copy-200-empty-once", path):
            return "200 OK", None
        source = unquote(environ["HTTP_X_AMZ_COPY_SOURCE"].split("?", 1)[0]).lstrip("/")
        if "/" not in source:
            return None
        source_bucket, source_key = source.split("/", 1)
        if "replaced-before-copy" in path:
            backend, _ = stored_object(source_bucket, source_key)
            backend.put_object(source_bucket, source_key, b"another writer's bytes")
        wanted = environ.get("HTTP_X_AMZ_COPY_SOURCE_IF_MATCH")
        if wanted is not None:
            _, current = stored_object(source_bucket, source_key)
            if current is None or wanted not in (current.etag, current.etag.strip('"')):
                return "412 Precondition Failed", "PreconditionFailed"
        return None

    def unserialized_app(environ, start_response):
        query = environ.get("QUERY_STRING", "")
        if (environ["REQUEST_METHOD"] == "PUT" and "partNumber=2&" in query + "&"
                and "part-two-always-fails" in environ.get("PATH_INFO", "")):
            length = int(environ.get("CONTENT_LENGTH") or 0)
            environ["wsgi.input"].read(length)
            start_response("500 Internal Server Error", [("Content-Type", "application/xml")])
            return [b"<?xml version=\"1.0\"?><Error><Code>InternalError</Code><Message>scripted failure</Message></Error>"]
        path = environ.get("PATH_INFO", "")
        if (environ["REQUEST_METHOD"] == "POST" and "uploadId=" in query and "complete-200-error-once" in path
                and first_time("complete-200-error-once", path)):
            environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
            start_response("200 OK", [("Content-Type", "application/xml")])
            return [b" ", b"<?xml version=\"1.0\"?>\n<Error><Code>InternalError</Code>"
                    b"<Message>We encountered an internal error. Please try again.</Message></Error>"]
        if ((environ["REQUEST_METHOD"] == "PUT" and environ.get("HTTP_X_AMZ_COPY_SOURCE")
                and "copy-reply-lost-once" in path and first_time("copy-reply-lost-once", path))
                or (environ["REQUEST_METHOD"] == "POST" and "uploadId=" in query
                    and "complete-reply-lost-then-gone" in path and first_time("complete-reply-lost-then-gone", path))):
            body = moto_app(environ, lambda status, headers, exc_info=None: (lambda data: None))
            try:
                b"".join(body)
            finally:
                getattr(body, "close", lambda: None)()
            # Done by moto; the reply never leaves (the client sees the connection end with no answer).
            environ["werkzeug.socket"].shutdown(socket.SHUT_RDWR)
            start_response("200 OK", [("Content-Type", "application/xml")])
            return [b""]
        if environ["REQUEST_METHOD"] == "POST" and "uploadId=" in query and "complete-reply-lost-then-gone" in path:
            environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
            start_response("404 Not Found", [("Content-Type", "application/xml")])
            return [b"<?xml version=\"1.0\"?><Error><Code>NoSuchUpload</Code><Message>gone</Message></Error>"]
        if environ["REQUEST_METHOD"] == "PUT" and environ.get("HTTP_X_AMZ_COPY_SOURCE"):
            refusal = copy_fault(environ)
            if refusal is not None:
                status, code = refusal
                start_response(status, [("Content-Type", "application/xml")])
                if code is None:
                    return [b"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"]
                return [f"<?xml version=\"1.0\"?><Error><Code>{code}</Code><Message>{code}</Message></Error>".encode()]
        if environ["REQUEST_METHOD"] == "PUT" and "partNumber=" in query and "corrupt-in-transit" in environ.get("PATH_INFO", ""):
            length = int(environ.get("CONTENT_LENGTH") or 0)
            body = bytearray(environ["wsgi.input"].read(length))
            if body:
                body[len(body) // 2] ^= 0xFF
            environ["wsgi.input"] = io.BytesIO(bytes(body))
        if environ["REQUEST_METHOD"] == "GET" and "uploads" in parse_qs(query, keep_blank_values=True) \
                and "uploadId" not in query:
            return listing_uploads(environ, start_response)
        return moto_app(environ, start_response)

    server = make_server("127.0.0.1", args.port, app, threaded=True, fd=args.fd)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()

    endpoint = f"http://127.0.0.1:{args.port}"
    credentials = {"access_key_id": "AKIDUNCHECKED", "secret_access_key": "unchecked-secret"}
    if args.check_signatures:
        import boto3

        iam = boto3.client("iam", endpoint_url=endpoint, region_name="us-east-1",
                           aws_access_key_id="bootstrap", aws_secret_access_key="bootstrap")
        iam.create_user(UserName="curlew")
        iam.put_user_policy(UserName="curlew", PolicyName="allow-all", PolicyDocument=json.dumps(
            {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}))
        key = iam.create_access_key(UserName="curlew")["AccessKey"]
        credentials = {"access_key_id": key["AccessKeyId"], "secret_access_key": key["SecretAccessKey"]}
    with open(os.path.join(args.dir, "credentials.json"), "w") as out:
        json.dump(credentials, out)
    open(os.path.join(args.dir, "ready"), "w").close()
    thread.join()


if __name__ == "__main__":
    sys.exit(main())
