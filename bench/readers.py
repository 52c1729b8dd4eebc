#!/usr/bin/env python3
"""Benchmark: JSON readers on the same files, producing the same narrow set of text columns.

The question behind it (issue 8): is polars' own NDJSON reader the bottleneck of ingestion, and
would another reader (DuckDB's read_json handed to polars, pyarrow.json) be faster? Every
contender reads the same files into the same columns (the field-alias keys present in them,
all as text) and hands a polars DataFrame back; each runs in a fresh process, alternating.

Run:  /work/venv/bin/python bench/readers.py DIR_OR_FILES... [--repeat 3]
      (e.g. the logs of `dupfind synth deploy-overlap --jobs ...` or bench/compare.py's scenario)

Contenders (skipped when their package is missing):
  polars-infer-per-file   per file: full schema inference, then read_ndjson (dupfind before issue 8)
  polars-schema-per-file  per file: read_ndjson with the explicit schema
  polars-schema-batches   files joined into ~16 MB blocks, read_ndjson with the explicit schema
                          (dupfind's fast path since issue 8, without its key discovery)
  polars-keys-batches     the same plus dupfind's key discovery (sampled keys + one multi-pattern scan)
  duckdb-read-json        read_json(files, columns={...}, format='newline_delimited',
                          ignore_errors=true) -> pl.DataFrame(relation) (Arrow PyCapsule)
  pyarrow-json            pyarrow.json.read_json with the explicit schema, blocks of 16 MB

Malformed lines: the polars and pyarrow readers refuse a block with one bad line, so every
contender reads copies of the files without the lines that are not JSON objects (written to a
temporary directory first, not timed): the figures compare the readers, not bad-line handling.
"""

from __future__ import annotations

import argparse
import io
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _measure import (
    emit,
    rss_hwm_mb,
    run,
)

CONTENDERS = (
    "polars-infer-per-file",
    "polars-schema-per-file",
    "polars-schema-batches",
    "polars-keys-batches",
    "duckdb-read-json",
    "pyarrow-json",
)
BLOCK = 16 << 20


def _files(paths: list[str]) -> list[str]:
    found: list[str] = []
    for raw in paths:
        p = Path(raw)
        found.extend(sorted(str(f) for f in p.rglob("*") if f.is_file()) if p.is_dir() else [str(p)])
    return found


def _json_lines(path: str) -> bytes:
    return Path(path).read_bytes()


def _clean_copies(files: list[str], into: Path) -> list[str]:
    import orjson

    out = []
    for index, f in enumerate(files):
        keep = []
        for line in Path(f).read_bytes().split(b"\n"):
            try:
                if isinstance(orjson.loads(line), dict):
                    keep.append(line)
            except orjson.JSONDecodeError:
                pass
        target = into / f"{index:05d}-{Path(f).name}"
        target.write_bytes(b"\n".join(keep) + b"\n")
        out.append(str(target))
    return out


def _blocks(files: list[str]) -> list[bytes]:
    blocks, pending, size = [], [], 0
    for f in files:
        data = _json_lines(f)
        pending.append(data)
        size += len(data)
        if size >= BLOCK:
            blocks.append(b"".join(pending))
            pending, size = [], 0
    if pending:
        blocks.append(b"".join(pending))
    return blocks


def _keys(files: list[str]) -> list[str]:
    """The field-alias keys present in the files (what dupfind would read)."""
    import orjson

    from dupfind.config import load_config
    from dupfind.ingest import LineParser

    wanted = LineParser(load_config()).json_keys
    keys: set[str] = set()
    for f in files:
        for line in Path(f).read_bytes().split(b"\n"):
            try:
                value = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            if isinstance(value, dict):
                keys.update(k for k in value if k in wanted)
    return sorted(keys)


