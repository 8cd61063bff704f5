#!/usr/bin/env python3
"""Report of Benchmarks/command/run_command.sh (S7, S8): medians and ratios from results.tsv.

A run counts only if it exited 0, had no failures and (S7) every file was found intact on nginx's disk;
a client with a failed run is reported as failed, never dropped.
"""
import csv
import statistics
import sys
from pathlib import Path


def main():
    folder = Path(sys.argv[1])
    meta = dict(line.split("=", 1) for line in (folder / "meta.txt").read_text().splitlines() if "=" in line)
    rows = list(csv.DictReader(open(folder / "results.tsv"), delimiter="\t"))
    out = ["# The curlew command side by side (S7, S8)", ""]
    out.append(f"- date: {meta.get('date')}; machine: {meta.get('machine')}; load average after: {meta.get('loadavg')}")
    out.append(f"- libcurl {meta.get('libcurl')}; nginx {meta.get('nginx')}, 1 worker on CPU {meta.get('nginx_cpu')}; "
               f"{meta.get('wrk')}; clients under `taskset -c {meta.get('client_cpu')}`")
    out.append(f"- {meta.get('reps')} repetitions, clients alternating within each; medians; raw output in "
               f"`Benchmarks/{meta.get('raw_dir')}/` (git-ignored)")
    out.append("")

    def runs(scenario, client):
        return [row for row in rows if row["scenario"] == scenario and row["client"] == client]

    def rate(row, scenario):
        if scenario == "s7":
            wall = float(row["wall"] or 0)
            return int(row["count"] or 0) / wall if wall > 0 else 0.0
        seconds = float(row["seconds"] or 0)
        return int(row["count"] or 0) / seconds if seconds > 0 else 0.0

    def ok(row, scenario):
        if row["exit"] != "0":
            return f"exit {row['exit']}"
        if scenario == "s7":
            return None if row["verified"] == "yes" else f"not verified on disk ({row['verified']})"
        if row["verified"] not in ("", "0"):
            return f"{row['verified']} failed requests"
        return None

    sections = {
        "s8": ("S8: GET /small, HTTP/1.1 keep-alive, 64 connections, client pinned",
               ["raw-libcurl", "curlew-bench", "wrk"], "raw-libcurl", "req/s",
               f"N = {int(meta.get('n_c64', 0)):,} requests per run; wrk runs {meta.get('wrk_seconds')} s instead"),
        "s7": ("S7: bulk upload, files of 4 KiB, concurrency 16, nginx WebDAV, verified byte for byte on disk",
               ["curlew-upload", "xargs-curl", "rclone-webdav"], "xargs-curl", "files/s",
               f"{int(meta.get('s7_files', 0)):,} files per run; files/s over the whole process (start-up and walk included)"),
    }
    for scenario, (title, clients, baseline, unit, note) in sections.items():
        if not any(row["scenario"] == scenario for row in rows):
            continue
        out += [f"## {title}", "", note, "",
                f"| client | {unit} (median) | min–max | CPU s (user+sys, median) | ÷ {baseline} "
                f"| ÷ {baseline}, paired by round (median; min–max) "
                f"| {unit.split('/')[0]} per CPU-second ÷ {baseline} | runs |",
                "|---|---:|---:|---:|---:|---:|---:|---:|"]
        medians = {}
        for client in clients:
            client_runs = runs(scenario, client)
            failures = [ok(row, scenario) for row in client_runs if ok(row, scenario)]
            if client_runs and not failures:
                values = [rate(row, scenario) for row in client_runs]
                medians[client] = (statistics.median(values), min(values), max(values),
                                   statistics.median(float(r["user"]) + float(r["sys"]) for r in client_runs), len(client_runs))
        for client in clients:
            client_runs = runs(scenario, client)
            if client in medians:
                median, low, high, cpu, count = medians[client]
                ratio = f"{median / medians[baseline][0]:.2f}" if baseline in medians else "–"
                # Work per CPU-second: robust when other processes compete for the machine and wall time swings.
                efficiency = f"{medians[baseline][3] / cpu:.2f}" if baseline in medians and cpu > 0 else "–"
                # Each round runs the clients one after the other, so a ratio within a round leaves out the drift
                # between rounds (the machine's speed changes by minutes), which the ratio of medians keeps.
                baseline_rates = {row["rep"]: rate(row, scenario) for row in runs(scenario, baseline)}
                paired = [rate(row, scenario) / baseline_rates[row["rep"]] for row in client_runs
                          if baseline_rates.get(row["rep"], 0) > 0]
                paired_text = (f"{statistics.median(paired):.2f}; {min(paired):.2f}–{max(paired):.2f}"
                               if paired and baseline in medians else "–")
                out.append(f"| {client} | {median:,.0f} | {low:,.0f}–{high:,.0f} | {cpu:.2f} | {ratio} | {paired_text} "
                           f"| {efficiency} | {count}/{len(client_runs)} |")
            else:
                reasons = [ok(row, scenario) for row in client_runs if ok(row, scenario)]
                out.append(f"| {client} | **FAILED**: {reasons[0] if reasons else 'no runs'} | | | | | | |")
        out.append("")
    out += scale_section(rows, meta, runs, rate, ok)
    out += checks_section(rows, meta, runs, rate, ok)
    out += peers_section(rows, meta, runs, rate, ok)
    out += ["## Notes", "",
            "- curlew-bench: `curlew bench URL -c 64 --requests N --json` (one event loop per core it may run on: one when pinned).",
            "- raw-libcurl: `Benchmarks/raw-libcurl/bench_curl.c` (curl_multi_poll, handles re-added at once), the limit for anything on libcurl.",
            "- wrk -t1 -c64 is the ceiling (its own event loop, no HTTP library), not the bar; it runs for a duration, so its "
            "per-CPU-second figure is not comparable.",
            "- paired by round: each round runs every client once, one after the other; the client's rate ÷ the "
            "baseline's in the same round, then the median over rounds. It leaves out the drift between rounds.",
            "- per CPU-second: the baseline's median CPU (user + sys of the whole process) ÷ the client's, for the same N; "
            "on a busy machine wall-clock req/s swings by 2-3× between runs, CPU per request much less.",
            "- S7 curlew-upload: `curlew upload SOURCE URL --concurrency 16 --json`; xargs-curl: "
            "`find . -type f | xargs -P16 -I{} curl -sS -f -T {} URL/{}` (one curl process per file). After each run every file "
            "is compared with `diff -r` against nginx's WebDAV folder; the folder is then removed. rclone-webdav: `rclone copy "
            "SOURCE :webdav:TARGET --webdav-url URL --transfers 16` (Debian's rclone); it needs PROPFIND, which nginx-light lacks.", ""]
    print("\n".join(out))


