#!/usr/bin/env python3
"""Turns one run.sh results folder (results/raw/<stamp>) into the Markdown report.

    python3 Benchmarks/report.py Benchmarks/results/raw/<stamp> [more folders] > Benchmarks/results/latest.md

Reads manifest.tsv (one line per client run), meta.txt, and per run: <prefix>.out (the client's
JSON line, or wrk / h2load output), <prefix>.err and <prefix>.time (`/usr/bin/time -v`).
A run counts only if it exited 0, did exactly the requested number of requests and had no
failures; a client with any failed run is reported as failed, never dropped.
"""
import csv
import json
import re
import shlex
import statistics
import sys
from pathlib import Path

SCENARIOS = {
    "s1-c1": ("S1", "GET /small, HTTP/1.1 keep-alive, c = 1, client pinned", "n_c1"),
    "s1-c16": ("S1", "GET /small, HTTP/1.1 keep-alive, c = 16, client pinned", "n_c16"),
    "s1-c64": ("S1", "GET /small, HTTP/1.1 keep-alive, c = 64, client pinned", "n_c64"),
    "s1-c64-unpinned": ("S1", "GET /small, HTTP/1.1 keep-alive, c = 64, client unpinned (both cores; Curlew with --loops 2)", "n_c64"),
    "s2-h2-c64": ("S2", "GET /small, HTTP/2 over TLS multiplexed on one connection, c = 64 streams, client pinned", "n_h2"),
    "s2-h2-hypercorn-c64": ("S2", "GET /small, HTTP/2 over TLS against hypercorn (PyPI, one process, its defaults: a GOAWAY "
                            "after 1,000 requests per connection), c = 64 streams, client pinned", "n_h2_hypercorn"),
    "s3-json-c16": ("S3", "GET /json (gzip) decoded into a Decodable model, c = 16, client pinned; "
                    "curlew-engine here is the engine with the same JSONDecoder", "n_c16"),
    "s10-openapi-c16": ("S10", "GET /small through a swift-openapi-runtime ClientTransport (`send`, body collected), "
                       "c = 16, client pinned", "n_c16"),
}
# Upload scenarios: one request of one file per run; MB/s of the file's bytes (input bytes for S6).
UPLOADS = {
    "s4-upload": ("S4", "POST /upload of a file (1 GiB in a full run), raw streamed body, c = 1, client pinned", "raw-libcurl"),
    "s5-multipart": ("S5", "POST /upload of the same file as multipart/form-data (fields a=1, b=2, then the file), "
                     "c = 1, client pinned", "curl-F"),
    "s6-gzip": ("S6", "POST /upload of JSON lines (1 GiB in a full run), gzip level 1 on the fly (Content-Encoding: gzip), "
                "c = 1, client pinned; MB/s of input", "zlib"),
}
UPLOAD_ORDER = ["raw-libcurl", "curlew-engine", "curl-T", "curl-data-binary", "curl-F", "zlib",
                "gzip-curl", "gzip-curl-T", "async-http-client", "urlsession"]
UPLOAD_LABEL = {
    "raw-libcurl": {"s4-upload": "raw-libcurl (read callback)", "s5-multipart": "raw-libcurl (curl_mime)",
                    "s6-gzip": "raw-libcurl (read callback deflating with zlib)"},
    "curlew-engine": {"s4-upload": "curlew-engine (`.file`)", "s5-multipart": "curlew-engine (`MultipartForm`)",
                      "s6-gzip": "curlew-engine (`.file` + `.gzip(level: 1)`)"},
    "curl-T": "`curl -T file` (PUT)",
    "curl-data-binary": "`curl --data-binary @file`",
    "curl-F": "`curl -F a=1 -F b=2 -F file=@file`",
    "zlib": "zlib alone: deflate level 1, gzip wrapper, no network",
    "gzip-curl": "`gzip -1 -c file \\| curl --data-binary @-` (pipeline wall time)",
    "gzip-curl-T": "`gzip -1 -c file \\| curl -T -` (streamed, chunked; pipeline wall time)",
    "async-http-client": "async-http-client (`.stream` of 64 KiB file chunks)",
    "urlsession": "urlsession (`upload(for:fromFile:)`)",
}
BUSY_PERCENT = 20
CLIENT_ORDER = [
    "raw-libcurl", "curlew-engine", "curlew-engine-socket", "curlew-route", "curlew-engine-plain", "curlew-dispatch",
    "async-http-client", "urlsession", "wrk", "h2load", "curlew-openapi", "ahc-openapi",
]
CLIENT_LABEL = {
    "raw-libcurl": "raw-libcurl (C multi loop)",
    "curlew-engine": "curlew-engine (executor)",
    "curlew-engine-socket": "curlew-engine (executor, socket-action driver)",
    "curlew-route": "curlew-route (Route + HTTPProvider, executor)",
    "curlew-engine-plain": "curlew-engine (plain tasks)",
    "curlew-dispatch": "curlew-dispatch",
    "async-http-client": "async-http-client",
    "urlsession": "urlsession",
    "wrk": "wrk -t1 (ceiling, duration-based)",
    "h2load": "h2load -c1 -m64 -t1 (ceiling)",
    "curlew-openapi": "curlew-openapi (CurlewTransport, executor)",
    "ahc-openapi": "ahc-openapi (AsyncHTTPClientTransport 1.5.0)",
}


