#!/usr/bin/env python3
"""Helpers for Benchmarks/run.sh (standard library only).

  parse-wrk RESULTS KEY WRK_OUTPUT [--fail-non2xx]   record wrk's req/s, p50/p99, errors
  parse-redis RESULTS KEY CSV                        record redis-benchmark --csv rps, p50/p99
  fsync DIR OUT_JSON                                 4 KiB pwrite + fdatasync latency in DIR
  summary DIR BENCHMARKS_MD README_MD                `make bench`: every run's figures beside the
                                                     targets, spliced into BENCHMARKS.md; the
                                                     headline ratios spliced into the README
  set RESULTS KEY VALUE                              record a value (JSON if it parses)
  batch-delta RESULTS KEY BEFORE AFTER               group-commit batch sizes between two /metrics dumps
  life OUT_JSON -- COMMAND...                        run a server, pass on SIGTERM/SIGINT; at its exit write
                                                     its whole life's CPU seconds and bytes written to disk
  cost RESULTS KEY LIFE_JSON MESSAGES BODY_BYTES     record CPU µs and disk bytes per message from `life`
  fill-pushrelay PORT KEY USER COUNT [THREADS]       POST COUNT messages for USER (keep-alive)
  fill-nchan PORT CHANNEL COUNT BODY [THREADS]       publish COUNT messages to an nchan channel
  check-pushrelay FILE COUNT                         the catch-up answer holds exactly COUNT messages
  check-nchan FILE HEADERS COUNT                     the multipart longpoll answer holds COUNT parts
  median V1 V2 ...                                   print the median
  report RESULTS MARKDOWN                            print the summary table, write it as Markdown
"""

import csv
import http.client
import json
import os
import re
import statistics
import sys
import textwrap
import threading
import time


def load(path):
    if os.path.exists(path):
        with open(path) as f:
            return json.load(f)
    return {}


def save(path, data):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(data, f, indent=2, sort_keys=True)
    os.replace(tmp, path)


def to_ms(value, unit):
    factor = {"us": 0.001, "ms": 1.0, "s": 1000.0, "m": 60000.0, "h": 3600000.0}[unit]
    return float(value) * factor


def parse_wrk(text):
    out = {"rps": None, "p50_ms": None, "p99_ms": None, "requests": None, "non2xx": 0,
           "socket_errors": {"connect": 0, "read": 0, "write": 0, "timeout": 0}}
    m = re.search(r"Requests/sec:\s+([\d.]+)", text)
    if m:
        out["rps"] = float(m.group(1))
    m = re.search(r"(\d+) requests in ([\d.]+\w+)", text)
    if m:
        out["requests"] = int(m.group(1))
        out["elapsed"] = m.group(2)
    for pct, key in (("50", "p50_ms"), ("99", "p99_ms")):
        m = re.search(r"^\s+" + pct + r"%\s+([\d.]+)(us|ms|s|m|h)\s*$", text, re.M)
        if m:
            out[key] = to_ms(m.group(1), m.group(2))
    m = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", text)
    if m:
        out["non2xx"] = int(m.group(1))
    m = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", text)
    if m:
        out["socket_errors"] = dict(zip(("connect", "read", "write", "timeout"), map(int, m.groups())))
    return out


def cmd_parse_wrk(args):
    results, key, wrk_file = args[:3]
    fail_non2xx = "--fail-non2xx" in args[3:]
    with open(wrk_file) as f:
        text = f.read()
    parsed = parse_wrk(text)
    data = load(results)
    data[key] = parsed
    save(results, data)
    errs = sum(parsed["socket_errors"].values())
    print(f"    {key}: {fmt_rps(parsed['rps'])} req/s, p50 {fmt_ms(parsed['p50_ms'])} ms, "
          f"p99 {fmt_ms(parsed['p99_ms'])} ms, "
          f"non-2xx {parsed['non2xx']}, socket errors {errs}")
    if parsed["rps"] is None or not parsed["requests"]:
        sys.exit(f"!!! {key}: could not read a request rate from wrk's output ({wrk_file})")
    if fail_non2xx and parsed["non2xx"]:
        sys.exit(f"!!! {key}: {parsed['non2xx']} of {parsed['requests']} responses were not 2xx")