CHECK_NAMES = {
    "peek": "the peek of a reused connection (one `recv(MSG_PEEK)` per request)",
    "prereq": "the whole pre-request callback (connection check, connection registry, credentials on redirects)",
    "headers": "the header callback (framing checks, the parsed head)",
    "maxage": "`CURLOPT_MAXAGE_CONN`, a control: no connection of a busy run nears its 4 s idle age, so the row shows "
              "the noise",
}


def checks_section(rows, meta, runs, rate, ok):
    """S8-checks: curlew bench with each check switched off, as a share of raw libcurl and of curlew bench.

    Beside the medians, the best run of each client: other tenants of a virtual machine only ever slow a run down,
    so the fastest of several is the steadiest estimate of what a client costs when a check is worth a few percent
    and the runs spread by tens of percent."""
    clients = ["raw-libcurl", "curlew-bench"] + [f"curlew-bench-without-{name}" for name in meta.get("checks", "").split()]
    clients.append("curlew-bench-without-all")
    if not any(row["scenario"] == "s8checks" for row in rows):
        return []
    figures = {}
    for client in clients:
        client_runs = runs("s8checks", client)
        rates = [rate(row, "s8") for row in client_runs]
        # A run that exited 0 without a count (no JSON) is a failed run, not a rate of 0.
        if client_runs and not any(ok(row, "s8") for row in client_runs) and min(rates) > 0:
            figures[client] = (statistics.median(rates), max(rates),
                               statistics.median(float(r["user"]) + float(r["sys"]) for r in client_runs),
                               len(client_runs))
    out = ["## S8-checks: what each per-request check costs, GET /small, 64 connections, client pinned", "",
           f"N = {int(meta.get('n_c64', 0)):,} requests per run. The same `curlew` binary throughout; a preloaded shim "
           "(`command/without_checks.c`) switches one check off per row, for this measurement only. Best: the fastest "
           "run (neighbours on a shared machine only ever slow a run down).", "",
           "| client | switched off | req/s median | req/s best | CPU s median | ÷ raw-libcurl, median / best "
           "| ÷ curlew-bench, median / best | runs |",
           "|---|---|---:|---:|---:|---:|---:|---:|"]
    raw = figures.get("raw-libcurl")
    whole = figures.get("curlew-bench")

    def ratios(figure, base):
        return f"{figure[0] / base[0]:.2f} / {figure[1] / base[1]:.2f}" if base else "–"

    for client in clients:
        if client not in figures:
            if runs("s8checks", client):
                out.append(f"| {client} | | **FAILED** | | | | | |")
            continue
        figure = figures[client]
        name = client.removeprefix("curlew-bench-without-") if client.startswith("curlew-bench-without-") else ""
        what = "every check above" if name == "all" else CHECK_NAMES.get(name, name or "nothing")
        if client == "raw-libcurl":
            what = "(the bar)"
        out.append(f"| {client} | {what} | {figure[0]:,.0f} | {figure[1]:,.0f} | {figure[2]:.2f} | {ratios(figure, raw)} "
                   f"| {ratios(figure, whole)} | {figure[3]} |")
    out += ["", "A check costs what its row gains over curlew-bench; what curlew-bench-without-all still lacks of "
            "raw libcurl is Curlew's own bookkeeping (the loop, the state machine, deadlines, the tally and histogram).", ""]
    return out