def read_meta(folder):
    meta = {}
    path = folder / "meta.txt"
    if path.exists():
        for line in path.read_text().splitlines():
            key, _, value = line.partition("=")
            meta[key] = value
    return meta


def parse_time(path):
    """Fields of `/usr/bin/time -v`."""
    fields = {}
    if not path.exists():
        return fields
    for line in path.read_text(errors="replace").splitlines():
        line = line.strip()
        key, sep, value = line.rpartition(": ")
        if not sep:
            continue
        if key == "User time (seconds)":
            fields["user"] = float(value)
        elif key == "System time (seconds)":
            fields["sys"] = float(value)
        elif key == "Voluntary context switches":
            fields["vcs"] = int(value)
        elif key == "Involuntary context switches":
            fields["ics"] = int(value)
        elif key == "Maximum resident set size (kbytes)":
            fields["rss_kb"] = int(value)
        elif key == "Exit status":
            fields["exit"] = int(value)
        elif key.startswith("Elapsed (wall clock) time"):
            seconds = 0.0
            for part in value.split(":"):
                seconds = seconds * 60 + float(part)
            fields["wall"] = seconds
    return fields


def first_line(path, limit=160):
    if not path.exists():
        return ""
    for line in path.read_text(errors="replace").splitlines():
        line = line.strip()
        if line and not line.startswith("Command exited with"):
            return line[:limit]
    return ""


def requested_count(command):
    args = shlex.split(command)
    for index, arg in enumerate(args):
        if arg == "--requests" and index + 1 < len(args):
            return int(args[index + 1])
        if arg.startswith("-n") and len(arg) > 2 and arg[2:].isdigit():
            return int(arg[2:])
    return None