def cmd_parse_redis(args):
    results, key, csv_file = args
    with open(csv_file) as f:
        rows = list(csv.DictReader(f))
    if not rows or not rows[-1].get("rps"):
        sys.exit(f"!!! {key}: no rate in redis-benchmark's output ({csv_file})")
    row = rows[-1]
    parsed = {"rps": float(row["rps"]), "p50_ms": float(row["p50_latency_ms"]),
              "p99_ms": float(row["p99_latency_ms"]), "test": row["test"]}
    data = load(results)
    data[key] = parsed
    save(results, data)
    print(f"    {key}: {fmt_rps(parsed['rps'])} req/s, p50 {fmt_ms(parsed['p50_ms'])} ms, "
          f"p99 {fmt_ms(parsed['p99_ms'])} ms")


def cmd_set(args):
    results, key, value = args
    try:
        value = json.loads(value)
    except ValueError:
        pass
    data = load(results)
    data[key] = value
    save(results, data)


def cmd_life(args):
    # The server's own rusage at its exit: CPU of every thread, and `ru_oublock` (512-byte units
    # of what it sent to the disk: log, checkpoints and shutdown included, from start to exit).
    import signal
    out, command = args[0], args[2:]
    pid = os.fork()
    if pid == 0:
        os.execvp(command[0], command)
    for number in (signal.SIGTERM, signal.SIGINT):
        signal.signal(number, lambda n, _frame: os.kill(pid, n))
    while True:
        try:
            _, status, usage = os.wait4(pid, 0)
            break
        except InterruptedError:
            continue
    with open(out, "w") as f:
        json.dump({"cpu_s": usage.ru_utime + usage.ru_stime, "write_bytes": usage.ru_oublock * 512,
                   "exit_status": status}, f)


def cmd_cost(args):
    results, key, life_file, messages, body = args
    with open(life_file) as f:
        life = json.load(f)
    messages, body = int(messages), int(body)
    if life["exit_status"] != 0:
        sys.exit(f"!!! {key}: the server exited with status {life['exit_status']} (not measured whole)")
    if messages <= 0:
        sys.exit(f"!!! {key}: no messages to divide by")
    cost = {"messages": messages, "body_bytes": body, "cpu_us": life["cpu_s"] * 1e6 / messages,
            "disk_bytes": life["write_bytes"] / messages}
    cost["disk_per_body"] = cost["disk_bytes"] / body
    data = load(results)
    data[key] = cost
    save(results, data)
    print(f"    {key}: {messages} messages over the process's life: {cost['cpu_us']:.1f} µs CPU and "
          f"{cost['disk_bytes']:.0f} bytes to disk per message ({cost['disk_per_body']:.1f}× the {body}-byte body)")


def read_batch_histogram(path):
    buckets, total, count = {}, 0.0, 0.0
    with open(path) as f:
        for line in f:
            m = re.match(r'pushrelay_store_commit_batch_size_bucket\{le="([^"]+)"\}\s+([\d.e+]+)', line)
            if m:
                buckets[m.group(1)] = float(m.group(2))
            elif line.startswith("pushrelay_store_commit_batch_size_sum"):
                total = float(line.split()[-1])
            elif line.startswith("pushrelay_store_commit_batch_size_count"):
                count = float(line.split()[-1])
    return buckets, total, count


def cmd_batch_delta(args):
    results, key, before, after = args
    b0, s0, c0 = read_batch_histogram(before)
    b1, s1, c1 = read_batch_histogram(after)
    commits = c1 - c0
    writes = s1 - s0
    # Cumulative buckets -> share of commits per bucket, between the two dumps.
    dist, prev = [], 0.0
    for le in b1:  # in the order /metrics lists them: ascending bounds, then +Inf
        cum = b1[le] - b0.get(le, 0.0)
        if cum - prev > 0:
            label = le if le == "+Inf" else str(int(float(le)))
            dist.append(f"<={label}: {int(cum - prev)}")
        prev = cum
    dist = ", ".join(dist)
    value = {"commits": int(commits), "writes": int(writes),
             "mean": (writes / commits) if commits else None, "buckets": dist}
    data = load(results)
    data[key] = value
    save(results, data)
    print(f"    group commit: {value['commits']} commits for {value['writes']} writes, "
          f"mean batch {value['mean'] and round(value['mean'], 1)}; commits by batch size: {dist}")


def run_threads(count, threads, work):
    """work(thread_index, indices) for indices split round-robin over threads; errors re-raised."""
    errors = []

    def wrapper(t):
        try:
            work(t, range(t, count, threads))
        except Exception as e:  # noqa: BLE001 - report any failure of a worker
            errors.append(e)

    ts = [threading.Thread(target=wrapper, args=(t,)) for t in range(threads)]
    started = time.monotonic()
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    if errors:
        raise errors[0]
    return time.monotonic() - started