def child(kind: str, files: list[str], keys: list[str]) -> None:
    import polars as pl

    schema = {k: pl.String for k in keys}
    t0 = time.perf_counter()
    rows = 0
    if kind == "polars-infer-per-file":
        for f in files:
            data = _json_lines(f)
            present = pl.scan_ndjson(io.BytesIO(data), infer_schema_length=None).collect_schema()
            wanted = {k: pl.String for k in present if k in schema} or {"_none": pl.String}
            rows += pl.read_ndjson(io.BytesIO(data), schema=wanted).height
    elif kind == "polars-schema-per-file":
        for f in files:
            rows += pl.read_ndjson(io.BytesIO(_json_lines(f)), schema=schema).height
    elif kind == "polars-schema-batches":
        for block in _blocks(files):
            rows += pl.read_ndjson(io.BytesIO(block), schema=schema).height
    elif kind == "polars-keys-batches":
        from dupfind.config import load_config
        from dupfind.ingest import LineParser

        parser = LineParser(load_config())
        for block in _blocks(files):
            texts = pl.Series(block.decode().splitlines())
            found = {k: pl.String for k in parser._present_keys(texts)} or {"_none": pl.String}
            rows += pl.read_ndjson(io.BytesIO(block), schema=found).height
    elif kind == "duckdb-read-json":
        import duckdb

        columns = "{" + ",".join(f"'{k}': 'VARCHAR'" for k in keys) + "}"
        rel = duckdb.connect().sql(
            f"SELECT * FROM read_json({files!r}, columns={columns}, format='newline_delimited', ignore_errors=true)"
        )
        rows = pl.DataFrame(rel).height
    elif kind == "pyarrow-json":
        import pyarrow as pa
        import pyarrow.json as pj

        options = pj.ParseOptions(
            explicit_schema=pa.schema([(k, pa.string()) for k in keys]), unexpected_field_behavior="ignore"
        )
        try:
            for block in _blocks(files):
                rows += pl.from_arrow(pj.read_json(io.BytesIO(block), parse_options=options)).height
        except pa.ArrowInvalid as exc:  # a number where the schema says string: pyarrow does not convert
            emit({"error": str(exc)[:120]})
            return
    emit({"seconds": time.perf_counter() - t0, "rows": rows, "rss": rss_hwm_mb()})


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("paths", nargs="+")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--only", action="append", choices=CONTENDERS)
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--keys", help=argparse.SUPPRESS)
    args = ap.parse_args()
    files = _files(args.paths)
    if args.child:
        child(args.child, files, args.keys.split("\x1f"))
        return 0
    import tempfile

    scratch = tempfile.TemporaryDirectory(prefix="dupfind-readers-", dir="/tmp")
    files = _clean_copies(files, Path(scratch.name))
    keys = _keys(files)
    if not keys:
        print("no JSON object lines with field-alias keys in these files (envelopes such as CRI are not unwrapped here)")
        scratch.cleanup()
        return 2
    size = sum(os.path.getsize(f) for f in files)
    print(f"{len(files)} files, {size / 1e6:.0f} MB of JSON object lines, {len(keys)} alias keys present")
    contenders = list(args.only or CONTENDERS)
    results: dict[str, list[dict]] = {c: [] for c in contenders}
    for rep in range(args.repeat):
        order = contenders[rep % len(contenders) :] + contenders[: rep % len(contenders)]
        for kind in order:
            cmd = [sys.executable, os.path.abspath(__file__), *files, "--child", kind, "--keys", "\x1f".join(keys)]
            res = run(cmd, timeout=1800)
            found = {k: res[k] for k in ("seconds", "rows", "rss", "error") if k in res}
            if "No module named" in res.get("stderr", ""):
                found = {"error": "not installed"}
            results[kind].append(found)
            print(
                f"  run {rep + 1}/{args.repeat} {kind:24s} {found.get('seconds', float('nan')):6.2f} s {found.get('error', '')}",
                flush=True,
            )
    print(f"\n{'reader':24s} {'median s':>9s} {'min s':>7s} {'rows':>10s} {'peak RSS MB':>12s}")
    for kind, runs in results.items():
        good = [r for r in runs if "seconds" in r]
        if not good:
            print(
                f"{kind:24s} {'-':>9s} {'-':>7s} {'-':>10s} {'-':>12s}  {runs[0].get('error', 'failed') if runs else ''}"
            )
            continue
        secs = [r["seconds"] for r in good]
        print(
            f"{kind:24s} {statistics.median(secs):9.2f} {min(secs):7.2f} {good[0]['rows']:10,} {max(r['rss'] for r in good):12.0f}"
        )
    scratch.cleanup()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