SCALE_CLIENTS = ["raw-libcurl", "raw-libcurl-socket", "raw-libcurl-socket-parts", "curlew-bench-poll",
                 "curlew-bench-socket-action", "wrk"]


def scale_section(rows, meta, runs, rate, ok):
    """S8-scale: requests/s and CPU per request of every client at each connection count, and the ratios issue 11
    sets targets for (the cost per request should not grow with the connections open)."""
    points = sorted({int(row["scenario"].split("-c")[1]) for row in rows if row["scenario"].startswith("s8scale-c")})
    if not points:
        return []
    out = ["## S8-scale: GET /small, HTTP/1.1 keep-alive, client pinned, by connections open", "",
           f"N = {int(meta.get('n_scale', 0)):,} requests per run (wrk: {meta.get('wrk_seconds')} s); "
           "CPU per request = (user + sys) of the whole client process ÷ requests; medians.", "",
           "| client | " + " | ".join(f"c = {c:,} req/s" for c in points) + " | "
           + " | ".join(f"c = {c:,} µs CPU/req" for c in points) + " |",
           "|---|" + "---:|" * (2 * len(points))]
    figures = {}
    for client in SCALE_CLIENTS:
        rates, costs = [], []
        for point in points:
            client_runs = runs(f"s8scale-c{point}", client)
            failures = [ok(row, "s8") for row in client_runs if ok(row, "s8")]
            if not client_runs or failures:
                rates.append(f"**FAILED**: {failures[0]}" if failures else "–")
                costs.append("")
                continue
            median_rate = statistics.median(rate(row, "s8") for row in client_runs)
            median_cost = statistics.median(
                (float(row["user"]) + float(row["sys"])) / max(int(row["count"] or 0), 1) * 1e6 for row in client_runs)
            figures[(client, point)] = (median_rate, median_cost)
            rates.append(f"{median_rate:,.0f}")
            costs.append(f"{median_cost:.1f}")
        out.append(f"| {client} | " + " | ".join(rates) + " | " + " | ".join(costs) + " |")
    out.append("")
    smallest, largest = points[0], points[-1]
    middle = 1000 if 1000 in points else points[len(points) // 2]
    out += ["Issue 11's targets, per curlew driver: req/s at c = 1,000 ÷ its own at c = 64 (≥ 0.75); CPU per request at "
            "the largest c ÷ its own at c = 64 (≤ 1.3); req/s ÷ raw libcurl's poll loop at each c (≥ 0.9 at 64, "
            "≥ 1.3 at 1,000, ≥ 2 at 4,000).", "",
            "| client | req/s c = 1,000 ÷ c = 64 | CPU/req largest c ÷ c = 64 | " +
            " | ".join(f"÷ raw-libcurl c = {c:,}" for c in points) + " |",
            "|---|---:|---:|" + "---:|" * len(points)]
    for client in SCALE_CLIENTS[1:5]:
        def ratio(numerator, denominator, index):
            if numerator in figures and denominator in figures and figures[denominator][index] > 0:
                return f"{figures[numerator][index] / figures[denominator][index]:.2f}"
            return "–"
        against_raw = [ratio((client, c), ("raw-libcurl", c), 0) for c in points]
        out.append(f"| {client} | {ratio((client, middle), (client, smallest), 0)} | "
                   f"{ratio((client, largest), (client, smallest), 1)} | " + " | ".join(against_raw) + " |")
    out.append("")
    return out


PEERS_CLIENTS = ["wrk", "h2load", "ab", "raw-libcurl", "curlew-bench", "hey", "k6"]
PEERS_LANGUAGES = {"wrk": "C", "h2load": "C, `--h1`", "ab": "C, `-k`", "raw-libcurl": "C, curl_multi_poll",
                   "curlew-bench": "Swift on libcurl", "hey": "Go", "k6": "Go + JavaScript"}


def peers_section(rows, meta, runs, rate, ok):
    """S8-peers: curlew bench beside the load testers people use, by connections open, with each tool's load per
    CPU-second (the figure a load-test user picks a tool by) and curlew bench's ratios to raw libcurl and to each peer."""
    points = sorted({int(row["scenario"].split("-c")[1]) for row in rows if row["scenario"].startswith("s8peers-c")})
    if not points:
        return []
    out = ["## S8-peers: curlew bench beside wrk, h2load, ab, hey and k6 (GET /small, HTTP/1.1 keep-alive, client pinned)",
           "", f"N = {int(meta.get('n_c64', 0)):,} requests per run at c = 64 and {int(meta.get('n_scale', 0)):,} above "
           f"(wrk: {meta.get('wrk_seconds')} s); requests/s from each tool's own elapsed time; CPU per request = (user + sys) "
           "of the whole client process ÷ requests; medians; failed = requests without a 2xx, as the tool counts them.", "",
           "| client | " + " | ".join(f"c = {c:,} req/s" for c in points) + " | "
           + " | ".join(f"c = {c:,} µs CPU/req" for c in points) + " | curlew bench ÷ client (req/s) | failed |",
           "|---|" + "---:|" * (2 * len(points) + 2)]
    figures = {}
    for client in PEERS_CLIENTS:
        for point in points:
            client_runs = runs(f"s8peers-c{point}", client)
            if client_runs and not [row for row in client_runs if row["exit"] != "0"]:
                figures[(client, point)] = (
                    statistics.median(rate(row, "s8") for row in client_runs),
                    statistics.median((float(row["user"]) + float(row["sys"])) / max(int(row["count"] or 0), 1) * 1e6
                                      for row in client_runs),
                    sum(int(row["verified"] or 0) for row in client_runs))
    for client in PEERS_CLIENTS:
        if not any((client, point) in figures or runs(f"s8peers-c{point}", client) for point in points):
            continue
        rates, costs, ratios, failed = [], [], [], 0
        for point in points:
            if (client, point) not in figures:
                exits = [row["exit"] for row in runs(f"s8peers-c{point}", client)]
                rates.append(f"**FAILED** (exit {', '.join(exits)})" if exits else "–")
                costs.append("")
                continue
            median_rate, median_cost, bad = figures[(client, point)]
            failed += bad
            rates.append(f"{median_rate:,.0f}")
            costs.append(f"{median_cost:.1f}")
            if client != "curlew-bench" and ("curlew-bench", point) in figures and median_rate > 0:
                ratios.append(f"{figures[('curlew-bench', point)][0] / median_rate:.2f}")
        name = f"{client} ({PEERS_LANGUAGES.get(client, '')})" if client in PEERS_LANGUAGES else client
        out.append(f"| {name} | " + " | ".join(rates) + " | " + " | ".join(costs) + " | "
                   + (" / ".join(ratios) if ratios else "–") + f" | {failed} |")
    out += ["", "The ratio column reads c = " + " / c = ".join(f"{c:,}" for c in points) + ". Versions: "
            + "; ".join(meta[key] for key in ("wrk", "h2load", "ab", "hey", "k6") if key in meta) + ".", ""]
    return out


if __name__ == "__main__":
    main()