def cmd_fill_pushrelay(args):
    port, key, user, count = int(args[0]), args[1], args[2], int(args[3])
    threads = int(args[4]) if len(args) > 4 else 8
    payload = json.loads(os.environ["BENCH_PAYLOAD"])

    def work(t, indices):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        headers = {"Authorization": "Bearer " + key, "Content-Type": "application/json"}
        for i in indices:
            body = json.dumps({"id": f"{user}-{i}", "recipients": [user], "payload": payload},
                              separators=(",", ":"))
            conn.request("POST", "/v1/messages", body=body, headers=headers)
            resp = conn.getresponse()
            data = resp.read()
            if resp.status != 202:
                raise RuntimeError(f"POST /v1/messages #{i}: {resp.status} {data[:300]!r}")
        conn.close()

    elapsed = run_threads(count, threads, work)
    print(f"{elapsed:.3f}")


def cmd_fill_nchan(args):
    port, channel, count, body = int(args[0]), args[1], int(args[2]), args[3].encode()
    threads = int(args[4]) if len(args) > 4 else 4

    def work(t, indices):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        for i in indices:
            conn.request("POST", f"/pub/{channel}", body=body,
                         headers={"Content-Type": "application/json"})
            resp = conn.getresponse()
            data = resp.read()
            if not 200 <= resp.status < 300:
                raise RuntimeError(f"nchan publish #{i}: {resp.status} {data[:300]!r}")
        conn.close()

    elapsed = run_threads(count, threads, work)
    print(f"{elapsed:.3f}")


def cmd_check_pushrelay(args):
    path, count = args[0], int(args[1])
    with open(path, "rb") as f:
        doc = json.load(f)
    msgs = doc.get("messages", [])
    seqs = [m["seq"] for m in msgs]
    problems = []
    if len(msgs) != count:
        problems.append(f"{len(msgs)} messages, expected {count}")
    if seqs != sorted(seqs) or len(set(seqs)) != len(seqs):
        problems.append("seqs not strictly increasing")
    if doc.get("hasMore"):
        problems.append("hasMore is true")
    if doc.get("complete") is not True:
        problems.append(f"complete is {doc.get('complete')!r}")
    if problems:
        sys.exit(f"!!! PushRelay catch-up answer wrong: {'; '.join(problems)} ({path})")
    print(len(msgs))


def cmd_check_nchan(args):
    path, headers_path, count = args[0], args[1], int(args[2])
    with open(headers_path, "rb") as f:
        headers = f.read().decode("latin-1")
    m = re.search(r"^Content-Type:\s*multipart/mixed;\s*boundary=(\S+)", headers, re.M | re.I)
    if not m:
        sys.exit(f"!!! nchan answer is not multipart/mixed:\n{headers}")
    boundary = b"--" + m.group(1).encode()
    with open(path, "rb") as f:
        body = f.read()
    # Every part starts with "--boundary\r\n"; the closing delimiter is "--boundary--".
    parts = body.count(boundary + b"\r\n")
    if parts != count:
        sys.exit(f"!!! nchan catch-up answer holds {parts} parts, expected {count}")
    print(parts)


def cmd_median(args):
    print(f"{statistics.median(float(a) for a in args):.4f}")


def fmt_rps(v):
    return "n/a" if v is None else f"{v:,.0f}"


def fmt_ms(v):
    return "n/a" if v is None else f"{v:.2f}"


