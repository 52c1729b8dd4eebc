#!/usr/bin/env python3
"""Benchmark: read N lines of realistic queue-worker NDJSON into dupfind's canonical table.

Generates a file of heterogeneous worker logs (several services with different field
spellings, nested objects, ECS-style keys, ISO and epoch timestamps, an id that is an int on
some lines and a string on others, a few malformed and blank lines), then measures, K times
each and alternating, in a fresh subprocess per measurement:

  * dupfind:        ``ingest([path], load_config())`` (the library call behind every command)
  * duckdb count:   ``SELECT count(*) FROM read_json(..., ignore_errors=true, columns={...})``
  * duckdb group:   the same scan with a GROUP BY on the job id (forces materialisation)

and prints median wall time, lines/s, MB/s and peak RSS for each, the dupfind/DuckDB ratio,
and dupfind's own line accounting (records + rejected + blank must equal lines).

Run:  /work/venv/bin/python bench/ingest.py --lines 1000000
See bench/README.md. Figures from a shared 2-core machine are indications, not tests.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zlib
from datetime import datetime, timedelta, timezone
from pathlib import Path

import orjson

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _measure import compile_package, emit, run
from _measure import dupfind_revision as _dupfind_revision
from _measure import fmt_rate as _fmt_rate
from _measure import rss_hwm_mb as _rss_hwm_mb

START = datetime(2026, 7, 21, 8, 0, 0, tzinfo=timezone.utc)
START_US = int(START.timestamp() * 1_000_000)
MIDNIGHT = START.replace(hour=0)
MIDNIGHT_US = int(MIDNIGHT.timestamp() * 1_000_000)

# ------------------------------------------------------------------------------------------
# Generation
# ------------------------------------------------------------------------------------------

# The lifecycle of one job attempt, as each service spells it (all names are in
# rules/vocabulary.toml after folding: lower case, `.`/space/`-` -> `_`).
LIFECYCLE = ["job_received", "job_started", "provider_request", "provider_response", "db_update", "job_acked"]
REDELIVERY = ["job_received", "job_started", "noop_already_sent", "job_acked"]
FAILURE = ["job_received", "job_started", "provider_request", "provider_timeout", "job_failed", "retrying"]
SPELLING = {
    # service "notifier" (structlog): snake_case names
    "notifier": {n: n for n in LIFECYCLE + REDELIVERY + FAILURE},
    # service "billing" (Node): dotted names
    "billing": {n: n.replace("_", ".", 1) for n in LIFECYCLE + REDELIVERY + FAILURE},
    # service "pusher" (Go): human text in msg
    "pusher": {n: n.replace("_", " ") for n in LIFECYCLE + REDELIVERY + FAILURE},
    # service "stock" (ECS): snake_case in event.action
    "stock": {n: n for n in LIFECYCLE + REDELIVERY + FAILURE},
}
SERVICES = ["notifier", "billing", "pusher", "stock"]
SERVICE_WEIGHTS = [0.40, 0.25, 0.20, 0.15]
PROVIDERS = {"notifier": "sendgrid", "billing": "stripe", "pusher": "fcm", "stock": "warehouse-api"}
QUEUES = {"notifier": "emails", "billing": "charges", "pusher": "push", "stock": "stock-updates"}
TEXT = {
    "job_received": "received message from queue",
    "job_started": "processing job",
    "provider_request": "calling provider",
    "provider_response": "provider replied",
    "provider_timeout": "provider timed out after 30s",
    "db_update": "status persisted",
    "job_acked": "message acknowledged",
    "noop_already_sent": "skipping: already sent",
    "job_failed": "job failed, will retry",
    "retrying": "scheduling retry with backoff",
}
HEX = "0123456789abcdef"


class Clock:
    """Monotone-ish microsecond clock with cached per-day date strings."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.us = START_US
        self._day = -1
        self._date = ""

    def tick(self) -> int:
        self.us += int(self.rng.expovariate(1 / 9000)) + 1  # ~110 lines per second of log time
        return self.us

    def iso(self, us: int, micro: bool) -> str:
        day, rest = divmod(us - MIDNIGHT_US, 86_400_000_000)
        if day != self._day:
            self._day = day
            self._date = (MIDNIGHT + timedelta(days=day)).strftime("%Y-%m-%d")
        secs, frac = divmod(rest, 1_000_000)
        h, rem = divmod(secs, 3600)
        m, s = divmod(rem, 60)
        if micro:
            return f"{self._date}T{h:02d}:{m:02d}:{s:02d}.{frac:06d}Z"
        return f"{self._date}T{h:02d}:{m:02d}:{s:02d}.{frac // 1000:03d}Z"