def parse_run(row, clk_tck):
    """One run -> dict with ok, reason, requests, seconds, rps, cpu, ctx, rss_kb."""
    prefix = Path(row["prefix"])
    client = row["client"]
    run = {"ok": False, "reason": ""}
    rc = int(row["exit"]) if row["exit"] else -1
    timing = parse_time(Path(str(prefix) + ".time"))
    out_path = Path(str(prefix) + ".out")
    err_path = Path(str(prefix) + ".err")
    out = out_path.read_text(errors="replace") if out_path.exists() else ""
    expected = requested_count(row["command"])

    if row["status"] == "timeout":
        run["reason"] = "timed out"
        return run

    if client == "wrk":
        match = re.search(r"(\d+) requests in ([\d.]+)(us|ms|s|m)", out)
        rps = re.search(r"Requests/sec:\s+([\d.]+)", out)
        if not match or not rps:
            run["reason"] = f"exit {rc}: {first_line(err_path) or 'no wrk output'}"
            return run
        scale = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0}[match.group(3)]
        run["requests"] = int(match.group(1))
        run["seconds"] = float(match.group(2)) * scale
        run["rps"] = float(rps.group(1))
        bad = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
        sock = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
        failures = (int(bad.group(1)) if bad else 0) + (sum(int(g) for g in sock.groups()) if sock else 0)
        run["failures"] = failures
    elif client == "h2load":
        fin = re.search(r"finished in ([\d.]+)(us|ms|s), ([\d.]+) req/s", out)
        req = re.search(r"requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, (\d+) failed, (\d+) errored", out)
        codes = re.search(r"status codes: (\d+) 2xx", out)
        if not fin or not req:
            run["reason"] = f"exit {rc}: {first_line(err_path) or first_line(out_path) or 'no h2load output'}"
            return run
        scale = {"us": 1e-6, "ms": 1e-3, "s": 1.0}[fin.group(2)]
        run["seconds"] = float(fin.group(1)) * scale
        run["rps"] = float(fin.group(3))
        run["requests"] = int(req.group(3))
        ok_2xx = int(codes.group(1)) if codes else 0
        run["failures"] = int(req.group(5)) + int(req.group(6)) + (run["requests"] - ok_2xx)
    else:
        report = last_json_line(out)
        if report is None:
            run["reason"] = f"exit {rc}: {first_line(err_path) or 'no JSON line'}"
            return run
        run["requests"] = int(report["requests"])
        run["failures"] = int(report["failures"])
        run["seconds"] = float(report["seconds"])
        run["rps"] = run["requests"] / run["seconds"] if run["seconds"] > 0 else 0.0

    if run.get("failures", 0) > 0:
        run["reason"] = f"exit {rc}, {run['failures']} failed requests: {first_line(err_path)}"
        return run
    if rc != 0:
        run["reason"] = f"exit {rc}: {first_line(err_path)}"
        return run
    if expected is not None and run["requests"] != expected:
        run["reason"] = f"{run['requests']} requests done, {expected} asked"
        return run
    if not timing or "user" not in timing:
        run["reason"] = "no /usr/bin/time output"
        return run

    requests = max(run["requests"], 1)
    cpu = timing["user"] + timing["sys"]
    run["cpu_us_per_req"] = cpu / requests * 1e6
    run["ctx_per_req"] = (timing.get("vcs", 0) + timing.get("ics", 0)) / requests
    run["rss_mib"] = timing.get("rss_kb", 0) / 1024.0
    # CPU that neither the client nor nginx used while the run lasted: other processes competing.
    if row.get("busy_ticks") and row.get("nginx_ticks") and timing.get("wall"):
        foreign = int(row["busy_ticks"]) / clk_tck - cpu - int(row["nginx_ticks"]) / clk_tck
        run["other_pct"] = max(foreign, 0.0) / timing["wall"] * 100
    if row.get("connections"):
        run["connections"] = int(row["connections"])
        run["served"] = int(row["served"])
    run["ok"] = True
    return run


def last_json_line(out):
    """The last line of a client's stdout that parses as a JSON object (the clients print their report last)."""
    report = None
    for line in out.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                report = json.loads(line)
            except json.JSONDecodeError:
                pass
    return report


def parse_upload_run(row, clk_tck):
    """One upload run -> dict with ok, reason, mbps, seconds, rss_mib, cpu_s, nginx_pct, other_pct, server."""
    prefix = Path(row["prefix"])
    run = {"ok": False, "reason": ""}
    if row["status"] == "timeout":
        run["reason"] = "timed out"
        return run
    rc = int(row["exit"]) if row["exit"] else -1
    timing = parse_time(Path(str(prefix) + ".time"))
    out_path = Path(str(prefix) + ".out")
    err_path = Path(str(prefix) + ".err")
    out = out_path.read_text(errors="replace") if out_path.exists() else ""
    report = last_json_line(out)
    if report is None:
        run["reason"] = f"exit {rc}: {first_line(err_path) or 'no JSON line'}"
        return run
    if int(report.get("failures", 1)) != 0 or rc != 0:
        run["reason"] = f"exit {rc}: {first_line(err_path)}"
        return run
    if not timing or "user" not in timing:
        run["reason"] = "no /usr/bin/time output"
        return run
    run["seconds"] = float(report["seconds"])
    run["bytes"] = int(report["bytes"])
    run["mbps"] = run["bytes"] / run["seconds"] / 1e6 if run["seconds"] > 0 else 0.0
    run["server"] = int(report.get("server_bytes", -1))
    run["compressed"] = int(report.get("compressed_bytes", -1))
    run["cpu_s"] = timing["user"] + timing["sys"]
    run["rss_mib"] = timing.get("rss_kb", 0) / 1024.0
    if timing.get("wall") and row.get("nginx_ticks"):
        run["nginx_pct"] = int(row["nginx_ticks"]) / clk_tck / timing["wall"] * 100
    if row.get("busy_ticks") and row.get("nginx_ticks") and timing.get("wall"):
        foreign = int(row["busy_ticks"]) / clk_tck - run["cpu_s"] - int(row["nginx_ticks"]) / clk_tck
        run["other_pct"] = max(foreign, 0.0) / timing["wall"] * 100
    run["ok"] = True
    return run


