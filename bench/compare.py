#!/usr/bin/env python3
"""Benchmark: `dupfind analyze` (cold and warm) against hand-written DuckDB SQL and jq.

Generates a realistic scenario with `dupfind synth` (default preset deploy-overlap: a producer,
a queue broker, a deploy pipeline and many worker pods, with duplicates), cached under --work so
reruns skip generation, then measures, K times each, alternating, one fresh process per run:

  * dupfind cold:  `dupfind analyze LOGS --format json --no-cache` (every detector, no cache)
  * dupfind warm:  `dupfind analyze LOGS --format json` again, after one priming run filled the
                   cache of canonical tables
  * duckdb:        one SQL statement (python duckdb) for three core checks: (a) job ids started
                   by more than one worker, (b) executions of one job that overlap in time,
                   (c) provider request before the status write with another execution
                   starting in between
  * jq:            check (a) alone
  * next:          the first run of trace --finding, stats, analyze --format markdown and timeline
                   (JSON), then of the terminal views of trace ID, analyze, stats and timeline,
                   after one analyze filled the cache (--next-cold: each of them cold too)

and prints median/min wall time, lines/s, MB/s and peak RSS for each, the ratios
dupfind-cold/DuckDB and dupfind-warm/dupfind-cold, and the counts each tool found for the
three checks beside dupfind's (a sanity check, not an equality).

Run:  /work/venv/bin/python bench/compare.py --lines 1000000
See bench/README.md. Figures from a shared 2-core machine are indications, not tests.
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import orjson

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _measure import compile_package, dupfind_revision, dupfind_state, emit, fmt_rate, gnu_time_prefix, rss_hwm_mb, run

HERE = os.path.abspath(__file__)
# Runs each measured dupfind command (see its docstring for why not `compare.py --child`).
DUPFIND_CHILD = os.path.join(os.path.dirname(HERE), "dupfind_child.py")
DEFAULT_PRESET = "deploy-overlap"
CALIBRATION_JOBS = 2000
SCENARIO_FORMAT = "ndjson"

# ------------------------------------------------------------------------------------------
# The hand-written checks. Raw field names and event names as the synth services spell them
# (styles snake, camel, terse and sqs); an engineer would read them off the logs. The driver
# warns when dupfind.synth's styles use a name these lists miss (see _vocabulary_drift).
# ------------------------------------------------------------------------------------------

JOB_FIELDS = ("job_id", "jobId", "jid", "MessageId")
WORKER_FIELDS = ("worker_id", "hostname", "pod", "instance_id")
EVENT_FIELDS = ("event", "eventName", "evt", "event_type")
ISO_TS_FIELDS = ("ts", "timestamp", "@timestamp")
EPOCH_MS_FIELDS = ("t",)

START_EVENTS = ("job_received", "job_started", "message_received", "processing_started", "job_reserved",
                "perform_start", "receive_message", "handler_started")
REQUEST_EVENTS = ("provider_request", "send_email", "send_push", "send_sms", "deduct_stock", "provider_call",
                  "external_call")
STATUS_EVENTS = ("status_updated", "marked_sent", "db_update", "status_write")


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _lit(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _in_list(values: tuple[str, ...]) -> str:
    return "(" + ", ".join(_lit(v) for v in values) + ")"


def duckdb_sql(files: list[str]) -> str:
    """The three checks in one statement over the raw files (every used field read as VARCHAR)."""
    columns = JOB_FIELDS + WORKER_FIELDS + EVENT_FIELDS + ISO_TS_FIELDS + EPOCH_MS_FIELDS
    cols = ", ".join(f"{_lit(c)}: 'VARCHAR'" for c in columns)
    source = (f"read_json([{', '.join(_lit(f) for f in files)}], format='newline_delimited', "
              f"ignore_errors=true, columns={{{cols}}})")

    def coalesce(names: tuple[str, ...]) -> str:
        return f"coalesce({', '.join(_ident(n) for n in names)})"

    started = f"ev IN {_in_list(START_EVENTS)}"
    return f"""
WITH ev AS (
    SELECT {coalesce(JOB_FIELDS)} AS job,
           {coalesce(WORKER_FIELDS)} AS worker,
           {coalesce(EVENT_FIELDS)} AS ev,
           coalesce(epoch_us(try_cast({coalesce(ISO_TS_FIELDS)} AS TIMESTAMPTZ)),
                    try_cast({_ident(EPOCH_MS_FIELDS[0])} AS BIGINT) * 1000) AS ts_us
    FROM {source}
),
-- one execution per (job id, worker) that received or started the job: its first and last
-- record, first start, first provider request, first status write
exe AS MATERIALIZED (
    SELECT job, worker, min(ts_us) AS t0, max(ts_us) AS t1,
           min(ts_us) FILTER (WHERE {started}) AS started,
           min(ts_us) FILTER (WHERE ev IN {_in_list(REQUEST_EVENTS)}) AS req,
           min(ts_us) FILTER (WHERE ev IN {_in_list(STATUS_EVENTS)}) AS saved
    FROM ev
    WHERE job IS NOT NULL AND worker IS NOT NULL AND ts_us IS NOT NULL
    GROUP BY job, worker
    HAVING min(ts_us) FILTER (WHERE {started}) IS NOT NULL
),
-- (a) job ids started by more than one worker
a AS (SELECT job FROM exe GROUP BY job HAVING count(*) > 1),
-- (b) two workers' executions of one job whose [first, last] record intervals intersect
b AS (SELECT DISTINCT x.job FROM exe x JOIN exe y ON x.job = y.job AND x.worker < y.worker
      WHERE x.t0 < y.t1 AND y.t0 < x.t1),
