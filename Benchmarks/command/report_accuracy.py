#!/usr/bin/env python3
"""Report of Benchmarks/command/run_accuracy.sh (S8-accuracy): each tool's latency percentiles beside the analytic
ones of the server it ran against. A client whose run failed is reported as failed, never dropped."""
import json
import re
import sys
from pathlib import Path

COLUMNS = ["p50", "p90", "p99", "p99.9", "max"]


def wrk_milliseconds(text):
    value, unit = re.fullmatch(r"([0-9.]+)(us|ms|s|m)", text).groups()
    return float(value) * {"us": 1e-3, "ms": 1.0, "s": 1e3, "m": 6e4}[unit]


def parse(folder, name):
    """requests, requests/s, failed, and percentiles in ms (None where the tool does not report one)."""
    out = folder / f"{name}.out"
    if (folder / f"{name}.failed").exists() or not out.exists():
        return None
    text = out.read_text()
    tool = name.split(".", 1)[1]
    if tool == "curlew-bench":
        summary = json.loads([line for line in text.splitlines() if line.startswith("{")][-1])
        latency = summary["latencyMicroseconds"]
        return {"requests": summary["requests"], "rps": summary["requests"] / summary["durationSeconds"],
                "failed": summary["failed"],
                **{column: latency[key] / 1e3 for column, key in
                   zip(COLUMNS, ["p50", "p90", "p99", "p99_9", "max"])}}
    if tool == "k6":
        metrics = json.loads((folder / f"{name}.json").read_text())["metrics"]
        duration = metrics["http_req_duration"]
        dropped = metrics.get("dropped_iterations", {}).get("count", 0)
        return {"requests": metrics["http_reqs"]["count"], "rps": metrics["http_reqs"]["rate"],
                "failed": metrics["http_req_failed"].get("passes", 0), "dropped": dropped,
                **{column: duration[key] for column, key in
                   zip(COLUMNS, ["med", "p(90)", "p(99)", "p(99.9)", "max"])}}
    if tool == "hey":
        quantiles = {int(q): float(s) * 1e3 for q, s in re.findall(r"^\s*(\d+)% in ([0-9.]+) secs", text, re.M)}
        codes = re.findall(r"^\s*\[(\d+)\]\s+(\d+) responses", text, re.M)
        errors = sum(int(n) for n in re.findall(r"^\s*\[(\d+)\]\s+Get", text, re.M))
        requests = sum(int(n) for _, n in codes)
        return {"requests": requests, "rps": float(re.search(r"Requests/sec:\s+([0-9.]+)", text).group(1)),
                "failed": sum(int(n) for code, n in codes if not code.startswith("2")) + errors,
                "p50": quantiles.get(50), "p90": quantiles.get(90), "p99": quantiles.get(99), "p99.9": None,
                "max": float(re.search(r"Slowest:\s+([0-9.]+) secs", text).group(1)) * 1e3}
    if tool == "wrk":
        quantiles = {int(q): wrk_milliseconds(v) for q, v in re.findall(r"^\s+(\d+)%\s+([0-9.]+(?:us|ms|s|m))$", text, re.M)}
        latency_row = re.search(r"^\s+Latency\s+(\S+)\s+(\S+)\s+(\S+)", text, re.M)
        requests, seconds = re.search(r"(\d+) requests in ([0-9.]+)(m?s)", text).groups()[:2]
        bad = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
        return {"requests": int(requests), "rps": float(re.search(r"Requests/sec:\s+([0-9.]+)", text).group(1)),
                "failed": int(bad.group(1)) if bad else 0,
                "p50": quantiles.get(50), "p90": quantiles.get(90), "p99": quantiles.get(99), "p99.9": None,
                "max": wrk_milliseconds(latency_row.group(3))}
    raise ValueError(name)


def cell(value):
    return "–" if value is None else f"{value:,.1f}"