def cmd_report(args):
    results, md_path = args
    d = load(results)
    meta = d.get("meta", {})

    def best(prefix):
        runs = {k[len(prefix):]: v for k, v in d.items() if k.startswith(prefix)}
        if not runs:
            return None, None, {}
        w = max(runs, key=lambda k: runs[k]["rps"] or 0)
        return w, runs[w], runs

    ceil_w, ceil, ceil_runs = best("ceiling_w")
    pub_w, pub, pub_runs = best("nchan_pub_w")
    pr = d.get("pushrelay", {})
    pr_rps = pr.get("rps")

    def ratio(a, b):
        return "n/a" if not a or not b else f"{a / b:.3f}"

    def all_runs(runs):
        return ", ".join(f"workers={w}: {fmt_rps(r['rps'])}" for w, r in runs.items())

    rows = [
        ("nginx ceiling `GET /ceiling` (204)", fmt_rps(ceil and ceil["rps"]),
         fmt_ms(ceil and ceil["p50_ms"]), fmt_ms(ceil and ceil["p99_ms"]),
         f"worker_processes {ceil_w} (tried {all_runs(ceil_runs)})"),
        ("nchan publish `POST /pub/bench`", fmt_rps(pub and pub["rps"]),
         fmt_ms(pub and pub["p50_ms"]), fmt_ms(pub and pub["p99_ms"]),
         f"worker_processes {pub_w} (tried {all_runs(pub_runs)})"),
        ("bare libmicrohttpd handler (PushRelay's settings)", fmt_rps(d.get("mhd_bare", {}).get("rps")),
         fmt_ms(d.get("mhd_bare", {}).get("p50_ms")), fmt_ms(d.get("mhd_bare", {}).get("p99_ms")),
         "Benchmarks/mhd_bare.c: reads the body, answers 202, stores nothing"),
        (f"Redis {meta.get('redis')} `XADD`, `appendfsync always`", fmt_rps(d.get("redis_xadd", {}).get("rps")),
         fmt_ms(d.get("redis_xadd", {}).get("p50_ms")), fmt_ms(d.get("redis_xadd", {}).get("p99_ms")),
         f"redis-benchmark -c {meta.get('wrk_args', '').split()[1][2:] if meta.get('wrk_args') else '?'}, "
         f"{meta.get('users')} streams, same payload"),
        ("PushRelay `POST /v1/messages`", fmt_rps(pr_rps), fmt_ms(pr.get("p50_ms")),
         fmt_ms(pr.get("p99_ms")),
         f"{pr.get('requests')} requests, non-2xx {pr.get('non2xx')}, "
         f"socket errors {sum(pr.get('socket_errors', {}).values())}"),
    ]
    pb = d.get("pushrelay_batch", {})
    if pb:
        rows.append(("PushRelay `POST /v1/messages/batch` (100 msgs x 10 recipients)",
                     fmt_rps(pb.get("rps")), fmt_ms(pb.get("p50_ms")), fmt_ms(pb.get("p99_ms")),
                     f"**{fmt_rps(pb['rps'] * 1000)} recipient-messages/s** (-c16)"))
    batch = d.get("batch", {})
    cu_pr, cu_nc = d.get("catchup_pushrelay", {}), d.get("catchup_nchan", {})

    lines = []
    lines.append(f"# PushRelay ingest / catch-up benchmark")
    lines.append("")
    lines.append(f"- when: {meta.get('date')}; commit {meta.get('commit')}; {meta.get('cpus')} CPUs; "
                 f"{meta.get('nginx')}; wrk {meta.get('wrk_args')} (+{meta.get('warmup')} warm-up per run)")
    lines.append(f"- payload: {meta.get('payload_bytes')}-byte JSON object; PushRelay: one recipient "
                 f"of {meta.get('users')} users per message, unique `id` per request, `--http-threads` default")
    lines.append("")
    lines.append("## Ingest (wrk, loopback)")
    lines.append("")
    lines.append("| target | req/s | p50 ms | p99 ms | notes |")
    lines.append("| --- | ---: | ---: | ---: | --- |")
    for r in rows:
        lines.append("| " + " | ".join(r) + " |")
    lines.append("")
    lines.append(f"- PushRelay / nginx ceiling: **{ratio(pr_rps, ceil and ceil['rps'])}**")
    lines.append(f"- PushRelay / nchan publish: **{ratio(pr_rps, pub and pub['rps'])}**")
    lines.append(f"- PushRelay / Redis XADD (fsync always): **{ratio(pr_rps, d.get('redis_xadd', {}).get('rps'))}**")
    lines.append(f"- PushRelay / bare libmicrohttpd: **{ratio(pr_rps, d.get('mhd_bare', {}).get('rps'))}**")
    if batch:
        mean = batch.get("mean")
        lines.append(f"- PushRelay group commit during the measured run: {batch.get('commits')} commits "
                     f"for {batch.get('writes')} writes, mean batch "
                     f"{'n/a' if mean is None else f'{mean:.1f}'}; commits by batch size: {batch.get('buckets')}")
    lines.append("")
    lines.append(f"## Catch-up of {meta.get('catchup_n')} messages (one request, curl time_total, "
                 f"median of {meta.get('catchup_runs')})")
    lines.append("")
    lines.append("| server | request | median s | all runs s | bytes | fill time s |")
    lines.append("| --- | --- | ---: | --- | ---: | ---: |")
    for name, c in (("PushRelay", cu_pr), ("nchan", cu_nc)):
        if c:
            runs = ", ".join(f"{t:.4f}" for t in c.get("times", []))
            lines.append(f"| {name} | {c.get('request')} | {c.get('median'):.4f} | {runs} | "
                         f"{c.get('bytes')} | {c.get('fill_s')} |")
    lines.append("")
    if cu_pr and cu_nc and cu_nc.get("median"):
        lines.append(f"- PushRelay / nchan catch-up time: **{cu_pr['median'] / cu_nc['median']:.2f}x**")
    lines.append(f"- nchan catch-up: {meta.get('nchan_catchup_note')}")
    md = "\n".join(lines) + "\n"
    os.makedirs(os.path.dirname(md_path), exist_ok=True)
    with open(md_path, "w") as f:
        f.write(md)
    print(md)