-- (c) a provider request with no status write after it yet (none at all, or a later one), and
--     another worker's execution starting inside that window
c AS (SELECT DISTINCT x.job FROM exe x JOIN exe y ON x.job = y.job AND x.worker <> y.worker
      WHERE x.req IS NOT NULL AND (x.saved IS NULL OR x.saved > x.req)
        AND y.started > x.req AND (x.saved IS NULL OR y.started < x.saved))
SELECT (SELECT count(*) FROM a), (SELECT count(*) FROM b), (SELECT count(*) FROM c), (SELECT count(*) FROM exe)
"""


def jq_program() -> str:
    """Check (a) alone: job ids whose receive/start records name more than one worker.

    Raw lines (-R) parsed with `fromjson?`: worker logs hold plain-text traceback lines and lines
    cut by a SIGKILL, on which a plain `jq` over the files stops with an error."""
    job = " // ".join(f".{n}" for n in JOB_FIELDS)
    worker = " // ".join(f".{n}" for n in WORKER_FIELDS)
    event = " // ".join(f".{n}" for n in EVENT_FIELDS)
    return (
        f'reduce (inputs | fromjson? | select(type == "object")'
        f' | select($starts[({event} // "") | tostring] != null)'
        f" | [({job}), ({worker})] | select(.[0] != null and .[1] != null)) as [$j, $w]"
        " ({}; .[$j | tostring][$w | tostring] = 1)"
        " | [.[] | select(length > 1)] | length"
    )


def _vocabulary_drift() -> list[str]:
    """Names dupfind.synth's styles write that the hand-written checks do not list."""
    try:
        from dupfind.synth import styles
    except ImportError as exc:  # only a note in the output
        return [f"could not compare with dupfind.synth.styles: {exc}"]
    missing = []
    for style in styles.STYLES.values():
        if style.name == "deploy":
            continue
        pairs = [("job", JOB_FIELDS), ("worker", WORKER_FIELDS), ("event", EVENT_FIELDS)]
        for slot, names in pairs:
            if style.keys[slot] not in names:
                missing.append(f"{style.name}: field {style.keys[slot]!r} ({slot})")
        if style.keys["ts"] not in ISO_TS_FIELDS + EPOCH_MS_FIELDS:
            missing.append(f"{style.name}: field {style.keys['ts']!r} (ts)")
        events = [(style.event("receive"), START_EVENTS), (style.event("start"), START_EVENTS),
                  (style.event("commit"), STATUS_EVENTS)]
        channels = ("email", "push", "sms", "stock")
        events += [(style.side_effect_event(ch), REQUEST_EVENTS) for ch in channels]
        for name, names in events:
            if name not in names:
                missing.append(f"{style.name}: event {name!r}")
    return missing


# ------------------------------------------------------------------------------------------
# Children (each runs in a fresh interpreter)
# ------------------------------------------------------------------------------------------


def child_generate(preset: str, seed: int, lines: int, out_dir: Path) -> None:
    """Write the scenario (calibrating jobs per line on a small probe first) and report it."""
    from dupfind.synth import write_scenario

    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="dupfind-compare-probe-") as tmp:
        probe = write_scenario(preset, Path(tmp), seed=seed, jobs=CALIBRATION_JOBS, fmt=SCENARIO_FORMAT)
    per_job = probe["counters"]["lines"] / CALIBRATION_JOBS
    jobs = max(1, math.ceil(lines / per_job))
    calib_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    truth = write_scenario(preset, out_dir, seed=seed, jobs=jobs, fmt=SCENARIO_FORMAT)
    gen_s = time.perf_counter() - t0
    emit({"jobs": jobs, "lines_per_job": per_job, "calibration_s": calib_s, "seconds": gen_s,
          "counters": truth["counters"], "rss_peak_mb": rss_hwm_mb()})


def child_duckdb(files_list: Path) -> None:
    import duckdb

    files = orjson.loads(files_list.read_bytes())
    con = duckdb.connect()
    sql = duckdb_sql(files)
    t0 = time.perf_counter()
    row = con.execute(sql).fetchone()
    seconds = time.perf_counter() - t0
    emit({"seconds": seconds, "rss_peak_mb": rss_hwm_mb(),
          "counts": {"a": row[0], "b": row[1], "c": row[2], "executions": row[3]},
          "threads": con.execute("SELECT current_setting('threads')").fetchone()[0]})


# ------------------------------------------------------------------------------------------
# Scenario (generated once per --work directory)
# ------------------------------------------------------------------------------------------


