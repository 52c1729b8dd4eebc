"""Exports of many small files: `dupfind analyze` without the cache, its first run with the cache
and a warm run, over N files of a few lines each (issue 8). Prints figures; asserts nothing.

Log exports often come as many small objects (CloudWatch or Firehose exports to S3, one file per
pod and rotation): there, what dupfind spends per file (listing, keys, sniffing, reports,
pointers) outweighs the lines. The scenario is `dupfind synth deploy-overlap` cut into N files,
each source file's lines in order, in consecutive pieces.

    /work/venv/bin/python bench/many_files.py --files 20000 --repeat 2
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from _measure import compile_package, run

PRESET = "deploy-overlap"
KINDS = ("cold", "first", "warm")


def scenario(work: Path, jobs: int, files: int) -> Path:
    """The N files (made once per --work, --jobs and --files)."""
    logs = work / f"logs-{jobs}-{files}"
    if logs.is_dir() and (work / f"{logs.name}.done").exists():
        return logs
    shutil.rmtree(logs, ignore_errors=True)
    with tempfile.TemporaryDirectory(prefix="dupfind-many-") as tmp:
        subprocess.run([sys.executable, "-m", "dupfind", "synth", PRESET, "--jobs", str(jobs), "-o", tmp],
                       check=True, cwd=ROOT, capture_output=True)
        sources = sorted((Path(tmp) / "logs").iterdir())
        texts = [path.read_bytes().splitlines(keepends=True) for path in sources]
        total = sum(len(lines) for lines in texts)
        logs.mkdir(parents=True)
        for path, lines in zip(sources, texts):
            pieces = min(len(lines), max(1, round(files * len(lines) / total)))
            cuts = [round(k * len(lines) / pieces) for k in range(pieces + 1)]
            for k in range(pieces):
                (logs / f"{path.stem}-{k:05d}.log").write_bytes(b"".join(lines[cuts[k]:cuts[k + 1]]))
    (work / f"{logs.name}.done").write_text("")
    return logs


def measure(kind: str, logs: Path, work: Path, rep: int, root: Path) -> dict:
    cache = work / f"cache-{rep}"
    if kind != "warm":
        shutil.rmtree(cache, ignore_errors=True)
    args = ["analyze", str(logs), "--format", "json", *(["--no-cache"] if kind == "cold" else [])]
    out = work / f"{kind}-{rep}.json"
    # The last run's cache files still being written back would slow this one (a warm run right
    # after a first run: 0.19-0.23 s instead of 0.19-0.20 s).
    os.sync()
    env = {**os.environ, "DUPFIND_CACHE_DIR": str(cache), "PYTHONPATH": str(root)}
    res = run([sys.executable, str(HERE / "dupfind_child.py"), *args], cwd=ROOT, env=env,
              stdout_path=out, first_byte=True)
    if "error" in res:
        raise SystemExit(f"{kind} run failed: {res['error']}")
    res["digest"] = hashlib.sha256(out.read_bytes()).hexdigest()
    return res


# What every warm command imports before it looks at a file (see bench/README.md: for a small
# export these imports, not the cache, bound a warm run). polars is imported by them but loaded at
# its first use (dupfind.lazy_import), which a command answered from the cache never reaches.
WARM_IMPORTS = "import dupfind.cli, dupfind.pipeline, dupfind.windows, dupfind.render.registry"
POLARS_LOADED = "import polars; polars.DataFrame"


def duckdb_checks(logs: Path, work: Path, repeat: int, cold: float) -> None:
    """compare.py's hand-written DuckDB statement (its three checks) over the same files, `repeat`
    times, each in a fresh process: its wall time and the statement's, against analyze without the
    cache."""
    from compare import HERE as COMPARE

    files_list = work / "duckdb-files.json"
    files_list.write_bytes(orjson.dumps([str(p) for p in sorted(logs.iterdir())]))
    runs = []
    for _ in range(repeat):
        res = run([sys.executable, COMPARE, "--child", "duckdb", "--files", str(files_list)], cwd=work,
                  env={**os.environ, "NO_COLOR": "1"})
        if "error" in res:
            raise SystemExit(f"duckdb failed: {res['error']}")
        runs.append(res)
    wall = statistics.median(r["proc_seconds"] for r in runs)
    statement = statistics.median(r["seconds"] for r in runs)
    print(f"\nDuckDB, compare.py's three checks over the same files: {wall:.2f} s ({statement:.2f} s the statement), "
          f"{max(r.get('rss_peak_mb', 0) for r in runs):.0f} MB; dupfind analyze --no-cache / DuckDB: "
          f"{cold / wall:.2f}x by wall time, {cold / statement:.2f}x against the statement")


def next_commands(logs: Path, work: Path, root: Path, repeat: int, cold: float) -> None:
    """The first run of each NEXT_COMMANDS entry over a fresh copy of the cache the first run of
    `analyze --format json` left (cache-0), `repeat` times each; against analyze without the cache."""
    from compare import NEXT_COMMANDS, dupfind_failed, next_argv

    report = orjson.loads((work / "first-0.json").read_bytes())
    finding = next(f for f in report["findings"] if f.get("harmful"))
    print(f"\nother commands, first run after analyze (trace --finding {finding['fingerprint']}):")
    print(f"{'command':28} {'median s':>9} {'min s':>7} {'peak RSS MB':>12} {'/ cold analyze':>15}")
    for name, template in NEXT_COMMANDS.items():
        argv = next_argv(template, report["findings"], logs)
        runs = []
        for _ in range(repeat):
            scratch = work / "cache-next"
            shutil.rmtree(scratch, ignore_errors=True)
            shutil.copytree(work / "cache-0", scratch)
            # The copy's dirty pages written back before the run: `stats --format json` (31.6 MB
            # written) took 0.26 or 0.36 s by whether the kernel flushed the copy during it.
            os.sync()
            env = {**os.environ, "DUPFIND_CACHE_DIR": str(scratch), "PYTHONPATH": str(root), "COLUMNS": "100"}
            res = run([sys.executable, str(HERE / "dupfind_child.py"), *argv], cwd=ROOT, env=env,
                      stdout_path=work / "next.out")
            if dupfind_failed(res):
                raise SystemExit(f"{name} failed: {res['error']}")
            runs.append(res)
        walls = [r["proc_seconds"] for r in runs]
        median = statistics.median(walls)
        print(f"{name:28} {median:9.2f} {min(walls):7.2f} {max(r.get('rss_peak_mb', 0) for r in runs):12.0f} "
              f"{median / cold:14.2f}x")
    shutil.rmtree(work / "cache-next", ignore_errors=True)


def import_floor(root: Path, code: str, runs: int = 5) -> float:
    """Median wall seconds of a fresh interpreter running `code` (an import) with `root` first on the path."""
    env = {**os.environ, "PYTHONPATH": str(root)}
    walls = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], env=env, check=True)
        walls.append(time.perf_counter() - start)
    return statistics.median(walls)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=20000)
    parser.add_argument("--jobs", type=int, default=3000, help="business actions simulated (about 10 lines each)")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "dupfind-many-files")
    parser.add_argument("--next", action="store_true",
                        help="also time the first run of each other command (compare.py's NEXT_COMMANDS) over a copy "
                             "of the cache one analyze left")
    parser.add_argument("--duckdb", action="store_true",
                        help="also time compare.py's DuckDB statement (three checks) over the same files")
    parser.add_argument("--root", type=Path, default=ROOT,
                        help="the checkout whose dupfind/ is measured (a git worktree of another commit)")
    args = parser.parse_args(argv)
    args.work.mkdir(parents=True, exist_ok=True)
    logs = scenario(args.work, args.jobs, args.files)
    files = sorted(logs.iterdir())
    size = sum(p.stat().st_size for p in files)
    lines = sum(p.read_bytes().count(b"\n") for p in files)
    print(f"scenario: dupfind synth {PRESET} --jobs {args.jobs}, cut into {len(files):,} files: "
          f"{lines:,} lines, {size / 1e6:.1f} MB of text ({logs})")
    head = subprocess.run(["git", "-C", str(args.root), "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                          check=False).stdout.strip() or "no git"
    print(f"measured: dupfind under {args.root} ({head}); {compile_package(args.root / 'dupfind')}")
    results: dict[str, list[dict]] = {kind: [] for kind in KINDS}
    for rep in range(args.repeat):
        for kind in KINDS:  # warm after first: the cache the first run left
            res = measure(kind, logs, args.work, rep, args.root)
            results[kind].append(res)
            print(f"  run {rep + 1}/{args.repeat} {kind:5} {res['proc_seconds']:7.2f} s "
                  f"(output from {res.get('first_byte_seconds', 0):.2f} s), {res.get('rss_peak_mb', 0):.0f} MB")
    print()
    print(f"{'run':24} {'median s':>9} {'min s':>7} {'output at s':>12} {'peak RSS MB':>12}")
    for kind, label in zip(KINDS, ("analyze --no-cache", "first run, cache on", "warm")):
        walls = [r["proc_seconds"] for r in results[kind]]
        firsts = [r.get("first_byte_seconds", 0) for r in results[kind]]
        peak = max(r.get("rss_peak_mb", 0) for r in results[kind])
        print(f"{label:24} {statistics.median(walls):9.2f} {min(walls):7.2f} {statistics.median(firsts):12.2f} {peak:12.0f}")
    cold = statistics.median(r["proc_seconds"] for r in results["cold"])
    warm = statistics.median(r["proc_seconds"] for r in results["warm"])
    first = statistics.median(r["proc_seconds"] for r in results["first"])
    print(f"warm / cold: {warm / cold:.3f}x; first run's end / cold: {first / cold:.2f}x "
          f"({len(files):,} files: {1e6 * cold / len(files):.0f} us a file without the cache)")
    bare, polars, every = (import_floor(args.root, code) for code in ("pass", POLARS_LOADED, WARM_IMPORTS))
    print(f"a warm run's floor: the interpreter {bare:.2f} s; the modules a warm command imports {every:.2f} s "
          f"({every / cold:.2f}x of cold); polars loaded, which a warm command does not need, {polars:.2f} s")
    if args.duckdb:
        duckdb_checks(logs, args.work, args.repeat, cold)
    if args.next:
        next_commands(logs, args.work, args.root, args.repeat, cold)
    digests = {r["digest"] for rs in results.values() for r in rs}
    print("reports: " + ("all the same bytes" if len(digests) == 1 else f"{len(digests)} different outputs (!)"))
    (args.work / "last.json").write_bytes(orjson.dumps({k: [{n: v for n, v in r.items() if n not in ("stdout", "stderr")}
                                                             for r in rs] for k, rs in results.items()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
