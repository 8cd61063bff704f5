#!/usr/bin/env python3
"""moto's S3 (and IAM) server on an inherited listening socket, for Curlew's upload tests.

Usage (under supervise.py --listen 1):
    moto_s3.py --fd {fd0} --port {port0} --dir DIR [--check-signatures]

--check-signatures  moto verifies every SigV4 signature after INITIAL_NO_AUTH_ACTION_COUNT=3 unsigned calls,
                    which this script spends itself (boto3: an IAM user, an allow-all inline policy, an access
                    key). The key is written to DIR/credentials.json; without the flag the file holds dummy keys.
DIR/requests.log    one line per request, werkzeug's access-log format: the server-side count of every request.
DIR/ready           written last: the server answers and the credentials exist.

Faults: a part upload (PUT with partNumber) whose key contains "corrupt-in-transit" has one byte of its body
flipped before moto stores it, as a bad network or proxy would; the client's checksums must catch it. Part 2 of a
key containing "part-two-always-fails" is answered 500 InternalError every time (and logged like any request).
"""

import argparse
import io
import json
import logging
import os
import re
import sys
import threading


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

    def app(environ, start_response):
        query = environ.get("QUERY_STRING", "")
        if (environ["REQUEST_METHOD"] == "PUT" and "partNumber=2&" in query + "&"
                and "part-two-always-fails" in environ.get("PATH_INFO", "")):
            length = int(environ.get("CONTENT_LENGTH") or 0)
            environ["wsgi.input"].read(length)
            start_response("500 Internal Server Error", [("Content-Type", "application/xml")])
            return [b"<?xml version=\"1.0\"?><Error><Code>InternalError</Code><Message>scripted failure</Message></Error>"]
        if environ["REQUEST_METHOD"] == "PUT" and "partNumber=" in query and "corrupt-in-transit" in environ.get("PATH_INFO", ""):
            length = int(environ.get("CONTENT_LENGTH") or 0)
            body = bytearray(environ["wsgi.input"].read(length))
            if body:
                body[len(body) // 2] ^= 0xFF
            environ["wsgi.input"] = io.BytesIO(bytes(body))
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