def _log_files(logs: Path) -> list[Path]:
    """Every regular, non-hidden file under logs, sorted (what `dupfind analyze DIR` reads)."""
    return sorted(p for p in logs.rglob("*")
                  if p.is_file() and not any(part.startswith(".") for part in p.relative_to(logs).parts))


def _count_lines(files: list[Path]) -> int:
    n = 0
    for f in files:
        last = b""
        with f.open("rb") as fh:
            while chunk := fh.read(1 << 24):
                n += chunk.count(b"\n")
                last = chunk
        if last and not last.endswith(b"\n"):
            n += 1
    return n


def scenario(args, work: Path) -> dict:
    """Reuse the scenario under work/ when it was made with the same settings and is intact."""
    meta_path = work / "scenario.json"
    key = {"preset": args.preset, "seed": args.seed, "lines_target": args.lines, "format": SCENARIO_FORMAT}
    logs = work / "scenario" / "logs"
    if meta_path.is_file() and not args.regenerate:
        try:
            meta = orjson.loads(meta_path.read_bytes())
            files = _log_files(logs)
            sizes = {str(p.relative_to(logs)): p.stat().st_size for p in files}
            if meta.get("key") == key and meta.get("sizes") == sizes:
                meta["reused"] = True
                return meta
        except (OSError, ValueError):
            pass
        print("the cached scenario does not match these settings or was changed: generating it again")
    work.mkdir(parents=True, exist_ok=True)
    meta_path.unlink(missing_ok=True)
    res = run([sys.executable, HERE, "--child", "generate", "--preset", args.preset, "--seed", str(args.seed),
               "--lines", str(args.lines), "--dir", str(work / "scenario")], cwd=work, timeout=args.timeout)
    if "seconds" not in res:
        sys.exit(f"generating the scenario failed: {res.get('error')}")
    files = _log_files(logs)
    meta = {
        "key": key, "generated_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "jobs": res["jobs"], "lines_per_job_probe": res["lines_per_job"], "generate_s": res["seconds"],
        "calibration_s": res["calibration_s"], "generate_rss_mb": res["rss_peak_mb"], "counters": res["counters"],
        "lines": _count_lines(files), "bytes": sum(p.stat().st_size for p in files), "files": len(files),
        "sizes": {str(p.relative_to(logs)): p.stat().st_size for p in files},
    }
    meta_path.write_bytes(orjson.dumps(meta))
    meta["reused"] = False
    return meta


# ------------------------------------------------------------------------------------------
# Driver
# ------------------------------------------------------------------------------------------

CONTENDERS = {
    "cold": "dupfind analyze (cold)",
    "warm": "dupfind analyze (warm)",
    "duckdb": "duckdb: checks a+b+c",
    "jq": "jq: check a",
    "windowed": "dupfind analyze (windows)",
    "next": "other commands after analyze",
}
# The `windowed` contender's --memory-limit: half the input, but not below what reading needs
# (reading alone takes about 0.5 GB whatever the input's size).
WINDOWED_MIN_LIMIT = 600 * 10**6
# What an engineer runs after `analyze`: the first run of each, over the cache that one analyze
# left (a fresh copy of it per run). {fingerprint} is the first harmful finding of that analyze,
# {job_id} the first job id it names.
NEXT_COMMANDS = {
    "trace --finding": ["trace", "--finding", "{fingerprint}", "--format", "json"],
    "stats": ["stats", "--format", "json"],
    "analyze --format markdown": ["analyze", "--format", "markdown"],
    "timeline": ["timeline", "--format", "json"],
    # The terminal views, as an engineer runs them (written to a file here: no colour, 100 columns).
    "trace ID (table)": ["trace", "--id", "{job_id}"],
    # An id whose trace analyze did not draw (commands/trace.py: prepare_worst_traces draws the
    # worst finding's): the table is searched, so polars is loaded.
    "trace other ID (table)": ["trace", "--id", "{other_id}"],
    "analyze (table)": ["analyze"],
    "stats (table)": ["stats"],
    "timeline (table)": ["timeline"],
}


def next_argv(template: list[str], findings: list[dict], logs: Path) -> list[str]:
    """A NEXT_COMMANDS entry's command line over `logs`, for the priming analyze's `findings`: its
    first harmful one's fingerprint and first job id (else fingerprint, for `trace --id`), and as
    `other_id` the first job id of the last harmful finding that names another (the first
    finding's own id is the trace analyze prepares)."""
    finding = next(f for f in findings if f.get("harmful"))
    job_id = next(iter(finding.get("ids", {}).get("job_id") or []), finding["fingerprint"])
    prepared = next((ids[0] for f in findings if (ids := _finding_ids(f))), None)
    other_id = next((ids[0] for f in reversed(findings) if f.get("harmful") and (ids := _finding_ids(f))
                     and ids[0] != prepared), job_id)
    argv = [a.format(fingerprint=finding["fingerprint"], job_id=job_id, other_id=other_id) for a in template]
    return [argv[0], str(logs), *argv[1:]]


def _finding_ids(finding: dict) -> list[str]:
    """The ids `trace` would be given for a finding: its job ids, else its first named ids."""
    ids = finding.get("ids", {})
    return ids.get("job_id") or next((values for values in ids.values() if values), [])


