"""What a read gives: the canonical table, and what became of each input file's lines."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import Any

import polars as pl

from dupfind.exact_json import decode_datetime, encode_datetime
from dupfind.textcodes import Texts, coded_columns

# The reading itself is dupfind.ingest: a command answered from the cache, which shows file
# reports or a stored table, does not import it (nor the parsers and dateutil it brings).


@dataclass
class FileReport:
    """What one input was read as and what became of each of its lines."""

    path: str
    format: str = "unknown"
    compression: str = "none"
    lines: int = 0
    parsed: int = 0
    records: int = 0
    blank: int = 0
    rejected: Counter = field(default_factory=Counter)
    examples: dict[str, int] = field(default_factory=dict)  # reason -> first line
    first_ts: datetime | None = None
    last_ts: datetime | None = None
    fields: dict[str, list[str]] = field(default_factory=dict)
    unmapped_events: dict[str, int] = field(default_factory=dict)
    unmapped_distinct: int = 0
    naive_ts: int = 0
    truncated: bool = False
    notes: list[str] = field(default_factory=list)
    # A framework's log (Celery, RQ, Sidekiq): the worker its own lines name (a banner's node
    # name) and the worker it was named after for want of one (its file name); see file_workers.
    context_worker: str | None = None
    named_worker: str | None = None

    @property
    def rejected_total(self) -> int:
        return sum(self.rejected.values())

    def add_rejects(self, rejects: pl.DataFrame) -> None:
        if rejects.height == 0:
            return
        for reason, count, first in rejects.group_by("reason").agg(pl.len(), pl.col("line").min()).rows():
            self.count_rejects(reason, count, first)

    def count_rejects(self, reason: str, count: int, first: int) -> None:
        """`count` lines rejected for `reason`, the first of them at line `first`."""
        self.rejected[reason] += count
        if reason not in self.examples or first < self.examples[reason]:
            self.examples[reason] = first

    def add_fields(self, fields: dict[str, list[str]]) -> None:
        """Add the raw field paths a batch used (column -> paths, each path once). `fields` is
        taken as it is when this report has none yet (most files are in one batch), and may be
        shared with other reports (files of a batch with the same fields present): it is never
        changed in place, a merge makes new ones (20,000 small files spent 0.3 s copying them)."""
        if not self.fields:
            self.fields = fields
            return
        merged = dict(self.fields)
        for column, paths in fields.items():
            known = merged.get(column, [])
            new = [p for p in paths if p not in known]
            if new or column not in merged:
                merged[column] = [*known, *dict.fromkeys(new)]
        self.fields = merged

    def to_state(self) -> dict[str, Any]:
        """The report as JSON data for the caches: orjson writes its dicts and lists as they are,
        its times as exact_json's [ISO text, zone]. Shallow: write it before the report changes.
        (exact_json's walk of every value took 40 us a report, 0.8 s of 20,000 files' first run.)"""
        data = {name: getattr(self, name) for name in _REPORT_FIELDS}
        data["rejected"] = dict(self.rejected)
        for name in ("first_ts", "last_ts"):
            if data[name] is not None:
                data[name] = encode_datetime(data[name])
        return data

    @classmethod
    def from_state(cls, state: dict[str, Any], path: str | None = None) -> FileReport:
        """The report `to_state` gave (read by `path` when given); ValueError for other data."""
        if not isinstance(state, dict) or state.keys() != _REPORT_FIELD_SET:
            raise ValueError("a file report of other fields")
        data = dict(state)
        data["rejected"] = Counter(data["rejected"])
        for name in ("first_ts", "last_ts"):
            if data[name] is not None:
                data[name] = decode_datetime(data[name])
        if path is not None:
            data["path"] = path
        return cls(**data)


_REPORT_FIELDS = tuple(f.name for f in fields(FileReport))
RENDERED_STORE = "_rendered_store"  # an IngestResult's attribute: (name, render) -> bytes
_REPORT_FIELD_SET = frozenset(_REPORT_FIELDS)


@dataclass
class IngestResult:
    """The canonical table of every input plus the per-file accounting."""

    table: pl.DataFrame
    files: list[FileReport]
    rejects: pl.DataFrame  # source, line, reason, text
    filtered_out: int = 0
    # With ingest(..., survey=True): records per second of time (`second`, `records`), sorted;
    # the table then holds no rows (dupfind.windows plans its reads from this).
    time_counts: pl.DataFrame | None = None
    # The dictionary of the table's coded columns (ids, messages: dupfind.textcodes).
    texts: Texts = field(default_factory=lambda: Texts.empty(coded_columns()))
    # The table of a files' pack store deferred until after the output (assembly.PackRows), if any.
    pack: Any = field(default=None, repr=False, compare=False)
    # Files whose records an earlier file holds exactly, counted once: [path, the earlier file, records] (dupfind.copies).
    copies: list[list] = field(default_factory=list)

    def rendered(self, name: str, render: Callable[[], bytes]) -> bytes | None:
        """Bytes a report derives from this result alone (the JSON of its file entries): those an
        earlier run stored under `name` for the same inputs, else render()'s, stored for the next
        runs; None (render() not called) when the result comes with no store of them
        (RENDERED_STORE: pipeline.load_correlated gives a result of cached inputs one)."""
        store = self.__dict__.get(RENDERED_STORE)
        return None if store is None else store(name, render)

    def text_table(self) -> pl.DataFrame:
        """The table with its coded columns as text: a copy, for small tables and for tools."""
        return self.texts.decoded(self.table)

    def totals(self) -> dict:
        rejected: Counter = Counter()
        for f in self.files:
            rejected.update(f.rejected)
        firsts = [f.first_ts for f in self.files if f.first_ts]
        lasts = [f.last_ts for f in self.files if f.last_ts]
        return {
            "files": len(self.files),
            "lines": sum(f.lines for f in self.files),
            "parsed": sum(f.parsed for f in self.files),
            "records": sum(f.records for f in self.files),
            "blank": sum(f.blank for f in self.files),
            "rejected": dict(sorted(rejected.items())),
            "rejected_total": sum(rejected.values()),
            "naive_ts": sum(f.naive_ts for f in self.files),
            "filtered_out": self.filtered_out,
            "first_ts": min(firsts) if firsts else None,
            "last_ts": max(lasts) if lasts else None,
        }