class Job:
    __slots__ = ("service", "n", "as_int", "steps", "pos", "attempt", "worker", "deploy", "entity", "request")

    def __init__(self, service: str, n: int, rng: random.Random, workers: dict, deploys: dict) -> None:
        self.service = service
        self.n = n
        self.as_int = rng.random() < 0.3  # the same key holds 9381 on some lines, "q-9381" on others
        r = rng.random()
        if r < 0.03:
            self.steps = LIFECYCLE + REDELIVERY  # redelivered after success: the guard held
        elif r < 0.05:
            self.steps = FAILURE + LIFECYCLE  # failed once, retried
        else:
            self.steps = LIFECYCLE
        self.pos = 0
        self.attempt = 1
        self.worker = rng.choice(workers[service])
        self.deploy = deploys[service]
        self.entity = rng.randrange(1, 5_000_000)
        self.request = "".join(rng.choices(HEX, k=16))


def _record(job: Job, name: str, clock: Clock, rng: random.Random) -> dict:
    us = clock.tick()
    svc = job.service
    spelled = SPELLING[svc][name]
    jid = job.n if job.as_int else f"q-{job.n}"
    level = "error" if name in ("job_failed", "provider_timeout") else "info"
    if svc == "notifier":
        rec = {
            "ts": clock.iso(us, micro=False), "level": level, "event": spelled,
            "job_id": jid, "worker_id": job.worker,
            "deployment_id": job.deploy, "attempt": job.attempt, "queue": QUEUES[svc],
            "notification_id": f"ntf-{job.entity}", "request_id": job.request,
        }
        if name.startswith("provider"):
            rec["provider"] = PROVIDERS[svc]
            rec["duration_ms"] = rng.randrange(40, 2500)
        return rec
    if svc == "billing":
        if rng.random() < 0.05:  # a pino child logger: numeric level, epoch-ms time
            return {
                "level": 30 if level == "info" else 50, "time": us // 1000, "pid": 4000 + zlib.crc32(job.worker.encode()) % 900,
                "hostname": job.worker, "msg": TEXT[name], "eventName": spelled, "jobId": jid,
                "version": job.deploy, "retries": job.attempt - 1,
            }
        rec = {
            "timestamp": clock.iso(us, micro=True), "severity": level.upper(), "eventName": spelled,
            "jobId": jid, "hostname": job.worker, "version": job.deploy, "retries": job.attempt - 1,
            "orderId": f"ord_{job.entity:08d}", "traceId": job.request, "message": TEXT[name],
        }
        if name.startswith("provider"):
            rec["provider"] = PROVIDERS[svc]
            rec["durationMs"] = rng.randrange(40, 2500)
        return rec
    if svc == "pusher":
        rec = {
            "time": clock.iso(us, micro=False), "lvl": level, "msg": spelled, "pod": job.worker,
            "release": job.deploy,
            "ctx": {"jid": jid, "attempt": job.attempt, "queue": QUEUES[svc], "device_count": rng.randrange(1, 4)},
        }
        if name.startswith("provider"):
            rec["ctx"]["provider"] = PROVIDERS[svc]
            rec["ctx"]["took_ms"] = rng.randrange(10, 900)
        return rec
    # stock: ECS
    rec = {
        "@timestamp": clock.iso(us, micro=rng.random() < 0.5), "log.level": level,
        "message": TEXT[name],
        "event": {"action": spelled, "dataset": "stock.worker", "outcome": "failure" if level == "error" else "success"},
        "service": {"name": "stock-worker", "version": job.deploy},
        "host": {"name": job.worker}, "job": {"id": jid}, "deliveryAttempt": job.attempt,
        "order_id": f"ord_{job.entity:08d}",
    }
    return rec


def _heartbeat(svc: str, worker: str, deploy: str, clock: Clock, rng: random.Random) -> dict:
    us = clock.tick()
    if svc == "stock":
        return {
            "@timestamp": clock.iso(us, micro=False), "log.level": "debug", "message": "heartbeat",
            "event": {"action": "heartbeat", "dataset": "stock.worker"},
            "host": {"name": worker}, "service": {"name": "stock-worker", "version": deploy},
            "labels": {"inflight": rng.randrange(0, 8), "queue_depth": rng.randrange(0, 50_000)},
        }
    return {
        "ts": clock.iso(us, micro=svc == "billing"), "level": "debug", "event": "heartbeat",
        "worker_id": worker, "service": svc, "deployment_id": deploy,
        "inflight": rng.randrange(0, 8), "queue_depth": rng.randrange(0, 50_000),
        "mem_rss_mb": round(rng.uniform(120, 900), 1),
    }