def dupfind_failed(res: dict) -> bool:
    """Whether a dupfind run failed (exit 0 is clean, 1 is findings at --fail-on); its error noted."""
    if res.get("exit_code", res["exit"]) in (0, 1):
        return False
    res.setdefault("error", res["stderr"].strip()[-6000:] or f"exit status {res['exit']}")
    return True


def _dir_bytes(path: Path) -> tuple[int, int]:
    if not path.exists():
        return 0, 0
    files = [p for p in path.rglob("*") if p.is_file()]
    return len(files), sum(p.stat().st_size for p in files)


def _no_cache_supported(env: dict) -> bool:
    out = subprocess.run([sys.executable, DUPFIND_CHILD, "analyze", "--help"],
                         capture_output=True, text=True, check=False, env={**env, "COLUMNS": "200"})
    return "--no-cache" in out.stdout


def _snapshot(rev: str, work: Path) -> tuple[Path, str]:
    """Export dupfind/ and rules/ of one commit (git archive) under work/, to measure a fixed
    version while others edit the checkout; the dupfind children import it via PYTHONPATH."""
    import importlib.util
    import io
    import tarfile

    spec = importlib.util.find_spec("dupfind")
    if spec is None or not spec.origin:
        sys.exit("--at: dupfind is not importable, so there is no checkout to export from")
    repo = str(Path(spec.origin).parent.parent)
    try:
        sha = subprocess.run(["git", "-C", repo, "rev-parse", "--verify", f"{rev}^{{commit}}"],
                             capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError) as exc:
        sys.exit(f"--at {rev}: not a commit of {repo}: {getattr(exc, 'stderr', '') or exc}".strip())
    src = work / f"src-{sha[:12]}"
    if not (src / "dupfind" / "__init__.py").is_file():
        data = subprocess.run(["git", "-C", repo, "archive", "--format=tar", sha, "dupfind", "rules"],
                              capture_output=True, check=True).stdout
        tmp = Path(tempfile.mkdtemp(prefix="src-", dir=work))
        with tarfile.open(fileobj=io.BytesIO(data)) as tar:
            tar.extractall(tmp, filter="data")
        shutil.rmtree(src, ignore_errors=True)
        tmp.rename(src)
    return src, sha


def _versions() -> str:
    from importlib.metadata import PackageNotFoundError, version

    parts = [f"python {platform.python_version()}"]
    for pkg in ("dupfind", "polars", "duckdb", "orjson"):
        try:
            parts.append(f"{pkg} {version(pkg)}")
        except PackageNotFoundError:
            parts.append(f"{pkg} (not installed)")
    jq = shutil.which("jq")
    if jq:
        parts.append(subprocess.run([jq, "--version"], capture_output=True, text=True, check=False).stdout.strip())
    else:
        parts.append("jq (not installed)")
    return ", ".join(parts)


def _machine() -> str:
    nproc = subprocess.run(["nproc"], capture_output=True, text=True, check=False).stdout.strip() or "?"
    mem = ""
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemTotal:"):
                    mem = f", {int(line.split()[1]) / 1024 / 1024:.1f} GiB RAM"
    except OSError:
        pass
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"nproc {nproc} ({cpu}){mem}, {platform.system()} {platform.release()}"


def _loadavg() -> str:
    try:
        return " ".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:
        return "?"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lines", type=int, default=1_000_000, help="about how many log lines to generate (default 1000000)")
    ap.add_argument("--repeat", type=int, default=3, help="measured runs per contender (default 3)")
    ap.add_argument("--work", type=Path, default=None,
                    help="scenario, reports and cache directory (default /tmp/dupfind-compare-N); reused by reruns")
    ap.add_argument("--preset", default=DEFAULT_PRESET, help=f"dupfind synth preset (default {DEFAULT_PRESET})")
    ap.add_argument("--seed", type=int, default=1, help="synth seed (default 1)")
    ap.add_argument("--regenerate", action="store_true", help="generate the scenario again even if cached")
    ap.add_argument("--only", default=",".join(CONTENDERS),
                    help=f"comma-separated contenders to run (default {','.join(CONTENDERS)})")
    ap.add_argument("--timeout", type=float, default=1800, help="seconds before one run is killed (default 1800)")
    ap.add_argument("--next-cold", action="store_true",
                    help="with the 'next' contender, also time each of those commands cold (--no-cache)")
    ap.add_argument("--next-windowed", action="store_true",
                    help="with the 'next' contender, give the priming analyze and each command the windowed "
                         "contender's --memory-limit: the follow-ups of inputs read in windows of time")
    ap.add_argument("--at", metavar="REV",
                    help="measure dupfind as committed at REV (exported under --work), not the live checkout")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--dir", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--files", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    if args.child == "generate":
        child_generate(args.preset, args.seed, args.lines, args.dir)
        return 0
    if args.child == "duckdb":
        child_duckdb(args.files)
        return 0

    if args.lines < 1 or args.repeat < 1:
        ap.error("--lines and --repeat must be positive")
    only = [c.strip() for c in args.only.split(",") if c.strip()]
    unknown = [c for c in only if c not in CONTENDERS]
    if unknown or not only:
        ap.error(f"--only takes a comma-separated subset of {','.join(CONTENDERS)}")
    work = (args.work or Path(f"/tmp/dupfind-compare-{args.lines}")).resolve()
    return _bench(args, work, [c for c in CONTENDERS if c in only])