def upload_section(scenario, clients, meta):
    sid, title, reference = UPLOADS[scenario]
    out = [f"## {sid}: {title}", ""]
    summaries = {}
    noisy = {client: sum(1 for status, _ in runs if status == "noisy") for client, runs in clients.items()}
    clients = {client: [(status, run) for status, run in runs if status != "noisy"] for client, runs in clients.items()}
    for client, runs in clients.items():
        if runs and all(status == "ran" and run["ok"] for status, run in runs):
            ok = [run for _, run in runs]
            summaries[client] = {
                "mbps": statistics.median(run["mbps"] for run in ok),
                "min": min(run["mbps"] for run in ok),
                "max": max(run["mbps"] for run in ok),
                "rss": statistics.median(run["rss_mib"] for run in ok),
                "rss_max": max(run["rss_mib"] for run in ok),
                "cpu": statistics.median(run["cpu_s"] for run in ok),
                "nginx": statistics.median(run["nginx_pct"] for run in ok) if all("nginx_pct" in r for r in ok) else None,
                "other": statistics.median(run["other_pct"] for run in ok) if all("other_pct" in r for r in ok) else None,
                "server": statistics.median(run["server"] for run in ok),
                "bytes": ok[0]["bytes"],
                "compressed": max(run["compressed"] for run in ok),
                "count": len(ok),
            }
    ref = summaries.get(reference)
    curlew = summaries.get("curlew-engine")
    size = next((s["bytes"] for s in summaries.values()), None)
    if size:
        out.append(f"Input: {size:,} bytes; MB = 10^6 bytes; one request per run, medians of "
                   f"{meta.get('upload_reps', '?')} runs.")
        out.append("")
    out.append(f"| client | MB/s (median) | min–max | peak RSS MiB (median; max) | client CPU s | MB/s ÷ {reference} "
               "| CPU ÷ " + reference + " | MB/s ÷ curlew | nginx CPU % | body bytes nginx read | runs | other CPU % |")
    out.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    names = [c for c in UPLOAD_ORDER if c in clients] + [c for c in clients if c not in UPLOAD_ORDER]
    for client in names:
        runs = clients[client]
        label = UPLOAD_LABEL.get(client, client)
        if isinstance(label, dict):
            label = label.get(scenario, client)
        if client in summaries:
            x = summaries[client]
            cells = [
                label, fmt_int(x["mbps"]), f"{fmt_int(x['min'])}–{fmt_int(x['max'])}",
                f"{x['rss']:.1f}; {x['rss_max']:.1f}", f"{x['cpu']:.2f}",
                fmt_ratio(x["mbps"] / ref["mbps"] if ref else None),
                fmt_ratio(x["cpu"] / ref["cpu"] if ref and ref["cpu"] > 0 else None),
                fmt_ratio(x["mbps"] / curlew["mbps"] if curlew else None),
                "–" if client == "zlib" or x["nginx"] is None else f"{x['nginx']:.0f}",
                "– (no network)" if client == "zlib" else f"{x['server']:,.0f}",
                f"{x['count']}/{len(runs)}" + (f" (+{noisy[client]} noisy)" if noisy.get(client) else ""),
                "?" if x["other"] is None else f"{x['other']:.0f}",
            ]
        elif any(status == "skipped" for status, _ in runs):
            note = next(run["reason"] for status, run in runs if status == "skipped")
            cells = [label, note.replace("|", "\\|")] + [""] * 10
        else:
            failed = [run for status, run in runs if not run["ok"]]
            reason = failed[0]["reason"].replace("|", "\\|") if failed else "?"
            cells = [label, f"**FAILED** in {len(failed)}/{len(runs)} runs: {reason}"] + [""] * 8
            cells += [f"{len(runs) - len(failed)}/{len(runs)}", ""]
        out.append("| " + " | ".join(cells) + " |")
    out.append("")
    if scenario == "s6-gzip" and "zlib" in summaries:
        z = summaries["zlib"]["compressed"]
        same = [c for c in ("curlew-engine", "raw-libcurl") if c in summaries and summaries[c]["server"] == z]
        out.append(f"- zlib level 1 compresses the input to {z:,} bytes ({z / summaries['zlib']['bytes'] * 100:.1f}%)"
                   + (f"; nginx read exactly that many from {' and '.join(same)}" if same else "") + ".")
        out.append("")
    return out