def table(folder, title, note, analytic, rows):
    out = [f"## {title}", "", note, "",
           "| client | requests | req/s | failed | " + " | ".join(f"{c} ms" for c in COLUMNS) + " |",
           "|---|---:|---:|---:|" + "---:|" * len(COLUMNS),
           "| **analytic** | | | | " + " | ".join(cell(analytic.get(c)) for c in COLUMNS) + " |"]
    for name, label in rows:
        figures = parse(folder, name)
        if figures is None:
            reason = (folder / f"{name}.failed").read_text().strip() if (folder / f"{name}.failed").exists() else "no output"
            out.append(f"| {label} | **FAILED** ({reason}) | | | " + " | " * len(COLUMNS))
            continue
        dropped = f" ({figures['dropped']:,} dropped)" if figures.get("dropped") else ""
        out.append(f"| {label} | {figures['requests']:,}{dropped} | {figures['rps']:,.0f} | {figures['failed']:,} | "
                   + " | ".join(cell(figures.get(c)) for c in COLUMNS) + " |")
    return out + [""]


def main():
    folder = Path(sys.argv[1])
    meta = dict(line.split("=", 1) for line in (folder / "meta.txt").read_text().splitlines() if "=" in line)
    freeze, period = float(meta["freeze_ms"]), float(meta["period_ms"])
    rate, seconds, connections = int(meta["rate"]), int(meta["seconds"]), int(meta["connections"])

    def quantile(q):
        return max(freeze - (1 - q) * period, 0.0)

    out = ["# S8-accuracy: latency against a server whose distribution is known", "",
           f"- date: {meta['date']}; machine: {meta['machine']}; load average after: {meta['loadavg']}",
           f"- server: curlew-loopback-server (SwiftNIO) on CPU {meta['server_cpu']}; clients under "
           f"`taskset -c {meta['client_cpu']}`; {meta['versions']}",
           f"- raw output in `Benchmarks/{meta['raw_dir']}/` (git-ignored)", ""]
    out += table(folder, f"Open model: {rate:,} requests/s for {seconds} s against a server frozen {freeze:.0f} ms of "
                 f"every {period:.0f} ms",
                 f"A request that arrives during a freeze waits for the rest of it: the q-quantile is {freeze:.0f} − "
                 f"(1 − q) × {period:.0f} ms where positive. curlew bench times each request from its scheduled "
                 f"start (`--rate {rate} -c {connections}`); k6's constant-arrival-rate executor ({connections} VUs) "
                 f"from its send; hey `-c {connections} -q {rate / connections:g}` paces each worker, which waits out a "
                 "freeze instead of sending on schedule. The closed models below (4 connections, as fast as answers "
                 "come) see each freeze once per connection: coordinated omission (wrk 4 adds synthetic samples after the run "
                 "to correct for it).",
                 {c: quantile(q) for c, q in zip(COLUMNS, [0.5, 0.9, 0.99, 0.999, 1.0])},
                 [("open.curlew-bench", "curlew bench --rate (open)"), ("open.k6", "k6 constant-arrival-rate (open)"),
                  ("open.hey", "hey -q (paced workers)"), ("closed.curlew-bench", "curlew bench -c 4 (closed)"),
                  ("closed.k6", "k6 constant-vus 4 (closed)"), ("closed.hey", "hey -c 4 (closed)"),
                  ("closed.wrk", "wrk -c4 --latency (closed)")])
    out += table(folder, "Closed model: a fixed 50 ms delay at 16 connections for 10 s",
                 "Every request takes 50 ms plus the loopback's time: each tool should report about 50 ms at every "
                 "percentile and 16 / 0.05 = 320 requests/s.",
                 {c: 50.0 for c in COLUMNS},
                 [("delay.curlew-bench", "curlew bench -c 16"), ("delay.k6", "k6 constant-vus 16"),
                  ("delay.hey", "hey -c 16"), ("delay.wrk", "wrk -c16 --latency")])
    print("\n".join(out))


if __name__ == "__main__":
    main()
