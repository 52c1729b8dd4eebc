"""Detect a file's format from a sample, and find the records inside JSON documents."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from dupfind.lineparse import CRI_LINE, parse_logfmt, parse_plain

SAMPLE_BYTES = 64 << 10
SAMPLE_LINES = 50
# Keys under which exports wrap their list of records, tried in order.
WRAPPER_KEYS = ("Records", "records", "events", "logs", "entries", "data", "items", "results", "rows", "messages")


@dataclass
class FormatSniff:
    """What a file looks like: a label for humans, and how to read it."""

    label: str
    envelope: str | None = None  # "docker" | "cri"
    document: bool = False
    binary: bool = False


def _sample_lines(head: bytes) -> list[str]:
    text = head[:SAMPLE_BYTES].decode("utf-8", errors="replace")
    lines = [line.strip() for line in text.split("\n")]
    if len(head) > SAMPLE_BYTES and lines:
        lines.pop()  # probably cut in the middle
    return [line for line in lines if line][:SAMPLE_LINES]


def _is_docker(record: Any) -> bool:
    return isinstance(record, dict) and isinstance(record.get("log"), str) and ("time" in record or "stream" in record)


def sniff_format(head: bytes, allow_document: bool = True) -> FormatSniff:
    """Guess the format from the first block; per-line fallbacks handle mixed files."""
    if b"\x00" in head[:8192]:
        return FormatSniff("binary", binary=True)
    stripped = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    lines = _sample_lines(head)
    if not lines:
        return FormatSniff("empty")
    if allow_document and stripped.startswith(b"["):
        return FormatSniff("json-document", document=True)
    if allow_document and stripped.startswith(b"{"):
        try:
            first = orjson.loads(lines[0])
        except orjson.JSONDecodeError:
            first = None
        if first is None:
            # A pretty-printed JSON document (or a broken first line: the reader falls back).
            return FormatSniff("json-document", document=True)
        if len(lines) == 1 and unwrap_document(first)[1]:
            return FormatSniff("json-document", document=True)
    decoded = []
    for line in lines:
        if line.startswith("{"):
            try:
                decoded.append(orjson.loads(line))
            except orjson.JSONDecodeError:
                decoded.append(None)
    if decoded and sum(_is_docker(r) for r in decoded) * 2 > len(decoded):
        return FormatSniff("docker-json", envelope="docker")
    if sum(bool(CRI_LINE.match(line)) for line in lines) * 2 > len(lines):
        return FormatSniff("cri", envelope="cri")
    votes = {"ndjson": len(decoded), "logfmt": 0, "text": 0}
    for line in lines:
        if line.startswith("{"):
            continue
        if parse_logfmt(line) is not None:
            votes["logfmt"] += 1
        elif parse_plain(line) is not None:
            votes["text"] += 1
    label = max(votes, key=lambda k: votes[k])
    if votes[label] == 0:
        label = "unknown"
    elif sum(1 for v in votes.values() if v) > 1:
        label = f"mixed ({label} mostly)"
    return FormatSniff(label)


def _hits(document: dict) -> list | None:
    hits = document.get("hits")
    if isinstance(hits, dict) and isinstance(hits.get("hits"), list):
        return [h.get("_source", h) if isinstance(h, dict) else h for h in hits["hits"]]
    return None


def unwrap_document(document: Any) -> tuple[list, str]:
    """The records of a JSON document and the wrapper they sat in ('' for a bare array)."""
    if isinstance(document, list):
        return document, ""
    if isinstance(document, dict):
        hits = _hits(document)
        if hits is not None:
            return hits, "hits.hits[]._source"
        for key in WRAPPER_KEYS:
            value = document.get(key)
            if isinstance(value, list) and (not value or isinstance(value[0], dict)):
                return value, f"{key}[]"
        return [document], ""
    return [document], ""
