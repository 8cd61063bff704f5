#!/usr/bin/env python3
"""boto3, the independent verifier of Curlew's S3 uploads.

Usage: s3_inspect.py ENDPOINT COMMAND BUCKET   (credentials in AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY)
    create-bucket   creates BUCKET
    inventory       prints a JSON object: key -> {size, sha256 (of the bytes downloaded back), content_type,
                    metadata, storage_class, etag}
    uploads         prints a JSON list of the multipart uploads in progress (key, upload id)
    create-upload KEY
                    starts a multipart upload of KEY and sends no part, as a run stopped before its first part
                    would leave it; prints {"upload_id": ...}
    delete-bucket   deletes every object and open multipart upload, then BUCKET (benchmarks free moto's memory)
    put KEY FILE PART_SIZE CHECKSUM
                    stores FILE as KEY the way another tool would: boto3's upload_file, in parts of PART_SIZE bytes
                    above that size, with CHECKSUM "sha256" (x-amz-checksum-sha256) or "none" (ETag only)
"""

import concurrent.futures
import hashlib
import json
import os
import sys

import boto3
from botocore.config import Config


def main():
    endpoint, command, bucket = sys.argv[1:4]
    s3 = boto3.client("s3", endpoint_url=endpoint, region_name=os.environ.get("AWS_REGION", "us-east-1"),
                      config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 2}, max_pool_connections=16))
    if command == "create-bucket":
        s3.create_bucket(Bucket=bucket)
        print("{}")
    elif command == "inventory":
        items = [item for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket)
                 for item in page.get("Contents", [])]

        def describe(item):
            obj = s3.get_object(Bucket=bucket, Key=item["Key"])
            digest = hashlib.sha256()
            for chunk in obj["Body"].iter_chunks(1 << 20):
                digest.update(chunk)
            return item["Key"], {
                "size": item["Size"],
                "sha256": digest.hexdigest(),
                "content_type": obj.get("ContentType"),
                "metadata": obj.get("Metadata", {}),
                "storage_class": item.get("StorageClass"),
                "etag": obj.get("ETag"),
            }

        # boto3 clients are thread-safe; eight downloads at a time keep a 2,000-object check short.
        with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
            print(json.dumps(dict(pool.map(describe, items))))
    elif command == "delete-bucket":
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket):
            keys = [{"Key": item["Key"]} for item in page.get("Contents", [])]
            if keys:
                s3.delete_objects(Bucket=bucket, Delete={"Objects": keys, "Quiet": True})
        for upload in s3.list_multipart_uploads(Bucket=bucket).get("Uploads", []):
            s3.abort_multipart_upload(Bucket=bucket, Key=upload["Key"], UploadId=upload["UploadId"])
        s3.delete_bucket(Bucket=bucket)
        print("{}")
    elif command == "put":
        from boto3.s3.transfer import TransferConfig
        key, path, part_size, checksum = sys.argv[4:8]
        config = TransferConfig(multipart_threshold=int(part_size), multipart_chunksize=int(part_size))
        extra = {"ChecksumAlgorithm": "SHA256"} if checksum == "sha256" else {}
        s3.upload_file(path, bucket, key, Config=config, ExtraArgs=extra)
        print(json.dumps({"etag": s3.head_object(Bucket=bucket, Key=key)["ETag"]}))
    elif command == "create-upload":
        upload = s3.create_multipart_upload(Bucket=bucket, Key=sys.argv[4])
        print(json.dumps({"upload_id": upload["UploadId"]}))
    elif command == "uploads":
        uploads = s3.list_multipart_uploads(Bucket=bucket).get("Uploads", [])
        print(json.dumps([{"key": u["Key"], "upload_id": u["UploadId"]} for u in uploads]))
    else:
        sys.exit(f"unknown command {command}")


if __name__ == "__main__":
    main()
