"""Run one preset's simulation and write its log files and truth.json."""

from __future__ import annotations

import random
from pathlib import Path

import orjson

from dupfind.synth.clock import TimeFormatter
from dupfind.synth.deploys import initial_rollout, rolling_update
from dupfind.synth.engine import us
from dupfind.synth.formats import FORMATS, render_file
from dupfind.synth.noise import noise_records
from dupfind.synth.params import Params
from dupfind.synth.presets import PRESETS, Preset
from dupfind.synth.producers import Producers
from dupfind.synth.truth import build_truth
from dupfind.synth.world import World

PUBLISH_START_S = 5.0


def get_preset(name: str) -> Preset:
    try:
        return PRESETS[name]
    except KeyError:
        raise ValueError(f"Unknown preset {name!r}; run `dupfind synth --list` to see the presets.") from None


def simulate(preset: str, seed: int = 1, jobs: int | None = None, params: Params | None = None) -> World:
    """Run the discrete-event simulation of a preset (or of explicit params) to completion."""
    params = (params or get_preset(preset).params).with_jobs(jobs)
    w = World(params, seed, preset)
    w.engine.spawn(initial_rollout(w))
    producers = Producers(w)
    w.engine.spawn(producers.run(), us(PUBLISH_START_S))
    for at in deploy_times(params.deploy_at, params.deploy_every_s, params.jobs / params.publish_rate):
        w.engine.spawn(rolling_update(w), us(PUBLISH_START_S + at))
    w.engine.run()
    return w


def deploy_times(fractions: tuple[float, ...], every_s: float | None, span: float) -> list[float]:
    """Seconds after publishing starts at which rolling updates begin."""
    times = sorted(f * span for f in fractions)
    if every_s and times:
        t = times[-1] + every_s
        while t < span:
            times.append(t)
            t += every_s
    return times


LOGS_DIR = "logs"  # logs apart from truth.json, so `dupfind analyze DIR/logs` reads only logs


def write_scenario(preset: str, out_dir: Path, seed: int = 1, jobs: int | None = None, fmt: str = "ndjson",
                   params: Params | None = None) -> dict:
    """Simulate a preset; write one log file per host under out_dir/logs/ and out_dir/truth.json.

    `params` replaces the preset's parameters (tests and experiments); the preset name still
    seeds the random stream and labels the truth.
    """
    if fmt not in FORMATS:
        raise ValueError(f"Unknown format {fmt!r}; expected one of {', '.join(FORMATS)}.")
    spec = get_preset(preset)
    w = simulate(preset, seed, jobs, params)
    end = w.engine.now + us(2.0)
    out_dir = Path(out_dir)
    logs_dir = out_dir / LOGS_DIR
    logs_dir.mkdir(parents=True, exist_ok=True)
    _remove_previous_scenario(out_dir)
    rng = random.Random(f"dupfind-synth-render:{preset}:{seed}")
    tf = TimeFormatter()
    params = w.p.as_dict()
    files = []
    for log in sorted(w.logs, key=lambda lg: lg.name):
        records = log.records + noise_records(log, rng, log.end if log.end is not None else end, params)
        data, stats = render_file(records, log.style, fmt, rng, log.skew_us, w.p.drop_rate, w.p.reorder_rate, tf)
        (logs_dir / log.name).write_bytes(data)
        log.records = []  # rendered: free the memory before the next file
        files.append({
            "name": log.name, "kind": log.kind, "host": log.host, "style": log.style.name,
            "clock_skew_ms": round(log.skew_us / 1000, 3), "records": stats.records, "lines": stats.lines,
            "bytes": len(data), "dropped_lines": stats.dropped, "reordered_lines": stats.reordered,
        })
    truth = build_truth(w, preset, spec.description, fmt, files, end)
    (out_dir / "truth.json").write_bytes(truth_bytes(truth))
    return truth


def _remove_previous_scenario(out_dir: Path) -> None:
    """Delete the log files an earlier run wrote here (listed in its truth.json), and nothing else."""
    old_truth = out_dir / "truth.json"
    if not old_truth.is_file():
        return
    try:
        files = orjson.loads(old_truth.read_bytes()).get("files", [])
    except (orjson.JSONDecodeError, AttributeError):
        return
    for entry in files:
        name = entry.get("name") if isinstance(entry, dict) else None
        if isinstance(name, str) and name.endswith(".log") and "/" not in name and "\\" not in name:
            (out_dir / LOGS_DIR / name).unlink(missing_ok=True)


def truth_bytes(truth: dict) -> bytes:
    """truth.json text: one top-level key per line, and one line per action (diff-friendly, compact)."""
    parts = [b"{\n"]
    keys = list(truth)
    for i, key in enumerate(keys):
        sep = b",\n" if i < len(keys) - 1 else b"\n"
        value = truth[key]
        if isinstance(value, list) and value and isinstance(value[0], dict):
            items = b",\n".join(b"  " + orjson.dumps(v) for v in value)
            parts.append(orjson.dumps(key) + b": [\n" + items + b"\n]" + sep)
        else:
            parts.append(orjson.dumps(key) + b": " + orjson.dumps(value) + sep)
    parts.append(b"}\n")
    return b"".join(parts)