def cmd_fsync(args):
    """What durability alone costs here: 2,000 x (4 KiB pwrite + fdatasync), p50 and p99."""
    directory, out = args
    path = os.path.join(directory, "fsync-probe.bin")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    block, times = b"x" * 4096, []
    try:
        for i in range(2000):
            started = time.perf_counter()
            os.pwrite(fd, block, (i % 64) * 4096)
            os.fdatasync(fd)
            times.append(time.perf_counter() - started)
    finally:
        os.close(fd)
        os.unlink(path)
    times.sort()
    result = {"p50_ms": times[1000] * 1000, "p99_ms": times[1980] * 1000}
    save(out, result)
    print(f"    fsync: p50 {result['p50_ms']:.3f} ms, p99 {result['p99_ms']:.3f} ms")


MARK_BEGIN = "<!-- make-bench:begin -->"
MARK_END = "<!-- make-bench:end -->"
README_BEGIN = "<!-- bench-figures:begin -->"
README_END = "<!-- bench-figures:end -->"


def cmd_summary(args):
    """Every run's figures of one `make bench` (run.sh, websocket.sh and idle_cpu.sh output in
    DIR), one column per run, with the targets; written between the markers (the top of
    BENCHMARKS.md: whatever follows the end marker is kept)."""
    out_dir, md_path, readme_path = args
    ingest = [load(os.path.join(out_dir, f)) for f in sorted(os.listdir(out_dir)) if f.startswith("ingest")]
    ws = [load(os.path.join(out_dir, f)) for f in sorted(os.listdir(out_dir)) if f.startswith("ws")]
    idle_path = os.path.join(out_dir, "idle.json")
    idle = load(idle_path) if os.path.exists(idle_path) else {}
    fsyncs = [load(os.path.join(out_dir, f)) for f in sorted(os.listdir(out_dir)) if f.startswith("fsync")]
    pushes = [load(os.path.join(out_dir, f)) for f in sorted(os.listdir(out_dir)) if f.startswith("push")]
    cluster_path = os.path.join(out_dir, "cluster.json")
    cluster = load(cluster_path) if os.path.exists(cluster_path) else {}
    cluster_runs = [cluster[k] for k in sorted(cluster) if isinstance(cluster[k], dict)]
    meta = ingest[0].get("meta", {}) if ingest else {}
    runs = max(len(ingest), len(ws), len(pushes), len(cluster_runs), 1)

    def rps(d, key):
        return (d.get(key) or {}).get("rps")

    def best(d, prefix):
        values = [v.get("rps") or 0 for k, v in d.items() if k.startswith(prefix)]
        return max(values) if values else None

    def cells(values, fmt):
        return [fmt(v) if v is not None else "n/a" for v in values] + ["n/a"] * (runs - len(values))

    def ratio(a, b):
        return None if not a or not b else a / b

    def latency(run, server, subscribers):
        for key, value in run.items():
            if key.startswith(f"{server}.latency.--subscribers {subscribers} "):
                return value
        return None

    def idle_rss(run, server):
        for key, value in run.items():
            if key.startswith(f"{server}.idle."):
                return value.get("rssPerConnectionKiB")
        return None

    def push(run, transport):
        """pushes/s and relay CPU µs per push from push_bench.py's line, e.g. '… = 10114 pushes/s;
        relay CPU 138 µs per push; …'."""
        line = run.get(transport) or ""
        rate = re.search(r"= ([0-9]+) pushes/s", line)
        cpu = re.search(r"CPU ([0-9]+) µs", line)
        return (float(rate.group(1)) if rate else None, int(cpu.group(1)) if cpu else None)

    def number(v):
        try:
            return float(v)
        except (TypeError, ValueError):
            return None

    def push_cell(run, transport, ceiling_key):
        rate, cpu = push(run, transport)
        ceiling = number(run.get(ceiling_key))
        if rate is None:
            return "n/a"
        share = f" ({rate / ceiling:.2f})" if ceiling else ""
        return f"{fmt_rps(rate)}{share}, {cpu} µs" if cpu is not None else f"{fmt_rps(rate)}{share}"

    def push_latency(run):
        found = re.search(r"p50 (-?[0-9.]+) ms, p99 (-?[0-9.]+) ms", run.get("latency") or "")
        return f"{found.group(1)} / {found.group(2)}" if found else "n/a"

    def pq(v):
        return "n/a" if v is None else f"{v['p50ms']:.2f} / {v['p99ms']:.2f}"

    rows = []
    rows.append(("nginx `return 204` (ceiling), req/s", cells([best(d, "ceiling_w") for d in ingest], fmt_rps), ""))
    rows.append(("bare libmicrohttpd handler, req/s", cells([rps(d, "mhd_bare") for d in ingest], fmt_rps), ""))
    rows.append(("Redis `XADD`, `appendfsync always`, req/s",
                 cells([rps(d, "redis_xadd") for d in ingest], fmt_rps), ""))
    rows.append(("nginx + nchan publish (memory), req/s", cells([best(d, "nchan_pub_w") for d in ingest], fmt_rps), ""))
    rows.append(("**PushRelay `POST /v1/messages`**, req/s", cells([rps(d, "pushrelay") for d in ingest], fmt_rps), ""))
    rows.append(("PushRelay / Redis XADD", cells([ratio(rps(d, "pushrelay"), rps(d, "redis_xadd")) for d in ingest],
                                                 lambda v: f"{v:.2f}"), "≥ 1"))
    rows.append(("PushRelay / bare libmicrohttpd",
                 cells([ratio(rps(d, "pushrelay"), rps(d, "mhd_bare")) for d in ingest], lambda v: f"{v:.2f}"),
                 "≥ 0.5"))
    def cost(d, key, field):
        return (d.get(key) or {}).get(field)

    rows.append(("Server CPU per message, µs: PushRelay / Redis (ratio)",
                 cells([None if cost(d, "pushrelay_cost", "cpu_us") is None or cost(d, "redis_cost", "cpu_us") is None
                        else f"{cost(d, 'pushrelay_cost', 'cpu_us'):.0f} / {cost(d, 'redis_cost', 'cpu_us'):.0f} "
                             f"({ratio(cost(d, 'pushrelay_cost', 'cpu_us'), cost(d, 'redis_cost', 'cpu_us')):.1f}×)"
                        for d in ingest], str), "≤ 2×"))
    rows.append(("Bytes to disk per message (the whole process, start to exit): PushRelay (× the body) / Redis",
                 cells([None if cost(d, "pushrelay_cost", "disk_bytes") is None
                        else f"{cost(d, 'pushrelay_cost', 'disk_bytes'):,.0f} "
                             f"({cost(d, 'pushrelay_cost', 'disk_per_body'):.1f}×) / "
                             f"{cost(d, 'redis_cost', 'disk_bytes') or 0:,.0f}"
                        for d in ingest], str), "≤ 4× the body"))
    rows.append(("PushRelay `POST /v1/messages` p50 / p99 ms",
                 [f"{fmt_ms(d.get('pushrelay', {}).get('p50_ms'))} / {fmt_ms(d.get('pushrelay', {}).get('p99_ms'))}"
                  for d in ingest], ""))
    rows.append(("**Batch publish**, recipient-messages/s",
                 cells([(rps(d, "pushrelay_batch") or 0) * 1000 or None for d in ingest], fmt_rps), "≥ 150,000"))
    rows.append((f"**Catch-up of {meta.get('catchup_n')}**, median ms (all runs)",
                 [f"{d['catchup_pushrelay']['median'] * 1000:.1f} ("
                  + ", ".join(f"{t * 1000:.1f}" for t in d["catchup_pushrelay"]["times"]) + ")"
                  if d.get("catchup_pushrelay") else "n/a" for d in ingest], ""))
    rows.append(("nginx serving the same page from a file, median ms; PushRelay / nginx",
                 [f"{d['catchup_nginx_file']['median'] * 1000:.2f}; "
                  f"{d['catchup_pushrelay']['median'] / d['catchup_nginx_file']['median']:.0f}×"
                  if d.get("catchup_nginx_file") and d.get("catchup_pushrelay") and d["catchup_nginx_file"]["median"]
                  else "n/a" for d in ingest], "≤ 10×"))
    rows.append(("nchan catch-up, median ms",
                 [f"{d['catchup_nchan']['median'] * 1000:.1f}" if d.get("catchup_nchan") else "n/a" for d in ingest],
                 ""))
    rows.append(("4 KiB write + fdatasync, p50 / p99 ms",
                 [f"{f['p50_ms']:.3f} / {f['p99_ms']:.3f}" for f in fsyncs] + ["n/a"] * (runs - len(fsyncs)), ""))
    for subscribers, rate in ((100, "1k"), (1000, "5k")):
        for server in ("pushrelay", "mosquitto", "nchan"):
            name = {"pushrelay": "**PushRelay** (fsync'ed commit first)", "mosquitto": "mosquitto (QoS 1)",
                    "nchan": "nchan (memory)"}[server]
            target = "p99 ≤ mosquitto's; p50 ≤ fsync + 0.2" if server == "pushrelay" else ""
            rows.append((f"Live {subscribers} subs × {rate} msg/s, {name}, p50 / p99 ms",
                         [pq(latency(run, server, subscribers)) for run in ws], target))
    rows.append(("RSS per idle WebSocket, KiB: PushRelay / nchan / mosquitto",
                 [" / ".join("n/a" if idle_rss(run, s) is None else f"{idle_rss(run, s):.1f}"
                             for s in ("pushrelay", "nchan", "mosquitto")) for run in ws], "keep the lowest"))
    rows.append(("Push receiver ceilings, req/s: `wrk` http / https, `h2load` HTTP/2",
                 [" / ".join(fmt_rps(number(p.get(k))) if number(p.get(k)) else "n/a"
                             for k in ("ceiling_http", "ceiling_https", "ceiling_h2")) for p in pushes]
                 + ["n/a"] * (runs - len(pushes)), ""))
    rows.append(("**Webhook pushes/s** over http (share of the ceiling), relay CPU per push",
                 cells([push_cell(p, "http", "ceiling_http") for p in pushes], str), "≥ 0.25 of the ceiling"))
    rows.append(("Webhook pushes/s over https (share), CPU per push",
                 cells([push_cell(p, "https", "ceiling_https") for p in pushes], str), ""))
    rows.append(("**APNs pushes/s** over HTTP/2 (share of `h2load`), CPU per push",
                 cells([push_cell(p, "apns", "ceiling_h2") for p in pushes], str),
                 "≥ 0.25 of h2load and ≥ the webhook's"))
    rows.append(("Push due → receiver at 200/s, p50 / p99 ms", cells([push_latency(p) for p in pushes], str), ""))
    rows.append(("Ingest on PostgreSQL, req/s: one node / two nodes (sum) / SQLite in the same run",
                 cells([f"{fmt_rps(number(c.get('pg1')))} / {fmt_rps(number(c.get('pg2')))} / "
                        f"{fmt_rps(number(c.get('sqlite')))}" for c in cluster_runs], str), ""))
    rows.append(("Live on PostgreSQL, 100 subs × 1k msg/s, p50 / p99 ms: one node; across two (subs on A, posts to B)",
                 cells([f"{c.get('pg1_live')}; {c.get('cross_live')}" for c in cluster_runs], str), ""))
    rows.append(("Catch-up of 10,000 on PostgreSQL, median ms",
                 cells([number(c.get("pg_catchup_ms")) for c in cluster_runs], lambda v: f"{v:.1f}"), ""))
    idle_cell = ("n/a" if not idle else
                 f"{idle.get('wakeups')} wake-ups, {idle.get('ticks')} CPU ticks in {idle.get('seconds')} s")
    rows.append(("**Idle** after work (context switches, all threads)", [idle_cell] + [""] * (runs - 1), "0"))

    lines = [MARK_BEGIN, "", f"## `make bench`: {meta.get('date', '?')}, commit {meta.get('commit', '?')}", ""]
    lines.append(f"Command: `make bench` (RUNS={runs}): `Benchmarks/run.sh` {len(ingest)}×, "
                 f"`Benchmarks/websocket.sh` {len(ws)}×, `Benchmarks/push.sh` {len(pushes)}× "
                 f"({meta.get('push_jobs', 20000)} jobs each), `Benchmarks/cluster.sh` (RUNS={len(cluster_runs)}), "
                 f"`Benchmarks/idle_cpu.sh` once; {meta.get('cpus')} CPUs; "
                 f"wrk {meta.get('wrk_args')}; {meta.get('payload_bytes')}-byte payloads; one recipient of "
                 f"{meta.get('users')} users per message. Every figure of a column comes from the same run.")
    lines.append("")
    lines.append("| | " + " | ".join(f"run {i + 1}" for i in range(runs)) + " | target |")
    lines.append("|---|" + "---:|" * runs + "---|")
    for name, values, target in rows:
        lines.append(f"| {name} | " + " | ".join(values) + f" | {target} |")
    lines.append("")
    lines.append(MARK_END)
    splice(md_path, MARK_BEGIN, MARK_END, "\n".join(lines))
    print("\n".join(lines))

    # The README's headline figures, from the same runs (never typed by hand).
    def each(values, fmt):
        shown = [fmt(v) for v in values if v is not None]
        return " and ".join(shown) if shown else "n/a"

    ingest_rps = [rps(d, "pushrelay") for d in ingest]
    xadd_rps = [rps(d, "redis_xadd") for d in ingest]
    batch = [(rps(d, "pushrelay_batch") or 0) * 1000 or None for d in ingest]
    live = [latency(run, "pushrelay", 100) for run in ws]
    mosquitto = [latency(run, "mosquitto", 100) for run in ws]
    nchan = [latency(run, "nchan", 100) for run in ws]
    webhook = [push(p, "http")[0] for p in pushes]
    apns = [push(p, "apns")[0] for p in pushes]
    readme = [README_BEGIN, "",
              f"From the `make bench` table at the top of [BENCHMARKS.md](BENCHMARKS.md) "
              f"({meta.get('date', '?')[:10]}, commit {meta.get('commit', '?')}; {meta.get('cpus')} cores, loopback; "
              f"each figure beside its peer in the same run, one per run):",
              "",
              f"- **Ingest:** a durable `POST /v1/messages` (on disk, fsynced, before the 202) at "
              f"{each(ingest_rps, fmt_rps)} req/s: **{each([ratio(a, b) for a, b in zip(ingest_rps, xadd_rps)], lambda v: f'{v:.2f}')}×** "
              f"Redis `XADD` with `appendfsync always` ({each(xadd_rps, fmt_rps)}); batches store "
              f"{each(batch, fmt_rps)} recipient-messages/s.",
              f"- **Live latency**, 100 subscribers × 1,000 msg/s, post to frame: p99 "
              f"**{each([v and v['p99ms'] for v in live], lambda v: f'{v:.2f}')} ms**, against "
              f"{each([v and v['p99ms'] for v in mosquitto], lambda v: f'{v:.2f}')} ms for mosquitto (QoS 1) and "
              f"{each([v and v['p99ms'] for v in nchan], lambda v: f'{v:.2f}')} ms for nchan (both deliver from memory; "
              f"the relay sends after its fsync'ed commit).",
              f"- **Pushes:** {each(webhook, fmt_rps)} webhook pushes/s, "
              f"**{each([ratio(r, number(p.get('ceiling_http'))) for r, p in zip(webhook, pushes)], lambda v: f'{v:.2f}')}×** "
              f"the receiver's own ceiling (`wrk`); APNs over HTTP/2 {each(apns, fmt_rps)} pushes/s, "
              f"{each([ratio(r, number(p.get('ceiling_h2'))) for r, p in zip(apns, pushes)], lambda v: f'{v:.2f}')}× "
              f"`h2load`'s.",
              "", README_END]
    wrapped = [textwrap.fill(line, 100, subsequent_indent="  " if line.startswith("- ") else "",
                             break_on_hyphens=False) if line else line for line in readme]
    splice(readme_path, README_BEGIN, README_END, "\n".join(wrapped))


def splice(path, begin, end, block):
    """Replaces what lies between the markers in PATH (appends the block when they are missing)."""
    with open(path) as f:
        text = f.read()
    if begin in text and end in text:
        head, rest = text.split(begin, 1)
        text = head + block + rest.split(end, 1)[1]
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    with open(path, "w") as f:
        f.write(text)


COMMANDS = {
    "parse-wrk": cmd_parse_wrk, "parse-redis": cmd_parse_redis, "set": cmd_set, "batch-delta": cmd_batch_delta,
    "life": cmd_life, "cost": cmd_cost,
    "fill-pushrelay": cmd_fill_pushrelay, "fill-nchan": cmd_fill_nchan,
    "check-pushrelay": cmd_check_pushrelay, "check-nchan": cmd_check_nchan,
    "median": cmd_median, "report": cmd_report, "fsync": cmd_fsync, "summary": cmd_summary,
}

if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in COMMANDS:
        sys.exit(__doc__)
    COMMANDS[sys.argv[1]](sys.argv[2:])
