"""Time `dupfind synth` on a scenario of about N lines: `python bench/synth_speed.py --lines 1000000`."""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dupfind.synth import write_scenario  # noqa: E402

CALIBRATION_JOBS = 2000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--lines", type=int, default=1_000_000, help="target number of log lines")
    parser.add_argument("--preset", default="baseline")
    parser.add_argument("--format", default="ndjson", dest="fmt")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", type=Path, help="keep the scenario in this folder (default: a temporary one)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        probe = write_scenario(args.preset, Path(tmp) / "probe", seed=args.seed, jobs=CALIBRATION_JOBS, fmt=args.fmt)
        per_job = probe["counters"]["lines"] / CALIBRATION_JOBS
        jobs = max(1, math.ceil(args.lines / per_job))
        out = args.out or Path(tmp) / "run"
        start = time.perf_counter()
        truth = write_scenario(args.preset, out, seed=args.seed, jobs=jobs, fmt=args.fmt)
        seconds = time.perf_counter() - start
        size = sum(f.stat().st_size for f in out.iterdir())
    lines = truth["counters"]["lines"]
    print(f"preset={args.preset} format={args.fmt} jobs={jobs} files={len(truth['files'])} bytes={size}")
    print(f"lines={lines} seconds={seconds:.2f} lines_per_s={lines / seconds:,.0f}")


if __name__ == "__main__":
    main()
