"""Line writers: NDJSON, logfmt, Docker json-file and Kubernetes CRI, with log faults applied."""

from __future__ import annotations

import random
from operator import itemgetter

import orjson

from dupfind.synth.clock import TimeFormatter
from dupfind.synth.model import Record
from dupfind.synth.styles import Style

FORMATS = ("ndjson", "logfmt", "docker", "cri")
# Real runtimes split at 16 KiB; a smaller limit makes partial lines show up in small scenarios.
CRI_SPLIT_BYTES = 512
_DUMPS = orjson.dumps


class RenderStats:
    __slots__ = ("records", "lines", "dropped", "reordered")

    def __init__(self) -> None:
        self.records = 0
        self.lines = 0
        self.dropped = 0
        self.reordered = 0


def _apply_faults(records: list[Record], rng: random.Random, skew: int, drop_rate: float, reorder_rate: float, stats: RenderStats) -> list[tuple[int, Record]]:
    records.sort(key=itemgetter(0))
    if drop_rate:
        kept = []
        for rec in records:
            if rng.random() < drop_rate:
                stats.dropped += 1
            else:
                kept.append(rec)
        records = kept
    out = [(rec[0] + skew, rec) for rec in records]
    if reorder_rate:
        i = 0
        n = len(out) - 1
        while i < n:
            if rng.random() < reorder_rate:
                # An async logger flushed two lines in the wrong order.
                out[i], out[i + 1] = out[i + 1], out[i]
                stats.reordered += 1
                i += 2
            else:
                i += 1
    return out


def _record_dict(style: Style, tf: TimeFormatter, t: int, rec: Record) -> dict:
    K = style.keys
    kind = style.ts_kind
    ts = tf.iso_ms(t) if kind == "iso_ms" else tf.iso_us(t) if kind == "iso_us" else tf.epoch_ms(t)
    d = {K["ts"]: ts, K["level"]: style.levels[rec[1]], K["event"]: rec[2], K["msg"]: rec[3]}
    base = rec[4]
    if base:
        d.update(base)
    extra = rec[5]
    if extra:
        for k, v in extra.items():
            d[K.get(k, k)] = v
    return d


def _logfmt_value(v) -> str:
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, (int, float)):
        return str(v)
    s = str(v)
    if s == "" or any(c in s for c in ' ="\\\t\n'):
        return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t") + '"'
    return s


def _logfmt_pairs(prefix: str, d: dict, out: list[str]) -> None:
    for k, v in d.items():
        if v is None:
            continue
        if isinstance(v, dict):
            _logfmt_pairs(f"{prefix}{k}.", v, out)
        else:
            out.append(f"{prefix}{k}={_logfmt_value(v)}")


def _logfmt_line(style: Style, d: dict) -> str:
    ts_key = style.keys["ts"]
    ts = d.pop(ts_key)
    parts: list[str] = [ts] if isinstance(ts, str) else [f"{ts_key}={ts}"]
    _logfmt_pairs("", d, parts)
    return " ".join(parts)


def render_file(records: list[Record], style: Style, fmt: str, rng: random.Random, skew: int,
                drop_rate: float, reorder_rate: float, tf: TimeFormatter) -> tuple[bytes, RenderStats]:
    """Serialize one host's records (true times) into the bytes of its log file."""
    stats = RenderStats()
    lines = _apply_faults(records, rng, skew, drop_rate, reorder_rate, stats)
    out: list[bytes] = []
    append = out.append
    if fmt == "ndjson":
        for t, rec in lines:
            if rec[1] is None:
                append(rec[2].encode() + b"\n")
            else:
                append(_DUMPS(_record_dict(style, tf, t, rec), option=orjson.OPT_APPEND_NEWLINE))
    elif fmt == "logfmt":
        for t, rec in lines:
            if rec[1] is None:
                append(rec[2].encode() + b"\n")
            else:
                append((_logfmt_line(style, _record_dict(style, tf, t, rec)) + "\n").encode())
    elif fmt in ("docker", "cri"):
        env = lines[0][0] if lines else 0
        for t, rec in lines:
            # The runtime stamps lines as it reads them: always increasing, just after the app's time.
            env = max(env + 1, t + rng.randint(20, 400))
            ns = rng.randrange(1000)
            if rec[1] is None:
                inner = rec[2]
                stream = "stderr"
            else:
                inner = _DUMPS(_record_dict(style, tf, t, rec)).decode()
                stream = "stderr" if rec[1] == "error" else "stdout"
            if fmt == "docker":
                append(_DUMPS({"log": inner + "\n", "stream": stream, "time": tf.iso_ns(env, ns)}, option=orjson.OPT_APPEND_NEWLINE))
            else:
                stamp = tf.iso_ns(env, ns)
                data = inner.encode()
                while len(data) > CRI_SPLIT_BYTES:
                    cut = CRI_SPLIT_BYTES
                    while cut and (data[cut] & 0xC0) == 0x80:
                        cut -= 1  # never split inside a UTF-8 sequence
                    append(f"{stamp} {stream} P ".encode() + data[:cut] + b"\n")
                    data = data[cut:]
                append(f"{stamp} {stream} F ".encode() + data + b"\n")
    else:
        raise ValueError(f"Unknown format {fmt!r}; expected one of {', '.join(FORMATS)}.")
    stats.records = len(lines)
    stats.lines = len(out)
    return b"".join(out), stats