def _bench(args, work: Path, contenders: list[str]) -> int:
    meta = scenario(args, work)
    logs = work / "scenario" / "logs"
    files = [str(p) for p in _log_files(logs)]
    lines, size = meta["lines"], meta["bytes"]
    mb = size / 1e6
    c = meta["counters"]
    how = (f"reused (generated {meta['generated_at']} in {meta['generate_s']:.1f} s)" if meta["reused"]
           else f"generated in {meta['generate_s']:.1f} s (+{meta['calibration_s']:.1f} s calibrating on "
                f"{CALIBRATION_JOBS} jobs; generator peak RSS {meta['generate_rss_mb']:.0f} MB)")
    print(f"scenario: dupfind synth {args.preset} --seed {args.seed} --jobs {meta['jobs']:,} --format {SCENARIO_FORMAT}: {how}")
    print(f"  {logs}: {meta['files']} files, {lines:,} lines (synth counted {c['lines']:,}), {mb:,.1f} MB, "
          f"{size / max(lines, 1):.0f} bytes/line")
    print(f"  truth: {c['actions']:,} actions, {c['duplicated_actions']:,} duplicated, {c['executions']:,} executions, "
          f"{c['redeliveries']:,} redeliveries, {c['lease_expirations']:,} lease expirations, "
          f"{c['killed_executions']:,} killed executions, {c['retries']:,} retries")
    print(f"machine: {_machine()}; load average at start {_loadavg()}")
    print(f"versions: {_versions()}")
    child_env = dict(os.environ)
    if args.at:
        src, sha = _snapshot(args.at, work)
        child_env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(src), os.environ.get("PYTHONPATH")]))
        state = None
        print(f"dupfind at {sha[:12]} ({args.at}), exported to {src}: the live checkout is not measured")
        print(compile_package(src / "dupfind"))
    else:
        state = dupfind_state()
        print(dupfind_revision())
        print(compile_package())
    drift = _vocabulary_drift()
    if drift:
        print("WARNING: the hand-written checks miss names the synth styles use: " + "; ".join(drift))

    out_dir = work / "out"
    out_dir.mkdir(parents=True, exist_ok=True)
    files_list = out_dir / "files.json"
    files_list.write_bytes(orjson.dumps(files))
    notes: list[str] = []
    no_cache = _no_cache_supported(child_env) if ("cold" in contenders or "warm" in contenders) else True
    if "cold" not in contenders:
        pass
    elif not no_cache:
        notes.append("this dupfind's analyze does not accept --no-cache: cold runs use DUPFIND_CACHE_DIR set to a fresh "
                     "empty directory per run instead (so a cold run includes writing the cache, if dupfind writes one)")
    else:
        notes.append("cold runs pass --no-cache, with DUPFIND_CACHE_DIR also set to a fresh empty directory per run")
    warm_cache = work / "cache-warm"
    time_prefix = gnu_time_prefix()
    jq = shutil.which("jq")
    if "jq" in contenders and not jq:
        notes.append("jq is not installed (apt-get install -y jq): jq runs skipped")
        contenders = [k for k in contenders if k != "jq"]
    if "duckdb" in contenders:
        probe = subprocess.run([sys.executable, "-c", "import duckdb"], capture_output=True, check=False)
        if probe.returncode:
            notes.append("duckdb is not importable (pip install duckdb): DuckDB runs skipped")
            contenders = [k for k in contenders if k != "duckdb"]
    if "jq" in contenders and not time_prefix:
        notes.append("GNU time (/usr/bin/time) is missing: no peak RSS for jq")

    analyze = ["analyze", str(logs), "--format", "json"]
    windowed_limit = max(size // 2, WINDOWED_MIN_LIMIT)
    if "windowed" in contenders:
        notes.append(f"windowed runs pass --no-cache --memory-limit {windowed_limit} ({windowed_limit / size:.2f}x the input): "
                     "analyze reads the inputs in windows of time that fit")

    def measure(kind: str, tag: str) -> dict:
        env = dict(child_env)
        stdout_path = None
        scratch = None
        if kind in ("cold", "warm", "windowed"):
            if kind in ("cold", "windowed"):
                scratch = Path(tempfile.mkdtemp(prefix="cold-cache-", dir=work))
                env["DUPFIND_CACHE_DIR"] = str(scratch)
                cmd = [sys.executable, DUPFIND_CHILD, *analyze, *(["--no-cache"] if no_cache else [])]
                if kind == "windowed":
                    cmd += ["--memory-limit", str(windowed_limit)]
            else:
                env["DUPFIND_CACHE_DIR"] = str(warm_cache)
                cmd = [sys.executable, DUPFIND_CHILD, *analyze]
            stdout_path = out_dir / f"{tag}.json"
        elif kind == "duckdb":
            cmd = [sys.executable, HERE, "--child", "duckdb", "--files", str(files_list)]
        else:
            starts = orjson.dumps(dict.fromkeys(START_EVENTS, 1)).decode()
            cmd = [*(time_prefix or []), jq, "-n", "-R", "-r", "--argjson", "starts", starts, jq_program(), *files]
        res = run(cmd, cwd=work, timeout=args.timeout, env=env, stdout_path=stdout_path)
        if kind in ("cold", "warm", "windowed"):
            dupfind_failed(res)
        if kind == "jq":
            if "error" not in res:
                try:
                    res["counts"] = {"a": int(res["stdout"].strip())}
                except ValueError:
                    res["error"] = f"unexpected jq output: {res['stdout'][:200]!r}"
            res["seconds"] = res["proc_seconds"]
            if "rss_peak_kb" in res:
                res["rss_peak_mb"] = res["rss_peak_kb"] / 1024
        if scratch is not None:
            n, b = _dir_bytes(scratch)
            res["cold_cache_written"] = (n, b)
            shutil.rmtree(scratch, ignore_errors=True)
        res.pop("stdout", None)
        return res

    if "warm" in contenders:
        shutil.rmtree(warm_cache, ignore_errors=True)
        prime = measure("warm", "warm-prime")
        n, b = _dir_bytes(warm_cache)
        if "error" in prime:
            print(f"priming run FAILED: {prime['error']}")
        else:
            print(f"priming run for warm (untimed in the table): {prime['proc_seconds']:.2f} s, "
                  f"{prime['rss_peak_mb']:.0f} MB; cache dir {warm_cache}: {n} files, {b / 1e6:.1f} MB")
        if n == 0:
            notes.append("the priming run wrote nothing to DUPFIND_CACHE_DIR: 'warm' is a plain second run, no cache")

    follow = "next" in contenders
    contenders = [k for k in contenders if k != "next"]
    print(f"{args.repeat} runs each, alternating (order rotates), one fresh process per run, timeout {args.timeout:.0f} s")
    runs: dict[str, list[dict]] = {k: [] for k in contenders}
    for rep in range(args.repeat if contenders else 0):
        order = contenders[rep % len(contenders):] + contenders[: rep % len(contenders)]
        for kind in order:
            res = measure(kind, kind)
            runs[kind].append(res)
            status = (f"{res['proc_seconds']:.2f} s, {res['rss_peak_mb']:.0f} MB" if "error" not in res and "rss_peak_mb" in res
                      else f"{res['proc_seconds']:.2f} s" if "error" not in res else "FAILED")
            print(f"  run {rep + 1}/{args.repeat} {CONTENDERS[kind]:<24} {status}", file=sys.stderr, flush=True)

    print()
    header = (f"{'contender':<24} {'median s':>9} {'min s':>7} {'in-proc s':>10} {'lines/s':>9} {'MB/s':>7} "
              f"{'peak RSS MB':>12}")
    print(header)
    print("-" * len(header))
    med: dict[str, float] = {}
    inproc: dict[str, float] = {}
    failures = []
    for kind in contenders:
        ok = [r for r in runs[kind] if "error" not in r]
        failures += [(kind, r) for r in runs[kind] if "error" in r]
        if not ok:
            print(f"{CONTENDERS[kind]:<24} {'failed':>9}")
            continue
        m = statistics.median(r["proc_seconds"] for r in ok)
        med[kind] = m
        inproc[kind] = statistics.median(r.get("seconds", r["proc_seconds"]) for r in ok)
        rss = [r["rss_peak_mb"] for r in ok if "rss_peak_mb" in r]
        print(f"{CONTENDERS[kind]:<24} {m:>9.2f} {min(r['proc_seconds'] for r in ok):>7.2f} {inproc[kind]:>10.2f} "
              f"{fmt_rate(lines / m):>9} {mb / m:>7.1f} {(f'{max(rss):.0f}' if rss else 'n/a'):>12}")
    print("(median/min s: wall time of the whole command, interpreter start included; lines/s and MB/s from the median;")
    print(" in-proc s: dupfind = the CLI call in its process incl. imports; duckdb = the SQL statement alone, as the DuckDB")
    print(" CLI would take; jq = wall. Peak RSS: max over runs of the process's own VmHWM, jq's from GNU time; MB = 10^6 bytes")
    print(f" of input, RSS in MiB. Input: {lines:,} lines, {mb:,.1f} MB in {meta['files']} files.)")
    if "cold" in med and "duckdb" in med:
        print(f"ratio dupfind-cold / DuckDB: {med['cold'] / med['duckdb']:.1f}x by wall time, "
              f"{med['cold'] / inproc['duckdb']:.1f}x against DuckDB's SQL statement alone")
    if "cold" in med and "warm" in med:
        print(f"ratio dupfind-warm / dupfind-cold: {med['warm'] / med['cold']:.2f}x")
    if "cold" in med and "jq" in med:
        print(f"ratio jq (check a) / dupfind-cold: {med['jq'] / med['cold']:.1f}x")
    if "windowed" in med:
        rss = max(r["rss_peak_mb"] for r in runs["windowed"] if "rss_peak_mb" in r) * 2**20
        line = (f"windowed: peak RSS {rss / size:.2f}x the input, {rss / windowed_limit:.2f}x its --memory-limit "
                f"of {windowed_limit / 1e6:,.0f} MB")
        if "cold" in med:
            line += f"; time {med['windowed'] / med['cold']:.2f}x the cold run's"
        print(line)
    print(f"load average at end {_loadavg()} (other work shares this machine: the figures are noisy)")
    if state is not None and dupfind_state() != state:
        print(f"WARNING: dupfind/ changed during the runs (now {dupfind_revision()}): the figures mix versions")
    for note in notes:
        print(f"note: {note}")
    cold_written = [r["cold_cache_written"] for r in runs.get("cold", []) if r.get("cold_cache_written", (0, 0))[0]]
    if cold_written and no_cache:
        print(f"note: with --no-cache a cold run still wrote {cold_written[0][0]} files "
              f"({cold_written[0][1] / 1e6:.1f} MB) into its DUPFIND_CACHE_DIR")

    _sanity(runs, out_dir, meta)
    if follow:
        limit = ["--memory-limit", str(windowed_limit)] if args.next_windowed else []
        failures += _next_commands(args, work, logs, child_env, out_dir, med.get("cold"), limit)
    for kind, res in failures[:4]:
        print(f"\n{CONTENDERS[kind]} FAILED (exit {res.get('exit')}):\n{res.get('error')}")
    return 1 if failures else 0


def _next_commands(args, work: Path, logs: Path, child_env: dict, out_dir: Path,
                   analyze_cold: float | None, limit: list[str]) -> list[tuple[str, dict]]:
    """The first run of each NEXT_COMMANDS entry after one analyze, K times each from a fresh copy of
    the cache that analyze left; with --next-cold, each command cold too. Prints a table. `limit`
    (--memory-limit SIZE, with --next-windowed) is given to every run: inputs read in windows."""
    base = work / "cache-next"
    shutil.rmtree(base, ignore_errors=True)
    env = dict(child_env, DUPFIND_CACHE_DIR=str(base))
    primed = out_dir / "next-prime.json"
    res = run([sys.executable, DUPFIND_CHILD, "analyze", str(logs), "--format", "json", *limit],
              cwd=work, timeout=args.timeout, env=env, stdout_path=primed, first_byte=True)
    doc = _report(primed)
    finding = next((f for f in (doc or {}).get("findings", []) if f.get("harmful")), None)
    if finding is None:
        print("\nother commands after analyze: skipped (the priming analyze found no harmful finding)")
        return [("next", {"error": res.get("stderr", "")[-2000:] or "no harmful finding"})]
    shown = f"report after {res['first_byte_seconds']:.2f} s, " if "first_byte_seconds" in res else ""
    read = f"in windows of time, {' '.join(limit)}; " if limit else ""
    print(f"\nother commands after analyze ({read}priming analyze with the cache on: {shown}{res['proc_seconds']:.2f} s "
          f"in all, {res.get('rss_peak_mb', 0):.0f} MB; trace --finding {finding['fingerprint']}):")
    header = (f"{'command':<28} {'first run s':>11} {'min s':>7} {'peak RSS MB':>12} {'cold s':>8} {'first/cold':>10}"
              f" {'/ analyze cold':>14}")
    print(header)
    print("-" * len(header))
    failures = []

    def once(argv: list[str], cache: Path | None) -> dict | None:
        """One run over a fresh cache directory (a copy of `cache`, or empty); None when it failed."""
        scratch = Path(tempfile.mkdtemp(prefix="next-cache-", dir=work))
        if cache is not None:
            shutil.rmtree(scratch)
            shutil.copytree(cache, scratch)
            os.sync()  # the copy's dirty pages written back before the run, not during it
        res = run([sys.executable, DUPFIND_CHILD, *argv], cwd=work, timeout=args.timeout,
                  env=dict(child_env, DUPFIND_CACHE_DIR=str(scratch)), stdout_path=out_dir / "next.out")
        shutil.rmtree(scratch, ignore_errors=True)
        if dupfind_failed(res):
            failures.append(("next", res))
            return None
        return res

    for name, template in NEXT_COMMANDS.items():
        argv = [*next_argv(template, doc["findings"], logs), *limit]
        firsts = [r for r in (once(argv, base) for _ in range(args.repeat)) if r]
        colds = [r for r in (once([*argv, "--no-cache"], None) for _ in range(args.repeat if args.next_cold else 0)) if r]
        if not firsts:
            print(f"{name:<28} {'failed':>11}")
            continue
        first = statistics.median(r["proc_seconds"] for r in firsts)
        cold = statistics.median(r["proc_seconds"] for r in colds) if colds else None
        rss = max(r.get("rss_peak_mb", 0) for r in firsts)
        ratio = f"{first / cold:.2f}x" if cold else "n/a"
        # The goal's measure: the first run against a cold `analyze` of the same run (issue 8, at most 0.1x).
        goal = f"{first / analyze_cold:.2f}x" if analyze_cold else "n/a"
        print(f"{name:<28} {first:>11.2f} {min(r['proc_seconds'] for r in firsts):>7.2f} {rss:>12.0f} "
              f"{(f'{cold:.2f}' if cold else 'n/a'):>8} {ratio:>10} {goal:>14}")
    shutil.rmtree(base, ignore_errors=True)
    note = "each command's own cold run (--no-cache)" if args.next_cold else "not measured (--next-cold)"
    print(f"(first run s: median wall time of the command's first run over a fresh copy of the cache one analyze left;"
          f"\n cold s: {note}" + (f"; dupfind analyze cold took {analyze_cold:.2f} s" if analyze_cold else "")
          + ";\n / analyze cold: first run s against that cold analyze (the goal: at most 0.10x; n/a without cold in --only))")
    return failures


def _report(path: Path) -> dict | None:
    try:
        return orjson.loads(path.read_bytes())
    except (OSError, ValueError):
        return None


def _sanity(runs: dict[str, list[dict]], out_dir: Path, meta: dict) -> None:
    """The three checks' counts beside dupfind's own figures, and cold vs warm reports."""
    duck = next((r["counts"] for r in runs.get("duckdb", []) if "counts" in r), None)
    duck_all = {orjson.dumps(r["counts"]) for r in runs.get("duckdb", []) if "counts" in r}
    jq = next((r["counts"] for r in runs.get("jq", []) if "counts" in r), None)
    cold = _report(out_dir / "cold.json") if any("error" not in r for r in runs.get("cold", [])) else None
    warm_ok = any("error" not in r for r in runs.get("warm", []))
    doc = cold or (_report(out_dir / "warm.json") if warm_ok else None)
    print()
    print("sanity check: what each tool counted (they need not match; see bench/README.md)")
    rules: dict[str, int] = {}
    multi_worker = repeated = None
    if doc:
        rules = {r["code"]: r["findings"] for r in doc.get("rules", [])}
        seen: set = set()
        for f in doc.get("findings", []):
            if len(set(f.get("workers") or [])) > 1:
                ids = f.get("ids") or {}
                seen.add(tuple(sorted(ids.get("job_id") or [])) or f.get("fingerprint"))
        multi_worker = len(seen)
        repeated = doc.get("summary", {}).get("actions_with_repeated_executions")

    def cell(d: dict | None, k: str) -> str:
        return f"{d[k]:,}" if d and k in d else "-"

    def dcell(x) -> str:
        return f"{x:,}" if isinstance(x, int) else "-"

    print(f"  {'check':<58} {'duckdb':>8} {'jq':>8}  dupfind")
    print(f"  {'(a) job ids started by more than one worker':<58} {cell(duck, 'a'):>8} {cell(jq, 'a'):>8}  "
          f"{dcell(multi_worker)} actions in findings naming >1 worker; "
          f"{dcell(repeated)} actions with >1 execution (summary)")
    print(f"  {'(b) executions of one job overlapping in time':<58} {cell(duck, 'b'):>8} {'':>8}  "
          f"DF102 {dcell(rules.get('DF102'))} + DF103 {dcell(rules.get('DF103'))}")
    print(f"  {'(c) request before status write, another start in between':<58} {cell(duck, 'c'):>8} {'':>8}  "
          f"DF104 {dcell(rules.get('DF104'))}")
    c = meta["counters"]
    print(f"  truth (synth): {c['duplicated_actions']:,} duplicated actions, DF101 (dupfind) {dcell(rules.get('DF101'))}; "
          f"duckdb executions (job id, worker) {cell(duck, 'executions')} vs truth executions {c['executions']:,}")
    if len(duck_all) > 1:
        print("  WARNING: DuckDB runs disagreed with each other")
    if not doc:
        print("  (no dupfind report to compare)")
    windowed = _report(out_dir / "windowed.json") if any("error" not in r for r in runs.get("windowed", [])) else None
    if windowed is not None:
        count = windowed.get("summary", {}).get("windows", {}).get("count")
        if cold is None:
            print(f"  windowed report: {count} windows (no cold report to compare)")
        else:
            windowed["summary"] = {k: v for k, v in windowed["summary"].items() if k != "windows"}
            windowed["warnings"] = [w for w in windowed["warnings"] if "of time to stay within" not in w]
            diff = sorted(k for k in set(cold) | set(windowed) if cold.get(k) != windowed.get(k))
            print(f"  windowed report ({count} windows) equals the cold report, but for saying how it was read"
                  if not diff else f"  WARNING: windowed report ({count} windows) differs from cold report in: {', '.join(diff)}")
    cold_bytes = (out_dir / "cold.json").read_bytes() if cold else None
    warm_bytes = (out_dir / "warm.json").read_bytes() if warm_ok and (out_dir / "warm.json").is_file() else None
    if cold_bytes is not None and warm_bytes is not None:
        if cold_bytes == warm_bytes:
            print(f"  warm report identical to cold report ({len(cold_bytes) / 1e6:.1f} MB of JSON)")
        else:
            w = orjson.loads(warm_bytes)
            diff = sorted(k for k in set(cold) | set(w) if cold.get(k) != w.get(k))
            print(f"  WARNING: warm report differs from cold report in: {', '.join(diff)} "
                  f"(compare {out_dir / 'cold.json'} and {out_dir / 'warm.json'})")


if __name__ == "__main__":
    sys.exit(main())
