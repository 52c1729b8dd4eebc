"""Exports that are JSON documents: `dupfind analyze` without the cache over one large document of
each shape, against the same records as NDJSON (issue 8). Prints figures; asserts nothing.

The records are a `dupfind synth deploy-overlap` scenario's, written as the platforms write them
(tests/platform_wrap.py): `gcloud logging read --format=json` (one array, pretty-printed), `aws
logs filter-log-events` (`{"events": [...]}`, indented), search hits (`hits.hits[]._source`), and
CloudWatch Logs subscription data as one Firehose object (gzip members back to back). Each is read
a block at a time; the figures say what that costs next to the NDJSON the scenario wrote.

    /work/venv/bin/python bench/documents.py --jobs 30000 --repeat 2
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

import orjson

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT / "tests"))

from _measure import compile_package, run

SHAPES = ("ndjson", "gcp-gcloud", "cloudwatch-filter-log-events", "elasticsearch", "firehose-object")


def exports(work: Path, jobs: int) -> dict[str, Path]:
    """Each shape's folder (made once per --work and --jobs)."""
    import platform_wrap

    base = work / f"jobs-{jobs}"
    done = base / ".done"
    folders = {shape: base / shape for shape in SHAPES}
    if done.exists():
        return folders
    shutil.rmtree(base, ignore_errors=True)
    with tempfile.TemporaryDirectory(prefix="dupfind-documents-") as tmp:
        subprocess.run([sys.executable, "-m", "dupfind", "synth", "deploy-overlap", "--jobs", str(jobs), "-o", tmp],
                       check=True, cwd=ROOT, capture_output=True)
        logs = Path(tmp) / "logs"
        shutil.copytree(logs, folders["ndjson"])
        files = {}
        for path in sorted(logs.iterdir()):
            records = []
            for line in path.read_text().splitlines():
                try:
                    records.append((line, orjson.loads(line)))
                except orjson.JSONDecodeError:
                    pass  # the scenario's few lines that are not JSON: no platform record
            files[path.stem] = records
    for shape in SHAPES[1:-1]:
        platform_wrap.write_export(files, shape, folders[shape])
    folders["firehose-object"].mkdir(parents=True)
    objects = platform_wrap.firehose_s3(files)
    (folders["firehose-object"] / "notifier-logs-1-2026-11-29-07-00-00-5f2b7a1c").write_bytes(b"".join(objects.values()))
    done.write_text("")
    return folders


def measure(folder: Path, work: Path) -> dict:
    cache = work / "cache"
    shutil.rmtree(cache, ignore_errors=True)
    env = {**os.environ, "DUPFIND_CACHE_DIR": str(cache), "PYTHONPATH": str(ROOT)}
    out = work / "report.json"
    res = run([sys.executable, str(HERE / "dupfind_child.py"), "analyze", str(folder), "--format", "json", "--no-cache"],
              cwd=ROOT, env=env, stdout_path=out)
    if "error" in res:
        raise SystemExit(f"analyze {folder.name} failed: {res['error']}")
    report = orjson.loads(out.read_bytes())
    res["findings"] = sorted(Counter(f["rule"] for f in report.get("findings", [])).items())
    return res


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=30000, help="business actions of the scenario")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "dupfind-documents")
    parser.add_argument("--only", default=",".join(SHAPES), help="comma-separated shapes")
    args = parser.parse_args()
    compile_package()
    folders = exports(args.work, args.jobs)
    shapes = [s for s in args.only.split(",") if s]
    runs: dict[str, list[dict]] = {s: [] for s in shapes}
    for _ in range(args.repeat):  # alternating
        for shape in shapes:
            runs[shape].append(measure(folders[shape], args.work))
    print(f"{args.repeat} run(s) each, alternating, `analyze --format json --no-cache` in a fresh process\n")
    print(f"{'export':30} {'input MB':>9} {'median s':>9} {'peak MiB':>9} {'peak/input':>11}  findings")
    print("-" * 96)
    for shape in shapes:
        size = sum(p.stat().st_size for p in folders[shape].iterdir()) / 1e6
        seconds = statistics.median(r["proc_seconds"] for r in runs[shape])
        peak = max(r["rss_peak_mb"] for r in runs[shape])
        findings = ", ".join(f"{rule} {count}" for rule, count in runs[shape][0]["findings"])
        print(f"{shape:30} {size:9.1f} {seconds:9.2f} {peak:9.0f} {peak * 1.048576 / size:10.2f}x  {findings}")
    print("\n(input MB: 10^6 bytes of the files as written, compressed for the Firehose object; peak: the process's "
          "VmHWM in MiB; peak/input in bytes over bytes; findings: per rule. The platforms' records keep the "
          "scenario's lines, with a platform's own fields around them: a finding's count may differ from NDJSON's)")


if __name__ == "__main__":
    main()