def _malformed(rec: dict, rng: random.Random) -> bytes:
    line = orjson.dumps(rec)
    r = rng.random()
    if r < 0.6:  # truncated mid-line (a log shipper cut the write)
        return line[: rng.randrange(5, max(6, len(line) - 5))]
    if r < 0.8:  # two records glued together without a newline
        return line + line[: len(line) // 2]
    return b"Traceback (most recent call last): File \"/app/worker.py\", line 88, in handle"


def generate(path: Path, lines: int, seed: int, bad_rate: float = 0.0001) -> dict:
    """Write `lines` physical lines to path; returns what was written (for the sanity check)."""
    rng = random.Random(seed)
    clock = Clock(rng)
    workers = {
        s: [f"{s}-{''.join(rng.choices(HEX, k=10))}-{''.join(rng.choices('bcdfghjklmnpqrstvwxz2456789', k=5))}" for _ in range(12)]
        for s in SERVICES
    }
    deploys = {"notifier": "rel-2026.07.21-3", "billing": "v3.14.2", "pusher": "1.42.0-9f3c2a1", "stock": "2026.07.2"}
    active: list[Job] = []
    next_job = 9381
    for _ in range(64):
        svc = rng.choices(SERVICES, SERVICE_WEIGHTS)[0]
        active.append(Job(svc, next_job, rng, workers, deploys))
        next_job += 1
    blank = malformed = 0
    out: list[bytes] = []
    dumps = orjson.dumps
    with open(path, "wb", buffering=1 << 20) as fh:
        for i in range(lines):
            r = rng.random()
            if r < bad_rate:
                out.append(b"")
                blank += 1
                continue
            if r < 0.14:
                svc = rng.choices(SERVICES, SERVICE_WEIGHTS)[0]
                rec = _heartbeat(svc, rng.choice(workers[svc]), deploys[svc], clock, rng)
            else:
                k = rng.randrange(len(active))
                job = active[k]
                name = job.steps[job.pos]
                if job.pos and name == "job_received":
                    job.attempt += 1
                rec = _record(job, name, clock, rng)
                job.pos += 1
                if job.pos == len(job.steps):
                    svc = rng.choices(SERVICES, SERVICE_WEIGHTS)[0]
                    active[k] = Job(svc, next_job, rng, workers, deploys)
                    next_job += 1
            if r > 1 - bad_rate:
                out.append(_malformed(rec, rng))
                malformed += 1
            else:
                out.append(dumps(rec))
            if len(out) >= 50_000:
                fh.write(b"\n".join(out) + b"\n")
                out.clear()
        if out:
            fh.write(b"\n".join(out) + b"\n")
    return {"lines": lines, "blank": blank, "malformed": malformed, "jobs": next_job - 9381}


# ------------------------------------------------------------------------------------------
# Measured work (runs in a fresh child process)
# ------------------------------------------------------------------------------------------

DUCK_COLUMNS = {
    "ts": "VARCHAR", "timestamp": "VARCHAR", "time": "VARCHAR", "@timestamp": "VARCHAR",
    "event": "VARCHAR", "eventName": "VARCHAR", "msg": "VARCHAR",
    "job_id": "VARCHAR", "jobId": "VARCHAR", "ctx": "VARCHAR", "job": "VARCHAR",
    "worker_id": "VARCHAR", "hostname": "VARCHAR", "attempt": "VARCHAR",
}


def _duck_source(path: str) -> str:
    cols = ", ".join(f"'{k}': '{v}'" for k, v in DUCK_COLUMNS.items())
    quoted = path.replace("'", "''")
    return f"read_json('{quoted}', format='newline_delimited', ignore_errors=true, columns={{{cols}}})"


def child(kind: str, path: str, profile: int) -> None:
    """Do one measured run and print its result as one marked JSON line on stdout."""
    result: dict = {"kind": kind}
    if kind == "dupfind":
        from dupfind.config import load_config
        from dupfind.ingest import ingest

        config = load_config()
        result["rss_before_mb"] = _rss_hwm_mb()
        if profile:
            import cProfile
            import io
            import pstats

            prof = cProfile.Profile()
            t0 = time.perf_counter()
            prof.enable()
            res = ingest([path], config)
            prof.disable()
            result["seconds"] = time.perf_counter() - t0
            buf = io.StringIO()
            pstats.Stats(prof, stream=buf).sort_stats("cumulative").print_stats(profile)
            result["profile"] = buf.getvalue()
        else:
            t0 = time.perf_counter()
            res = ingest([path], config)
            result["seconds"] = time.perf_counter() - t0
        rep = res.files[0]
        result.update(
            format=rep.format, lines=rep.lines, parsed=rep.parsed, records=rep.records, blank=rep.blank,
            rejected={str(k): v for k, v in rep.rejected.items()}, rejected_total=rep.rejected_total, rows=res.table.height,
            columns=res.table.width, kinds={str(k): v for k, v in res.table["kind"].value_counts(sort=True).rows()},
            job_ids_null=res.table["job_id"].null_count() if "job_id" in res.table.columns else None,
            ts_null=res.table["ts"].null_count() if "ts" in res.table.columns else None,
        )
    else:
        import duckdb

        con = duckdb.connect()
        result["rss_before_mb"] = _rss_hwm_mb()
        src = _duck_source(path)
        if kind == "duckdb-count":
            sql = f"SELECT count(*) FROM {src}"
        else:  # group by the job id, whichever spelling carried it
            sql = (
                "SELECT count(*), sum(n) FROM (SELECT coalesce(job_id, jobId, ctx->>'$.jid', job->>'$.id') AS j,"
                f" count(*) AS n FROM {src} GROUP BY j)"
            )
        t0 = time.perf_counter()
        row = con.execute(sql).fetchone()
        result["seconds"] = time.perf_counter() - t0
        result["rows"] = row[0] if kind == "duckdb-count" else int(row[1])
        if kind == "duckdb-group":
            result["groups"] = row[0]
        result["threads"] = con.execute("SELECT current_setting('threads')").fetchone()[0]
    result["rss_peak_mb"] = _rss_hwm_mb()
    emit(result)


def run_child(kind: str, path: Path, cwd: Path, timeout: float, profile: int = 0) -> dict:
    """Run one measurement in a fresh interpreter (peak RSS is that interpreter's own VmHWM)."""
    cmd = [sys.executable, os.path.abspath(__file__), "--child", kind, "--file", str(path)]
    if profile:
        cmd += ["--profile", str(profile)]
    res = run(cmd, cwd=cwd, timeout=timeout)
    stderr = res.pop("stderr").strip()
    res.pop("stdout")
    res["kind"] = kind
    if "seconds" not in res:
        res.setdefault("error", stderr[-6000:] or f"exit status {res['exit']}")
    return res


# ------------------------------------------------------------------------------------------
# Driver
# ------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lines", type=int, default=1_000_000, help="lines to generate (default 1000000)")
    ap.add_argument("--out", type=Path, default=None, help="directory for the generated file (default: a new temp dir under /tmp)")
    ap.add_argument("--repeat", type=int, default=3, help="measurements per contender (default 3)")
    ap.add_argument("--keep", action="store_true", help="keep the generated file")
    ap.add_argument("--seed", type=int, default=20260721, help="generator seed (default 20260721)")
    ap.add_argument("--bad-rate", type=float, default=0.0001,
                    help="fraction of lines that are malformed, and again of lines that are blank (default 0.0001)")
    ap.add_argument("--timeout", type=float, default=1800, help="seconds before a measured run is killed (default 1800)")
    ap.add_argument("--profile", type=int, default=0, metavar="N",
                    help="after the measurements, one extra (untimed) dupfind run under cProfile; print the top N by cumulative time")
    ap.add_argument("--no-duckdb", action="store_true", help="measure dupfind only")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--file", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    if args.child:
        child(args.child, args.file, args.profile)
        return 0

    if args.lines < 1 or args.repeat < 1:
        ap.error("--lines and --repeat must be positive")
    made_dir = args.out is None
    out_dir = Path(tempfile.mkdtemp(prefix="dupfind-bench-", dir="/tmp")) if made_dir else args.out
    out_dir.mkdir(parents=True, exist_ok=True)
    path = (out_dir / f"worker-logs-{args.lines}.ndjson").resolve()
    try:
        return _bench(args, path, out_dir)
    finally:
        if not args.keep:
            path.unlink(missing_ok=True)
            if made_dir:
                shutil.rmtree(out_dir, ignore_errors=True)
        else:
            print(f"\nkept {path}")


def _bench(args, path: Path, out_dir: Path) -> int:
    import platform

    t0 = time.perf_counter()
    meta = generate(path, args.lines, args.seed, args.bad_rate)
    gen_s = time.perf_counter() - t0
    size = path.stat().st_size
    mb = size / 1e6
    print(f"generated {args.lines:,} lines, {mb:.1f} MB ({size / args.lines:.0f} bytes/line), "
          f"{meta['jobs']:,} jobs, {meta['blank']} blank, {meta['malformed']} malformed, in {gen_s:.1f} s")
    print(f"file: {path}")

    # The driver never imports polars or duckdb itself: it stays small, and each measurement
    # runs in a fresh interpreter that imports only what its contender needs.
    from importlib.metadata import PackageNotFoundError, version

    contenders = ["dupfind"]
    versions = f"python {platform.python_version()}, polars {version('polars')}"
    duck_note = None
    if not args.no_duckdb:
        probe = subprocess.run([sys.executable, "-c", "import duckdb"], capture_output=True)
        if probe.returncode == 0:
            contenders += ["duckdb-count", "duckdb-group"]
            try:
                versions += f", duckdb {version('duckdb')}"
            except PackageNotFoundError:
                pass
        else:
            duck_note = "duckdb is not importable here: DuckDB runs skipped (pip install duckdb to compare)"
    print(_dupfind_revision())
    print(compile_package())
    print(f"{versions}; {os.cpu_count()} CPUs; {args.repeat} runs each, alternating, one fresh process per run")
    if duck_note:
        print(duck_note)

    runs: dict[str, list[dict]] = {c: [] for c in contenders}
    for rep in range(args.repeat):
        order = contenders[rep % len(contenders):] + contenders[: rep % len(contenders)]
        for kind in order:
            res = run_child(kind, path, out_dir, args.timeout)
            runs[kind].append(res)
            status = f"{res['seconds']:.2f} s, {res['rss_peak_mb']:.0f} MB" if "seconds" in res else "FAILED"
            print(f"  run {rep + 1}/{args.repeat} {kind:<13} {status}", file=sys.stderr, flush=True)

    print()
    header = f"{'contender':<14} {'median s':>9} {'min s':>7} {'proc s':>7} {'lines/s':>9} {'MB/s':>7} {'peak RSS MB':>12} {'(after import)':>15}"
    print(header)
    print("-" * len(header))
    medians: dict[str, float] = {}
    failures = []
    for kind in contenders:
        ok = [r for r in runs[kind] if "seconds" in r]
        if not ok:
            print(f"{kind:<14} {'failed':>9}")
            failures.append((kind, runs[kind][0]))
            continue
        if len(ok) < len(runs[kind]):
            failures.append((kind, next(r for r in runs[kind] if "seconds" not in r)))
        med = statistics.median(r["seconds"] for r in ok)
        medians[kind] = med
        print(
            f"{kind:<14} {med:>9.2f} {min(r['seconds'] for r in ok):>7.2f} "
            f"{statistics.median(r['proc_seconds'] for r in ok):>7.2f} {_fmt_rate(args.lines / med):>9} "
            f"{mb / med:>7.1f} {max(r['rss_peak_mb'] for r in ok):>12.0f} "
            f"{statistics.median(r['rss_before_mb'] for r in ok):>15.0f}"
        )
    print("(median/min s: the read call alone; proc s: whole child process incl. interpreter start and imports;")
    print(" peak RSS: max over runs of the child's own VmHWM; after import: its VmHWM just before the read)")
    if "dupfind" in medians:
        for other in ("duckdb-count", "duckdb-group"):
            if other in medians:
                print(f"ratio dupfind / {other}: {medians['dupfind'] / medians[other]:.1f}x")

    d = next((r for r in runs.get("dupfind", []) if "seconds" in r), None)
    if d:
        print()
        total = d["records"] + d["rejected_total"] + d["blank"]
        print(f"dupfind accounting: format={d['format']} lines={d['lines']:,} records={d['records']:,} "
              f"rejected={d['rejected_total']:,} {d['rejected']} blank={d['blank']:,}")
        print(f"  records + rejected + blank = {total:,} "
              f"{'==' if total == d['lines'] else '!='} lines {d['lines']:,}; "
              f"generated {meta['malformed']} malformed + {meta['blank']} blank")
        print(f"  table: {d['rows']:,} rows x {d['columns']} columns; null ts {d['ts_null']}, null job_id {d['job_ids_null']:,}")
        print(f"  kinds: {d['kinds']}")
    for kind in ("duckdb-count", "duckdb-group"):
        r = next((r for r in runs.get(kind, []) if "seconds" in r), None)
        if r:
            extra = f", {r['groups']:,} job-id groups" if "groups" in r else ""
            print(f"{kind}: {r['rows']:,} rows{extra} (threads={r['threads']})")
    for kind, res in failures:
        print(f"\n{kind} FAILED (exit {res.get('exit')}):\n{res.get('error')}")

    if args.profile:
        print(f"\ncProfile of one extra dupfind run (untimed), top {args.profile} by cumulative time:")
        res = run_child("dupfind", path, out_dir, args.timeout, profile=args.profile)
        print(res.get("profile") or res.get("error"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
