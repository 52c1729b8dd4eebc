#!/usr/bin/env python3
"""Benchmark: reading speed of each log format dupfind knows, from its fixtures scaled up.

Each text file under `fixtures/formats/*/logs/` is written again, its lines repeated until about
`--lines` lines (a file that is one JSON or YAML document, which repeating would break, is left
out), and read with `ingest` (the library call behind every command) in a fresh process,
`--repeat` times. Prints, slowest first, microseconds a line, lines/s and peak RSS, with the
records and rejected lines of the read (a repeat should read as its original does: the same
share of rejected lines). Finds the formats still read a line at a time in Python.

Run:  /work/venv/bin/python bench/formats_speed.py --lines 50000 [--only structlog,rust]
See bench/README.md. Figures from a shared 2-core machine are indications, not tests.
"""

from __future__ import annotations

import argparse
import gzip
import os
import statistics
import sys
import tempfile
from pathlib import Path

import orjson

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _measure import run

ROOT = Path(__file__).resolve().parent.parent
FORMATS = ROOT / "fixtures" / "formats"
CHILD = """
import sys, time
from dupfind.config import load_config
from dupfind.ingest import ingest
sys.path.insert(0, {bench!r})
from _measure import emit, rss_hwm_mb
t = time.perf_counter()
result = ingest([{path!r}], load_config())
seconds = time.perf_counter() - t
emit({{"seconds": seconds, "records": result.table.height, "rejected": result.rejects.height, "rss_mb": rss_hwm_mb()}})
"""


def _text(path: Path) -> str | None:
    data = path.read_bytes()
    if data.startswith(b"\x1f\x8b"):
        data = gzip.decompress(data)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    head = text.lstrip("\ufeff \t\r\n")[:1]
    if head in ("[", "{") and "\n" in text.strip() and not _one_json_a_line(text):
        return None  # one document over many lines
    if path.suffix in (".yaml", ".yml", ".csv"):
        return None
    return text


def _one_json_a_line(text: str) -> bool:
    try:
        for line in text.splitlines()[:5]:
            if line.strip():
                orjson.loads(line)
    except orjson.JSONDecodeError:
        return False
    return True


def scaled_files(lines: int, only: list[str], work: Path) -> list[tuple[str, Path, int]]:
    """(label, scaled copy, its lines) of each fixture log that can be repeated."""
    out = []
    for path in sorted(FORMATS.glob("*/logs/**/*")):
        if not path.is_file():
            continue
        label = f"{path.parts[len(FORMATS.parts)]}/{path.name}"
        if only and not any(o in label for o in only):
            continue
        text = _text(path)
        if not text or text.count("\n") < 3:
            continue
        if not text.endswith("\n"):
            text += "\n"
        times = max(1, lines // text.count("\n"))
        target = work / label.replace("/", "__")
        target.mkdir(parents=True, exist_ok=True)
        scaled = target / path.name.removesuffix(".gz")
        scaled.write_text(text * times, encoding="utf-8")
        out.append((label, scaled, text.count("\n") * times))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lines", type=int, default=50_000)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--only", default="", help="comma-separated parts of `format/file` names to measure")
    parser.add_argument("--root", type=Path, default=ROOT, help="the checkout whose dupfind/ is measured")
    args = parser.parse_args()
    only = [o for o in args.only.split(",") if o]
    rows = []
    with tempfile.TemporaryDirectory(prefix="dupfind-formats-") as tmp:
        for label, path, lines in scaled_files(args.lines, only, Path(tmp)):
            times, last = [], {}
            for _ in range(args.repeat):
                code = CHILD.format(path=str(path.parent), bench=str(Path(__file__).resolve().parent))
                last = run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": str(args.root)}, timeout=600)
                if "seconds" not in last:
                    print(f"{label}: failed: {last.get('error', '')[-300:]}", file=sys.stderr)
                    break
                times.append(last["seconds"])
            if times:
                seconds = statistics.median(times)
                rows.append((seconds / lines * 1e6, label, lines, seconds, last, path.stat().st_size / 2**20))
    # Records: the repeats of a record are copies of it (dupfind.copies), counted once.
    print(f"{'file (fixtures/formats)':44s} {'lines':>7s} {'MiB':>6s} {'us/line':>8s} {'MB/s':>6s} {'records':>7s} "
          f"{'rejected':>8s} {'RSS MiB':>7s} {'/input':>6s}")
    for per_line, label, lines, seconds, last, mib in sorted(rows, reverse=True):
        print(f"{label[:44]:44s} {lines:7,d} {mib:6.1f} {per_line:8.1f} {mib * 2**20 / 1e6 / seconds:6.1f} "
              f"{last['records']:7,d} {last['rejected']:8,d} {last['rss_mb']:7.0f} {last['rss_mb'] / mib:6.1f}")


if __name__ == "__main__":
    main()