def fmt_int(value):
    return f"{value:,.0f}"


def fmt_ratio(value):
    return "–" if value is None else f"{value:.2f}"


def summarize(runs):
    ok = [run for run in runs if run["ok"]]
    rps = [run["rps"] for run in ok]
    return {
        "rps": statistics.median(rps),
        "min": min(rps),
        "max": max(rps),
        "cpu": statistics.median(run["cpu_us_per_req"] for run in ok),
        "ctx": statistics.median(run["ctx_per_req"] for run in ok),
        "rss": statistics.median(run["rss_mib"] for run in ok),
        "other": statistics.median(run["other_pct"] for run in ok) if all("other_pct" in run for run in ok) else None,
        "count": len(ok),
        "connections": statistics.median(run["connections"] for run in ok) if all("connections" in run for run in ok) else None,
    }


def main():
    # More than one folder: each later folder adds only the scenarios the earlier ones lack (meta from the
    # first), e.g. scenarios measured in separate sittings.
    folder = Path(sys.argv[1])
    meta = read_meta(folder)
    rows = []
    for extra in sys.argv[1:]:
        have = {row["scenario"] for row in rows}
        rows += [row for row in csv.DictReader(open(Path(extra) / "manifest.tsv"), delimiter="\t")
                 if row["scenario"] not in have]
    if len(sys.argv) > 2:
        meta["raw_dir"] = ", ".join("results/raw/" + Path(extra).name for extra in sys.argv[1:])
    clk_tck = int(meta.get("clk_tck", "100"))

    # scenario -> client -> list of (status, run)
    parsed = []
    results = {}
    for row in rows:
        entry = results.setdefault(row["scenario"], {}).setdefault(row["client"], [])
        if row["status"] == "skipped":
            entry.append(("skipped", {"ok": False, "reason": row["note"]}))
        elif row["scenario"] in UPLOADS:
            run = parse_upload_run(row, clk_tck)
            parsed.append(run)
            entry.append(("noisy" if row["status"] == "noisy" else "ran", run))
        else:
            run = parse_run(row, clk_tck)
            parsed.append(run)
            entry.append(("ran", run))

    loads = [float(row["load"]) for row in rows if row.get("load")]
    load_range = f"{min(loads):.2f}–{max(loads):.2f}" if loads else "?"

    out = []
    out.append("# Curlew benchmarks: side by side")
    out.append("")
    out.append(f"- date: {meta.get('date', '?')}")
    out.append(f"- machine: {meta.get('nproc', '?')} CPUs ({meta.get('cpu', '?')}), {meta.get('uname', '?')}")
    out.append(f"- load average (1/5/15 min): {meta.get('loadavg', '?')}; 1-min load at the start of each run: {load_range}")
    others = [run["other_pct"] for run in parsed if "other_pct" in run]
    noisy = [value for value in others if value > BUSY_PERCENT]
    if noisy:
        out.append(f"- **warning: the machine was busy**: in {len(noisy)} of {len(others)} runs (upload runs marked noisy "
                   "and repeated included) other processes used more "
                   f"than {BUSY_PERCENT}% of a CPU (up to {max(noisy):.0f}%; column 'other CPU %'), so req/s there is "
                   "unreliable; CPU µs/request is the more robust figure. Rerun on a quiet machine.")
    out.append(f"- libcurl: {meta.get('libcurl', '?')}")
    out.append(f"- server: nginx {meta.get('nginx', '?')}, 1 worker on CPU {meta.get('nginx_cpu', '0')}, "
               f"access_log off, keepalive_requests 10000000 (Benchmarks/nginx/nginx.sh)")
    out.append(f"- toolchain: {meta.get('swift', '?')}; {meta.get('wrk', '?')}; {meta.get('h2load', '?')}")
    out.append(f"- command: `{meta.get('command', '?')}`")
    only_uploads = all(row["scenario"] in UPLOADS for row in rows)
    reps = meta.get("upload_reps", "?") if only_uploads else meta.get("reps", "?")
    out.append(f"- method: {reps} repetitions, clients alternating within each repetition; "
               f"medians; every client does the same N requests at the same concurrency against the same server; "
               f"pinned = client under `taskset -c {meta.get('client_cpu', '1')}`; "
               f"CPU = user + sys and context switches (voluntary + involuntary) from `/usr/bin/time -v` "
               f"for the whole process, divided by N")
    out.append(f"- raw per-run output: `Benchmarks/{meta.get('raw_dir', '?')}/` (git-ignored)")
    if meta.get("curlew_build") not in (None, "ok"):
        out.append("- **bench-curlew did not build** (CurlewEngine); its rows are marked skipped")
    out.append("")

    order = [scenario for scenario in list(SCENARIOS) + list(UPLOADS) if scenario in results]
    order += [scenario for scenario in results if scenario not in SCENARIOS and scenario not in UPLOADS]
    for scenario in order:
        if scenario in UPLOADS:
            out += upload_section(scenario, results[scenario], meta)
            continue
        sid, title, n_key = SCENARIOS.get(scenario, (scenario, scenario, ""))
        n = meta.get(n_key, "?")
        clients = results[scenario]
        out.append(f"## {sid}: {title}")
        out.append("")
        extra = f"N = {int(n):,} requests per run" if n.isdigit() else ""
        if "wrk" in clients:
            extra += f"; wrk runs {meta.get('wrk_seconds', '?')} s instead"
        out.append(extra)
        out.append("")
        summaries = {}
        for client, runs in clients.items():
            if all(status == "ran" and run["ok"] for status, run in runs) and runs:
                summaries[client] = summarize([run for _, run in runs])
        raw = summaries.get("raw-libcurl")
        curlew = summaries.get("curlew-engine")
        out.append("| client | req/s (median) | min–max | µs CPU/req | ctx sw/req | peak RSS MiB "
                   "| req/s ÷ raw | CPU/req ÷ raw | req/s ÷ curlew | CPU/req ÷ curlew | conns | runs | other CPU % |")
        out.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        names = [c for c in CLIENT_ORDER if c in clients] + [c for c in clients if c not in CLIENT_ORDER]
        # Variants of the engine from other commits (BENCH_CURLEW_VARIANTS) right below curlew-engine.
        variants = [c for c in names if c.startswith("curlew-at-")]
        names = [c for c in names if c not in variants]
        if variants:
            index = names.index("curlew-engine") + 1 if "curlew-engine" in names else len(names)
            names[index:index] = variants
        for client in names:
            runs = clients[client]
            label = CLIENT_LABEL.get(client, client if not client.startswith("curlew-at-") else f"{client} (executor, BENCH_CURLEW_VARIANTS)")
            if client in summaries:
                s = summaries[client]
                cells = [
                    label, fmt_int(s["rps"]), f"{fmt_int(s['min'])}–{fmt_int(s['max'])}",
                    f"{s['cpu']:.1f}", f"{s['ctx']:.2f}", f"{s['rss']:.1f}",
                    fmt_ratio(s["rps"] / raw["rps"] if raw else None),
                    fmt_ratio(s["cpu"] / raw["cpu"] if raw else None),
                    fmt_ratio(s["rps"] / curlew["rps"] if curlew else None),
                    fmt_ratio(s["cpu"] / curlew["cpu"] if curlew else None),
                    "?" if s["connections"] is None else f"{s['connections']:.0f}",
                    f"{s['count']}/{len(runs)}",
                    "?" if s["other"] is None else f"{s['other']:.0f}",
                ]
            elif any(status == "skipped" for status, _ in runs):
                note = next(run["reason"] for status, run in runs if status == "skipped")
                cells = [label, f"skipped: {note}"] + [""] * 11
            else:
                failed = [run for status, run in runs if not run["ok"]]
                reason = failed[0]["reason"].replace("|", "\\|") if failed else "?"
                cells = [label, f"**FAILED** in {len(failed)}/{len(runs)} runs: {reason}"] + [""] * 9
                cells.append(f"{len(runs) - len(failed)}/{len(runs)}")
                cells.append("")
            out.append("| " + " | ".join(cells) + " |")
        out.append("")
        for client in names:
            if client == "wrk":
                continue  # wrk stops on a deadline: requests in flight at the end are served but not counted
            mismatched = [run for status, run in clients[client]
                          if run.get("ok") and "served" in run and run["served"] != run["requests"]]
            for run in mismatched:
                out.append(f"- note: {client}: nginx served {run['served']:,} requests, the client counted {run['requests']:,}")
        if any(line.startswith("- note:") for line in out[-len(names):]):
            out.append("")

    out.append("## Notes")
    out.append("")
    out.append("- curlew-engine: `bench-curlew --mode executor` (request tasks prefer the loop thread's TaskExecutor); "
               "curlew-engine (plain tasks): `--mode plain` (same thread loop, ordinary tasks); "
               "curlew-dispatch: `--mode dispatch` (the Dispatch event loop).")
    out.append("- raw-libcurl: `Benchmarks/raw-libcurl/bench_curl.c`, curl_multi_perform + info_read + curl_multi_poll, "
               "C easy handles re-added at once; the limit for anything on libcurl.")
    out.append("- wrk runs for a fixed duration (its req/s is its own count ÷ its own time; CPU/req and ctx sw/req "
               "divide by the requests it completed). h2load uses the same N on one connection with 64 streams.")
    out.append("- urlsession is skipped for HTTPS: swift-corelibs-foundation on Linux has no way to trust a private CA "
               "(`URLSessionCertificateAuthorityInfoFile` is read on Android only, there is no server-trust challenge, "
               "and Debian's libcurl uses its compiled-in CA bundle, so `SSL_CERT_FILE` does not apply).")
    out.append("- urlsession over HTTP/1.1 at c > 1 opens a new connection for a large share of its requests (see conns): "
               "swift-corelibs-foundation never sets CURLMOPT_MAXCONNECTS (a TODO in its `_MultiHandle`), and it adds one "
               "easy handle per task, so libcurl's default connection cache (sized from the handles currently added) "
               "is likely too small to keep C connections; measured as it behaves.")
    out.append("- CPU, context switches and RSS are for the whole client process (start-up included), as `/usr/bin/time -v` reports them.")
    out.append("- conns: TCP connections nginx accepted during the run (stub_status), median; "
               "a mismatch with the concurrency means a client did not keep its connections alive or multiplexed.")
    out.append("- other CPU %: machine-wide busy CPU (/proc/stat) during the run minus the client's and nginx's own CPU, "
               "as % of one CPU (median of the runs). Near 0 on a quiet machine; when it is high, other processes "
               "competed with the run and its req/s is not to be trusted.")
    if any(scenario in UPLOADS for scenario in results):
        out.append("- Uploads (S4-S6): one request of one file per run, client pinned to one core, nginx to the other. "
                   "MB/s = file bytes (S6: uncompressed input bytes) ÷ seconds, MB = 10^6 bytes. Seconds are measured "
                   "inside each client, from the start of the request to the complete response (curl: its own "
                   "`%{time_total}`), except the gzip pipelines, timed as a whole by `uploads/cli_upload.sh` "
                   "(with `--data-binary @-` curl reads all of stdin before its timer starts). Peak RSS and client CPU "
                   "(user + sys) are the whole process's from `/usr/bin/time -v` (a pipeline: the largest of its processes; "
                   "CPU: all of them).")
        out.append("- The server reads every body byte before it answers: nginx's `/upload` buffers the whole body "
                   "(`proxy_request_buffering on`, to a file in /dev/shm) and only then asks its local upstream, which "
                   "echoes the body size nginx counted (`$content_length`, the decoded size for chunked bodies); every run "
                   "fails unless that count matches what the client sent. A bare `return 200` would answer first and "
                   "discard the body: AsyncHTTPClient then stops sending after a few ms. The cost: nginx needs about "
                   "0.65 s of CPU per GiB for it, so when 'nginx CPU %' is near 100 the server, not the client, sets "
                   "the MB/s; 'client CPU s' is then the figure that compares the clients.")
        out.append("- Noisy runs: an upload run during which other processes took more than 20% of a CPU is marked noisy "
                   "and run again (up to 3 times, `BENCH_UPLOAD_RETRIES`); noisy runs are left out of the medians and "
                   "counted as '+N noisy'. A run that is still noisy after the retries counts (see 'other CPU %').")
        if meta.get("upload_verified"):
            out.append(f"- Byte-for-byte check of Curlew's bodies (WebDAV PUT, then `cmp`): {meta['upload_verified']}.")
        out.append("- n/a: AsyncHTTPClient and URLSession have no multipart forms and no request compression. "
                   "`curl --data-binary @file` is left out: curl 7.88 reads the file into memory and refuses 1 GiB "
                   "(\"out of memory\").")
        out.append("")
    print("\n".join(out))


if __name__ == "__main__":
    main()
