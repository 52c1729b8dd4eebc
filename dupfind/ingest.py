"""Read inputs into the canonical event table, accounting for every line read."""

from __future__ import annotations

import collections
import csv
import functools
import io
import itertools
import os
import queue
import re
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import orjson
import polars as pl

from dupfind import background, json_exact
from dupfind.assembly import (
    HeldBatch,
    LabelPool,
    PackRows,
    assemble_held,
    held_for_assembly,
    held_from_coded,
    rows_within,
)
from dupfind.config import Config
from dupfind.copies import without_copies
from dupfind.crashes import crash_reports, with_crash_columns, with_crashes
from dupfind.document_frames import RecordReader
from dupfind.envelopes import partial_flag, unwrap_json_lines, unwrap_text_lines, unwrapped_frame
from dupfind.errors import DupfindError
from dupfind.file_workers import with_file_workers
from dupfind.formats import FormatSniff, after_lines, sample_end, sniff_format, unwrap_document
from dupfind.grammar import Inherited, continuation_lines, parse_grammar_lines, refine, with_pairs
from dupfind.ingest_result import FileReport, IngestResult
from dupfind.json_values import NotJson, ValueCutter, array_within, concatenated_values
from dupfind.line_bytes import LineBytes
from dupfind.line_split import UTF8_BOM, lines_payload, split_lines
from dupfind.line_texts import with_line_texts
from dupfind.lineparse import (
    LEADING_TS,
    lambda_frame,
    lambda_only,
    lambda_pairs_frame,
    lambda_pairs_only,
    logfmt_frame,
    pairs_only,
    parse_logfmt,
    parse_plain,
    plain_frame,
    plain_only,
    untimed_frame,
    untimed_only,
    words_and_pairs_frame,
    words_and_pairs_only,
)
from dupfind.malloc_tuning import reading_heap
from dupfind.nested_text import repaired
from dupfind.normalize import FALLBACK_TS, FILE_SHIFT, LINE, SOURCE, TEXT, TRACE_ERROR, config_for_format, normalize
from dupfind.presets import (
    AFTER_FIRST_LINE,
    ANSI_ESCAPE,
    CONTEXT_PREFIX,
    ENVELOPE_PREFIX,
    FILE_NAME_PREFIX,
    FILE_PREFIX,
    Preset,
    document_records,
    find_document_preset,
    unwrap_record,
)
from dupfind.record_cuts import whole_records
from dupfind.record_lines import record_runs
from dupfind.schema import as_strings, canonical_schema
from dupfind.sources import (
    CHUNK_BYTES,
    SUPPORTED_COMPRESSION,
    Source,
    expand_inputs,
    iter_blocks,
    iter_chunks,
    log_owner,
    open_source,
)
from dupfind.stack_lines import (
    ANY_TRACE_LINE,
    CRASH_HEADER,
    QUIET_LEVELS,
    TRACE_BREAK,
    exception_of,
    exceptions_by_owner,
    own_record_lines,
    trace_owners,
    values_at_lines,
)
from dupfind.textcodes import Texts, coded_columns
from dupfind.timeparse import parse_timestamps

JSON_SUB_BLOCK = 8192
SURROGATE_ESCAPE = r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}"
_SURROGATE_BYTES = re.compile(rb"\\u[dD][89a-fA-F]")
NORMALISE_BATCH_ROWS = 32_000  # rows normalised together (bounds the transient memory of normalize)
# ... or fewer, when their parsed fields hold this many bytes: lines of 100 KB (a stack trace of
# 1,300 frames in each) held a whole file's 5,000 lines in one batch, 5.8x the input at the peak.
# 32,000 rows of a typical export hold 12 MiB.
NORMALISE_BATCH_BYTES = 32 << 20
REJECT_TEXT_LIMIT = 4096
_NOT_JSON = object()
UNMAPPED_LIMIT = 50
KEY_SAMPLE_LINES = 64
FAST_TEXT_LINES = 32  # lines of pairs alone, or of free text, a block reads at once (fewer: one by one, as cheap)
# A JSON record's rendered message, whose `key=value` pairs are its fields where it has none (_message_pairs).
MESSAGE_FIELDS = ("message", "msg", "@m")
MESSAGE_OWN = ("ts", "level", "message", "name", "stream", "origin_id", "error")  # columns no message pair gives
BATCH_BYTES = 8 << 20  # small files are parsed together up to this many bytes (see sources.CHUNK_BYTES)
NORMALISE_QUEUE_BLOCKS = 2  # parsed blocks waiting for the normalising thread
REFUSED_BLOCKS = 3  # a document's blocks polars refuses in a row before its elements are no longer given to it


def _key_escapes(keys: Iterable[str]) -> list[str]:
    """Every JSON escape that could spell a character of these keys (`\\u002d`, `\\u002D`, `\\/`...)."""
    escapes: set[str] = set()
    for ch in set("".join(keys)):
        if ch in '"\\/':
            escapes.add("\\" + ch)
        units = ch.encode("utf-16-be").hex().upper()
        for code in (units[i:i + 4] for i in range(0, len(units), 4)):
            for variant in itertools.product(*[(c, c.lower()) if c.isalpha() else (c,) for c in code]):
                escapes.add("\\u" + "".join(variant))
    return sorted(escapes)


def _contains_any(texts: pl.Series, patterns: list[str]) -> pl.Series:
    """Whether each text holds one of `patterns` (literal), with slices of a large block scanned
    in parallel: the eager call runs on one thread, and this scan is the reading thread's longest
    step. One regular expression, an alternation of the patterns, scans the ~400 alias keys of a
    JSON line in half the time `str.contains_any`'s Aho-Corasick automaton takes (23 against 45
    ms an 8 MB block), which every `"` of a line wakes."""
    if not patterns:
        return pl.repeat(False, texts.len(), dtype=pl.Boolean, eager=True)
    alternation = "|".join(pl.escape_regex(p) for p in patterns)
    parts = min(pl.thread_pool_size(), 8)
    if parts < 2 or len(texts) < 2 * JSON_SUB_BLOCK:
        return texts.str.contains(alternation)
    frame, step = texts.to_frame("text"), -(-len(texts) // parts)
    scans = [frame.slice(i * step, step).lazy().select(pl.col("text").str.contains(alternation)) for i in range(parts)]
    return pl.concat([scan.to_series() for scan in pl.collect_all(scans)])


def _contains_unless(texts: pl.Series, pattern: str, decided: pl.Series, value: bool) -> pl.Series:
    """`texts.str.contains(pattern)`, where the lines `decided` marks are known to give `value`:
    the pattern runs on the others only (a regex over every line of a block cost 3-4 ms an 8 MB
    block, a test of its first or last byte 0.4)."""
    result = pl.repeat(value, texts.len(), dtype=pl.Boolean, eager=True)
    rest = (~decided).arg_true()
    if rest.len():
        result = result.scatter(rest, texts.gather(rest).str.contains(pattern))
    return result


def _is_json(text: str) -> bool:
    try:
        orjson.loads(text)
    except orjson.JSONDecodeError:
        return False
    return True


def _continued(grammar, rows: pl.DataFrame, starts: pl.Series, source: pl.Expr | None) -> pl.DataFrame:
    """grammar.continuation_lines over a block's records and the lines no grammar claimed
    (`starts`: those that begin with a time, records of their own), each `source`'s apart."""
    key = (source if source is not None else pl.lit(None, pl.String)).alias("source")
    record_frames = [f.select(LINE, key) for f, _ in grammar.raws]
    keyed = rows.select(pl.col("line").alias(LINE), key, starts.alias("starts"))
    records = pl.concat([*record_frames, keyed.filter("starts").select(LINE, "source")])
    candidates = keyed.filter(~pl.col("starts")).select(LINE, "source")
    parts = []
    for (found,), mine in records.partition_by("source", as_dict=True).items():
        theirs = candidates.filter(pl.col("source").eq_missing(found))[LINE]
        if theirs.len():
            parts.append(continuation_lines(pl.concat([mine[LINE], theirs]), mine[LINE], theirs, grammar.continuing))
    return pl.concat(parts) if parts else pl.DataFrame(schema={"line": pl.Int64, "owner": pl.Int64})


def _newest_first(rows: pl.DataFrame, keys: list) -> set[tuple[int, Any]]:
    """The (file, source) whose lines an envelope gives times that mostly go back in time, line
    after line (`rows` with FALLBACK_TS, in line order; `keys`: each row's source)."""
    times = rows.select(
        file=pl.col("line") // (1 << FILE_SHIFT), key=pl.Series(keys), ts=parse_timestamps(rows[FALLBACK_TS])["ts"],
    ).drop_nulls("ts")
    steps = times.with_columns(step=pl.col("ts").diff().over("file", "key").dt.total_microseconds())
    turns = steps.group_by("file", "key").agg(back=(pl.col("step") < 0).sum(), on=(pl.col("step") > 0).sum())
    return {(file, key) for file, key in turns.filter(pl.col("back") > pl.col("on")).select("file", "key").rows()}


def _with_values(raw: pl.DataFrame, column: str, by_line: dict[int, str]) -> pl.DataFrame:
    """A block's raw records with `column` set from `by_line` (a record's line -> value) where
    they have none: TRACE_ERROR, the exception of the stack trace after each record one went on
    with; a field its continuation lines state."""
    found = values_at_lines(raw[LINE], by_line, pl.String)
    if found is None:
        return raw
    if column in raw.columns:
        found = raw[column].cast(pl.String).fill_null(found)
    return raw.with_columns(found.alias(column))


def _quiet_records(raws: list, lines: set[int]) -> set[int]:
    """Of these lines, those of grammars' records at a level that reports no error."""
    quiet: set[int] = set()
    wanted = pl.Series(list(lines), dtype=pl.Int64)
    for frame, _ in raws:
        if "level" in frame.columns:
            rows = frame.filter(pl.col(LINE).cast(pl.Int64).is_in(wanted.implode()))
            quiet.update(line for line, level in zip(rows[LINE].to_list(), rows["level"].cast(pl.String).to_list())
                         if level is not None and level.strip().lower() in QUIET_LEVELS)
    return quiet


def _continuation_fields(raws: list, traces: pl.DataFrame, owners: dict[int, int], stated: dict[str, dict[int, str]]) -> None:
    """Into `stated`, the fields grammars' records state on their continuation lines
    (Preset.continuation_fields), by the record's line: the first line of a record that holds one."""
    wanted = {column: regex for _, preset in raws for column, regex in preset.continuation_fields.items()}
    for column, regex in wanted.items():
        group = re.compile(regex).groupindex["value"]
        found = traces.select("line", value=pl.col("clean").str.extract(regex, group)).drop_nulls().sort("line")
        by_owner = stated.setdefault(column, {})
        for line, value in found.iter_rows():
            by_owner.setdefault(owners[line], value)


def _reject_frame(lines: Iterable[int], reason: str, texts: Iterable[str] | None = None) -> pl.DataFrame:
    lines = list(lines)
    data = {"line": pl.Series(lines, dtype=pl.Int64), "reason": pl.Series([reason] * len(lines), dtype=pl.String)}
    data["text"] = pl.Series(list(texts) if texts is not None else [None] * len(lines), dtype=pl.String)
    return pl.DataFrame(data)


def _count_rejects(reports: dict[str, FileReport], rejects: pl.DataFrame, source: str) -> None:
    """Add rejects of several files to their reports (`source` names the file column): one
    group-by for all of them, not one a file (a batch holds hundreds of small files)."""
    if rejects.height:
        summary = rejects.group_by(source, "reason").agg(pl.len(), pl.col("line").min())
        for path, reason, count, first in summary.rows():
            reports[path].count_rejects(reason, count, first)


def _own_text(rejects: pl.DataFrame) -> pl.DataFrame:
    """Rejected lines with their own copy of the text: a filtered or gathered string column
    shares the buffers of the block it came from, so a few kept rejects would hold every parsed
    line in memory. (Concatenating strings builds new ones; slicing or casting would not.)"""
    return rejects.with_columns(pl.col("text") + "") if rejects.height else rejects


def _no_rejects() -> pl.DataFrame:
    """A block's rejected lines when it has none (line, reason, text)."""
    return pl.DataFrame(schema={"line": pl.Int64, "reason": pl.String, "text": pl.String})


@dataclass
class _Block:
    """Intermediate output of parsing a block of lines."""

    raws: list[tuple[pl.DataFrame, str]] = field(default_factory=list)  # (raw frame, format)
    rejects: list[pl.DataFrame] = field(default_factory=list)
    blank: int = 0
    blank_lines: list[pl.Series] = field(default_factory=list)  # the blank lines' numbers
    continuation: int = 0  # physical lines merged into a record started on an earlier line
    context_lines: int = 0  # lines that only carried context for the file (a startup banner)
    context: dict[str, str] = field(default_factory=dict)  # column -> value for the whole file
    context_by_source: dict[str, dict[str, str]] = field(default_factory=dict)  # of an export of several
    # Whether each line as read is the file's line of that number, which `line_texts` can read
    # again: the raw records of its JSON lines then carry no text (a rejected line's is read
    # again), instead of holding every block's text until it is normalised (25-30 MiB at 1M lines).
    lines_in_file: bool = False
    # With a dict: each line joined to a record begun on an earlier line -> that line (see
    # record_cuts: which lines of a block continue the record the block before it ended with).
    owners: dict[int, int] | None = None
    # The file's threads' last values of what grammar rules inherit (grammar.Inherited), from its
    # blocks before this one: a failure line takes the id its thread received in the block before.
    inherited: Inherited | None = None


class LineParser:
    """Parses blocks of text lines (JSON fast path, logfmt/plain fallback, envelopes)."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.presets = {p.name: p for p in config.presets}
        self.grammars = [p for p in config.presets if p.is_grammar]
        self.record_shapes = [p for p in config.presets if p.is_record_shape]
        paths: set[str] = set()
        wanted = [a for aliases in config.aliases.values() for a in aliases]
        wanted += [k for p in self.record_shapes for k in p.key_paths()]
        for path in wanted:
            paths.add(path)
            if "." in path:
                parts = path.split(".")
                for cut in range(1, len(parts)):
                    paths.add(".".join(parts[:cut]))
        self.json_keys = paths
        self.key_escapes = _key_escapes(paths)
        # A message's pairs may name ids and what they are about, not the record's time, level,
        # name or text: `Published event=order_placed` is named by its message, not `order_placed`.
        own = {a for column in MESSAGE_OWN for a in config.aliases.get(column, ())}
        self.message_keys = frozenset(k for k in paths if k not in own and k not in MESSAGE_FIELDS)

    # -- JSON -------------------------------------------------------------------------
    def _read_json(self, texts: pl.Series, schema: dict | None = None, payload: bytes | None = None) -> pl.DataFrame | None:
        """Parse JSON lines with polars; None when any line is malformed.

        Without a schema, the alias keys present in these lines are read, all as text (reading
        every alias key would cost several times more); see `_present_keys`. `payload`: the
        texts joined by newlines, taken from the bytes they were read from (`LineBytes`).
        """
        try:
            if schema is None:
                schema = self._schema(texts)
                if schema is None:
                    return None
            if payload is not None:
                frame = pl.read_ndjson(io.BytesIO(payload), schema=schema, ignore_errors=True)
                if frame.height == len(texts):
                    return repaired(frame, texts, payload)
            payload = texts.str.join("\n").cast(pl.Binary).item()
            frame = pl.read_ndjson(io.BytesIO(payload), schema=schema, ignore_errors=True)
        except Exception:  # polars raises several error types on malformed input
            return None
        return repaired(frame, texts, payload) if frame.height == len(texts) else None

    def _schema(self, texts: pl.Series) -> dict[str, pl.DataType] | None:
        """The reader's schema for these lines (every column as text); None when they are not JSON."""
        try:
            keys = self._present_keys(texts)
        except pl.exceptions.PolarsError:  # the inference fallback raises on malformed lines
            return None
        return {k: pl.String for k in keys} or {"_none": pl.String}

    def _present_keys(self, texts: pl.Series) -> list[str]:
        """The alias keys that occur as keys somewhere in these lines (a key seen only on the
        last line still counts), without a full schema-inference pass over the text.

        The keys of a few sampled lines are taken as known; one multi-pattern scan (`"key"` for
        every other alias key) then settles the rest: a hit adds that key (a quoted word that was
        a value only costs an all-null column). A key spelled with a \\u escape of a character that
        alias keys use cannot be matched as text: then polars infers the schema from every line.
        """
        keys: set[str] = set()
        step = max(1, len(texts) // KEY_SAMPLE_LINES)
        for text in texts.gather_every(step).head(KEY_SAMPLE_LINES).to_list():
            try:
                value = orjson.loads(text)
            except orjson.JSONDecodeError:
                continue
            if isinstance(value, dict):
                keys.update(k for k in value if k in self.json_keys)
        patterns = [f'"{k}"' for k in self.json_keys if k not in keys] + self.key_escapes
        hits = _contains_any(texts, patterns)
        if not hits.any():
            return sorted(keys)
        found = set(texts.filter(hits).str.extract_many(patterns).explode().drop_nulls().unique().to_list())
        if not found.isdisjoint(self.key_escapes):
            payload = texts.str.join("\n").cast(pl.Binary).item()
            present = pl.scan_ndjson(io.BytesIO(payload), infer_schema_length=None).collect_schema()
            return [k for k in present if k in self.json_keys]
        return sorted(keys | {m[1:-1] for m in found})

    def _add_json(self, rows: pl.DataFrame, frame: pl.DataFrame, block: _Block, fmt: str, keep_text: bool) -> None:
        """Append parsed JSON rows; rows in a known record layout (Laravel, pino...) get its format.
        Without `keep_text`, the raw records carry no text (see _Block.lines_in_file)."""
        carried = [c for c in rows.columns if c not in ("line", "text")]
        text = [pl.col("text").alias(TEXT)] if keep_text else []
        raw = pl.concat([rows.select(pl.col("line").alias(LINE), *text, *carried), frame], how="horizontal")
        base = fmt.removesuffix("ndjson")
        for shape in self.record_shapes:
            if not (shape.prefer or shape.values or shape.lift or shape.ignore or shape.pairs or shape.rules):
                continue  # a shape that only names the file (pino): its rows read like any NDJSON
            required = (*shape.detect_all, *shape.detect_text, *shape.detect_numbers)
            if not all(k in frame.columns for k in required):
                continue
            conditions = [pl.col(k).is_not_null() for k in required]
            conditions += [pl.col(k).str.contains(r"^-?\d+(?:\.\d+)?$") for k in shape.detect_numbers]
            if shape.detect_any:
                conditions.append(pl.any_horizontal([pl.col(k).is_not_null() for k in shape.detect_any if k in frame.columns] or [pl.lit(False)]))
            fits = raw.select(pl.all_horizontal(conditions)).to_series()
            if fits.any():
                shaped = raw.filter(fits).drop(shape.ignore, strict=False)
                shaped = self._lifted(shaped, shape.lift, shape.ignore)
                if shape.rules and shaped.schema.get("message") == pl.String:  # as a grammar's rules read a line's message
                    shaped = refine(shaped, shape, None, block.inherited)
                if shape.pairs:  # a message's key=value pairs: fields where the record has none of its own
                    shaped = with_pairs(shaped, tuple(p for p in shape.pairs if shaped.schema.get(p) == pl.String), self.message_keys)
                block.raws.append((shaped, base + shape.name))
                raw = raw.filter(~fits)
        if raw.height:
            block.raws.append((self._message_pairs(raw), fmt))

    def _message_pairs(self, raw: pl.DataFrame) -> pl.DataFrame:
        """The records with their message's `key=value` pairs (a logger's `Sending email
        order_id=ord_1`, python-json-logger's or zap's message with its ids in its text) as fields
        where they have none of their own: only the configuration's keys, only where a message
        holds an `=`."""
        texts = [c for c in MESSAGE_FIELDS if raw.schema.get(c) == pl.String]
        if not texts or not raw.select(pl.any_horizontal(pl.col(c).str.contains("=", literal=True) for c in texts).any()).item():
            return raw
        return with_pairs(raw, tuple(texts), self.message_keys)

    def _lifted(self, raw: pl.DataFrame, paths: tuple[str, ...], ignore: tuple[str, ...] = ()) -> pl.DataFrame:
        """The records with the alias keys of their objects at `paths` as fields of their own
        (tracing's event `fields`, its current `span`; `spans[]`: the first object of a list that
        has the key, its outer spans'), but those `ignore` names as `<path>.<key>`. A field the
        record has already, or an earlier path gave, is kept. The objects are read as their JSON
        text (json_keys names their keys)."""
        for path in paths:
            column = path.removesuffix("[]")
            if column not in raw.columns:
                continue
            texts = raw[column].drop_nulls()
            keys = [k for k in self._present_keys(texts) if "'" not in k and f"{column}.{k}" not in ignore] if texts.len() else []
            step = "$[*]" if path.endswith("[]") else "$"
            values = {k: pl.col(column).str.json_path_match(f"{step}['{k}']") for k in keys}
            raw = raw.with_columns(**{k: pl.coalesce(pl.col(k), v) if k in raw.columns else v for k, v in values.items()})
        return raw

    def _parse_json(
        self, rows: pl.DataFrame, block: _Block, fmt: str, lines: LineBytes | None = None, keep_text: bool = True,
    ) -> None:
        """rows: line, text (+ carried envelope columns); lines: their bytes (see `parse_block`);
        keep_text: whether the raw records carry each line's text (see _Block.lines_in_file).

        The usual bad lines (cut short or glued to the next record: they do not end with `}`) are
        judged one by one with orjson before the block is read; if polars still refuses the
        block, bad lines cost their sub-block only (`_parse_json_blocks`).
        """
        # A JSON object ends with `}`: a line that does not (cut short, glued to the next record)
        # is judged first, so that one bad line does not cost a refused read of the whole block.
        texts = rows["text"]
        suspect = ~_contains_unless(texts, r"\}\s*$", texts.str.ends_with("}"), True)
        if lines is None or (b"\\" in lines.data and _SURROGATE_BYTES.search(lines.data)):
            # polars reads a lone surrogate escape (a JavaScript logger that cut a string inside an
            # emoji) as a NUL where orjson refuses the line: such lines are judged by orjson. (A
            # block's bytes are looked at first: a pattern over every line costs more.)
            suspect = suspect | texts.str.contains(SURROGATE_ESCAPE)
        del texts
        positions = suspect.arg_true()
        if positions.len():
            good = set(self._judge_lines(rows.filter(suspect), block))
            bad = [i for i in range(positions.len()) if i not in good]
            if bad:
                keep = pl.Series([True] * rows.height).scatter(positions.gather(bad), False)
                rows = rows.filter(keep)
                lines = lines.filter(keep) if lines is not None else None
                if rows.height == 0:
                    return
        schema = self._schema(rows["text"])  # a subset of the lines never has other keys
        payload = lines.joined() if lines is not None and schema is not None else None
        frame = self._read_json(rows["text"], schema, payload) if schema is not None else None
        if frame is not None:
            self._add_json(rows, frame, block, fmt, keep_text)
            return
        self._parse_json_blocks(rows, block, fmt, schema, keep_text, refused=True)

    def _judge_lines(self, rows: pl.DataFrame, block: _Block) -> list[int]:
        """orjson's verdict on a few lines: rejects the bad ones, returns the good ones' indices."""
        good, bad_lines, bad_reasons = [], [], []
        for index, text in enumerate(rows["text"].to_list()):
            try:
                value = orjson.loads(text)
            except orjson.JSONDecodeError:
                bad_lines.append(index)
                bad_reasons.append("invalid_json")
                continue
            if not isinstance(value, dict):
                bad_lines.append(index)
                bad_reasons.append("not_a_record")
                continue
            good.append(index)
        if bad_lines:
            block.rejects.append(pl.DataFrame({
                "line": rows["line"].gather(bad_lines), "reason": pl.Series(bad_reasons, dtype=pl.String),
                "text": rows["text"].gather(bad_lines),
            }))
        return good

    def _parse_json_blocks(
        self, rows: pl.DataFrame, block: _Block, fmt: str, schema: dict | None, keep_text: bool, refused: bool = False,
    ) -> None:
        """Bad lines cost their sub-block only: each sub-block polars refuses is judged line by line."""
        frame = None if refused else self._read_json(rows["text"], schema)
        if frame is not None:
            self._add_json(rows, frame, block, fmt, keep_text)
            return
        if rows.height > JSON_SUB_BLOCK:
            for offset in range(0, rows.height, JSON_SUB_BLOCK):
                self._parse_json_blocks(rows.slice(offset, JSON_SUB_BLOCK), block, fmt, schema, keep_text)
            return
        good = self._judge_lines(rows, block)
        if good:
            subset = rows[good]
            frame = self._read_json(subset["text"], schema)
            if frame is None:  # polars disagrees with orjson on some line: reject the rest
                block.rejects.append(_reject_frame(subset["line"].to_list(), "invalid_json", subset["text"].to_list()))
                return
            self._add_json(subset, frame, block, fmt, keep_text)

    def source_of(self, fmt: str, columns: list[str], also: tuple[str, ...] = ()) -> pl.Expr | None:
        """What names each record's source in an envelope that names it (a CloudWatch log stream,
        stern's pod and container, a journal's host and unit): a file of such lines may hold
        several sources' logs. Every worker path the envelope has, together: the worker is the
        first (a host), the later ones may tell two of its processes' logs apart (two units).
        `also`: other columns the envelope names that tell lines apart (the stream: a stack trace
        on stderr does not go on with a record on stdout)."""
        envelope = self.presets.get(fmt.partition("+")[0]) if "+" in fmt else None
        paths = [p for column in ("worker_id", *also) for p in (envelope.fields.get(column, ()) if envelope else ())]
        present = [pl.col(ENVELOPE_PREFIX + p).cast(pl.String) for p in paths if ENVELOPE_PREFIX + p in columns]
        return pl.concat_str(present, separator="\x1f", ignore_nulls=True) if present else None

    # -- text fallbacks ---------------------------------------------------------------
    def _parse_text(self, rows: pl.DataFrame, block: _Block, fmt_prefix: str, around: pl.DataFrame | None = None) -> None:
        """Framework grammars (vectorised) first, then logfmt and plain text line by line.
        `around`: the block's lines (line, blank, json, too_long and the envelope's columns)."""
        clean = pl.col("text").str.replace_all(ANSI_ESCAPE, "")
        errors: dict[int, str] = {}  # a record's line -> the exception of the stack trace after it
        crashes: dict[int, tuple[int, str]] = {}  # a record's line -> the crash report after it (line, text)
        stated: dict[str, dict[int, str]] = {}  # a field -> a record's line -> what its continuation lines state
        if rows["text"].str.contains("\n", literal=True).any():
            # An envelope's text of several lines (a Cloud Run entry with its traceback): its
            # first line is the record's line, the others go on with it.
            several = rows.filter(pl.col("text").str.contains("\n", literal=True))
            for line, text in zip(several["line"].to_list(), several["text"].str.replace_all(ANSI_ESCAPE, "").to_list()):
                found = exception_of(text.split("\n"))
                if found is not None:
                    errors[line] = found
            clean = clean.str.replace(AFTER_FIRST_LINE, "")
        rows = rows.with_columns(clean=clean)
        source = self.source_of(fmt_prefix, rows.columns)
        layers = [self.presets.get(name) for name in fmt_prefix.split("+") if name]
        grammar = parse_grammar_lines(rows, self.grammars, source, self.json_keys,
                                      any(layer is not None and layer.time_optional for layer in layers), block.inherited)
        block.context_lines += grammar.context_lines
        for key, value in grammar.context.items():
            block.context.setdefault(key, value)
        for found, values in grammar.context_by_source.items():
            for key, value in values.items():
                block.context_by_source.setdefault(found, {}).setdefault(key, value)
        for frame, preset in grammar.raws:
            block.raws.append((frame, fmt_prefix + preset.name))
        rows = grammar.rest
        joinable = all(layer is not None and layer.one_source for layer in layers)
        if grammar.continuing is not None and rows.height and (joinable or source is not None):
            # Lines that do not start like a record, after a record of a format that writes multi-line
            # records (a traceback after a Celery error line), belong to that record: in an export
            # of several sources (a journal, stern), after a record of their own source.
            starts = rows.select(pl.col("clean").str.contains(LEADING_TS.pattern)).to_series()
            joined = _continued(grammar, rows, starts, None if joinable else source)
            if joined.height:
                owners = dict(zip(joined["line"].to_list(), joined["owner"].to_list()))
                traced = pl.col("line").is_in(joined["line"].implode())
                traces = rows.filter(traced)
                texts = dict(zip(traces["line"].to_list(), traces["clean"].to_list()))
                found = exceptions_by_owner(owners, texts)
                errors.update(found)
                _continuation_fields(grammar.raws, traces, owners, stated)
                # A crash report (one that names its exception) after a framework's line at a quiet
                # level, or one only an ending process prints after any (the JVM's `Terminating due
                # to java.lang.OutOfMemoryError` after logback's ERROR line: no logger writes it):
                # a record of its own.
                crashed = {owner: head for owner, head in crash_reports(
                    owners, texts, set(), _quiet_records(grammar.raws, set(owners.values())), ending_after_any=True,
                ).items() if owner in found}
                crashes.update(crashed)
                heads = {line for line, _ in crashed.values()}
                kept = {line: owner for line, owner in owners.items() if line not in heads}
                block.continuation += len(kept)
                if block.owners is not None:
                    block.owners.update(kept)
                rows = rows.filter(~traced)
        if rows.height and (joinable or source is not None) and rows["clean"].str.contains(ANY_TRACE_LINE).any():
            rows = self._join_traces(rows, block, grammar.raws, around, self.source_of(fmt_prefix, rows.columns, ("stream",)),
                                     errors, crashes)
        carried = [c for c in rows.columns if c not in ("line", "text", "clean")]
        # Lines of pairs alone (logrus, Go), of pairs after a time, level and words (Python's logging
        # with its extra fields) and of free text after a time or a Lambda runtime's prefix, no pair in
        # it, and inside an envelope that gives each line its time (syslog, a journal), of free text
        # without one: read at once. Each reader's lines are none of the others' (but pairs alone,
        # which both pair readers read alike): the readers of pairs look only where 32 lines hold an
        # `=`, the others where 32 do not. Every reader's regexes count against polars' cache of 32
        # compiled patterns: past it, each block compiled them all again.
        skip = (LINE, TEXT, *carried)
        has_envelope_time = FALLBACK_TS in carried
        untimed = [(untimed_only, untimed_frame, "text", False)] if has_envelope_time else []
        for only, read, fmt, paired in ((pairs_only, functools.partial(logfmt_frame, skip=skip), "logfmt", True),
                                        (words_and_pairs_only, functools.partial(words_and_pairs_frame, skip=skip),
                                         "logfmt", True),
                                        (plain_only, plain_frame, "text", False), (lambda_only, lambda_frame, "text", False),
                                        (lambda_pairs_only, functools.partial(lambda_pairs_frame, skip=skip), "logfmt", True),
                                        *untimed):
            if rows.height < FAST_TEXT_LINES:
                break
            with_pairs = rows["clean"].str.contains("=", literal=True).sum()
            if (with_pairs if paired else rows.height - with_pairs) < FAST_TEXT_LINES:
                continue
            fast = only(rows["clean"])
            if fast.sum() < FAST_TEXT_LINES:
                continue
            taken = rows.filter(fast)
            frame = read(taken["line"], taken["clean"]).rename({"_line": LINE})
            frame = frame.with_columns(taken["text"].alias(TEXT), *(taken[c] for c in carried))
            block.raws.append((frame.with_columns(pl.exclude(LINE).cast(pl.String)), fmt_prefix + fmt))
            rows = rows.filter(~fast)
        logfmt_rows: list[dict] = []
        plain_rows: list[dict] = []
        unknown: list[int] = []
        carried_values = rows.select(carried).rows() if carried else None
        not_records: list[int] = []
        lines, texts = rows["line"].to_list(), rows["text"].to_list()
        for index, (line, text) in enumerate(zip(lines, rows["clean"].to_list())):
            if text.lstrip().startswith("[") and _is_json(text):
                not_records.append(index)
                continue
            record = parse_logfmt(text)
            target = logfmt_rows
            if record is None:
                # Text after a time; inside a Docker/CRI envelope, which gives the time, any text.
                record = parse_plain(text, envelope_time=has_envelope_time)
                target = plain_rows
            if record is None:
                unknown.append(index)
                continue
            record[LINE] = line
            record[TEXT] = texts[index]
            if carried_values is not None:
                record.update(zip(carried, carried_values[index]))
            target.append(record)
        for records, fmt in ((logfmt_rows, "logfmt"), (plain_rows, "text")):
            if records:
                frame = pl.from_dicts(records, infer_schema_length=None)
                frame = frame.with_columns(pl.exclude(LINE).cast(pl.String))
                block.raws.append((frame, fmt_prefix + fmt))
        if errors:
            block.raws[:] = [(_with_values(raw, TRACE_ERROR, errors), fmt) for raw, fmt in block.raws]
        for column, by_line in stated.items():
            block.raws[:] = [(_with_values(raw, column, by_line), fmt) for raw, fmt in block.raws]
        if crashes:
            block.raws[:] = [(with_crash_columns(raw, crashes, LINE), fmt) for raw, fmt in block.raws]
        if unknown:
            block.rejects.append(_reject_frame(rows["line"].gather(unknown).to_list(), "unknown_format", rows["text"].gather(unknown).to_list()))
        if not_records:
            block.rejects.append(pl.DataFrame({
                "line": rows["line"].gather(not_records),
                "reason": pl.Series(["not_a_record"] * len(not_records), dtype=pl.String),
                "text": rows["text"].gather(not_records),
            }))

    @staticmethod
    def _join_traces(rows: pl.DataFrame, block: _Block, raws: list, around: pl.DataFrame | None,
                     source: pl.Expr | None, errors: dict[int, str], crashes: dict[int, tuple[int, str]]) -> pl.DataFrame:
        """The rows less the lines of stack traces that go on with a record before them
        (stack_lines.trace_owners), those counted as the block's continuation lines, and the
        exception each trace reports added to `errors` by its record's line. A framework's
        records (`raws`) and the block's JSON lines (`around`) are records such lines may go on
        with; its overlong lines end them. A trace that is a crash report (crashes.crash_reports)
        goes to `crashes` by the line of the record it follows: its first line is not a
        continuation line but a record of its own."""
        text_lines = rows["line"]

        def keys(frame: pl.DataFrame) -> list:
            return frame.select(source).to_series().to_list() if source is not None else [None] * frame.height

        def right_before(frame: pl.DataFrame, lines: pl.Series) -> pl.DataFrame:
            """The frame's rows right before a text line (the only ones a trace may go on with: the
            next record starts afresh), not every JSON line of a block with a few tracebacks."""
            at = (lines.search_sorted(text_lines, side="left").cast(pl.Int64) - 1).unique().sort()
            return frame[at.filter(at >= 0)]

        row_keys = keys(rows)
        entries = list(zip(text_lines.to_list(), rows["clean"].to_list(), row_keys))
        for frame, _ in raws:
            picked = right_before(frame, frame[LINE])
            entries += zip(picked[LINE].to_list(), [None] * picked.height, keys(picked))
        json_lines: set[int] = set()
        if around is not None:
            # JSON lines are records; an overlong line, or one rejected already (JSON cut by a
            # newline in a value), ends a trace.
            around = around.filter(~pl.col("blank") & (pl.col("json") | pl.col("too_long")))
            picked = right_before(around, around["line"]) if around.height else around
            if picked.height:
                json_lines = set(picked.filter(pl.col("json"))["line"].to_list())
                ends = picked["too_long"]
                if block.rejects:
                    ends = ends | picked["line"].is_in(pl.concat([r["line"] for r in block.rejects]).implode())
                texts = [TRACE_BREAK if end else None for end in ends.to_list()]
                entries += zip(picked["line"].to_list(), texts, keys(picked))
        entries.sort(key=lambda entry: entry[0])
        keyed = [(n, text, (n >> FILE_SHIFT, key)) for n, text, key in entries]
        each_line_a_record = FALLBACK_TS in rows.columns
        backward = _newest_first(rows, row_keys) if each_line_a_record else set()
        # An export printed newest first (logcli's and gcloud's default): a trace whose lines are
        # entries each comes before its record, last line first; read in time order there.
        own = None if each_line_a_record else own_record_lines(text_lines, rows["clean"])
        owners = trace_owners((e for e in keyed if e[2] not in backward), each_line_a_record, own)
        if backward:
            owners.update(trace_owners((e for e in reversed(keyed) if e[2] in backward), each_line_a_record, own))
        if each_line_a_record:  # a crash report of one line, a record of its own (PHP's fatal error)
            heads = set(owners.values())
            errors.update((line, found) for line, text, _ in entries if text and line not in owners and line not in heads
                          and CRASH_HEADER.match(text) and (found := exception_of([text])) is not None)
        if not owners:
            return rows
        # The texts of the traces' lines and of their records only (not a dict of every line's).
        needed = pl.Series(list({*owners, *owners.values()}), dtype=rows["line"].dtype)
        picked = rows.filter(pl.col("line").is_in(needed.implode()) & (pl.col("clean") != ""))
        texts = dict(zip(picked["line"].to_list(), picked["clean"].to_list()))
        found = exceptions_by_owner(owners, texts)
        # A crash report (one that names its exception: a header alone is not one) is a record of
        # its own at its first line: where each line has its own time, that line's record with the
        # report's other lines after it; in a file of lines, one with the time of the record it
        # follows (normalize).
        crashed = {owner: head for owner, head in crash_reports(owners, texts, json_lines).items() if owner in found}
        if crashed and each_line_a_record:
            head_of = {owner: head for owner, (head, _) in crashed.items()}
            heads = set(head_of.values())  # (`in` a dict's values looks at each: 0.13 s over 60,000 lines)
            owners = {line: head_of.get(owner, owner) for line, owner in owners.items() if line not in heads}
            found = exceptions_by_owner(owners, texts)
            crashed = {}
        heads = {line for line, _ in crashed.values()}
        joined = {line: owner for line, owner in owners.items() if line not in heads} if heads else owners
        block.continuation += len(joined)
        if block.owners is not None:
            block.owners.update(joined)
        errors.update(found)
        crashes.update(crashed)
        return rows.filter(~pl.col("line").is_in(pl.Series(list(owners), dtype=rows["line"].dtype).implode()))

    # -- envelopes --------------------------------------------------------------------
    def _unwrap(self, rows: pl.DataFrame, block: _Block, preset: Preset, lines: LineBytes | None = None) -> None:
        """Lines wrapped by an envelope preset: the inner line is parsed like any other line
        (`lines`: the bytes the rows were split from, which the JSON reader takes)."""
        if preset.kind == "json":
            payload = lines.joined() if lines is not None else None
            inner, loose = unwrap_json_lines(preset, rows, lambda texts, schema: self._read_json(texts, schema, payload))
        else:
            if preset.multiline_start and preset.multiline_end:
                if rows["text"].str.ends_with("\r").any():  # CRLF (`aws` on Windows): its lines' ends
                    rows = rows.with_columns(pl.col("text").str.strip_suffix("\r"))
                rows = self._join_record_lines(rows, preset, block)
            inner, loose = unwrap_text_lines(preset, rows, self.json_keys)
            if preset.inner_envelope:
                inner = self._unwrap_nested(inner, self.presets[preset.inner_envelope])
        if loose.height and preset.context_lines:  # an export's lines about itself (the streams it searched)
            about = pl.any_horizontal([pl.col("text").str.contains(rule.pattern) for rule in preset.context_lines])
            block.context_lines += int(loose.select(about.sum()).item())
            loose = loose.filter(~about)
        if loose.height:
            self.parse_block(loose, block, envelope=None)
        partial = partial_flag(preset)
        if partial is not None:
            inner = self._join_partials(inner, partial, block)
        if preset.join_partial == "missing_newline":
            inner = inner.with_columns(pl.col("text").str.strip_suffix("\n"))
        inner = inner.drop([c for c in inner.columns if c not in ("line", "text") and not c.startswith(("_", "envelope."))])
        self.parse_block(inner, block, envelope=preset.name)

    def _unwrap_nested(self, rows: pl.DataFrame, nested: Preset) -> pl.DataFrame:
        """A text envelope's inner JSON objects that are `nested`'s records, unwrapped by it: its
        values first, the outer envelope's where it has none (Fluentd's time, to the second,
        after the container runtime's)."""
        objects = rows["text"].str.starts_with("{").fill_null(False)
        if not objects.any():
            return rows
        inner, _ = unwrap_json_lines(nested, rows.filter(objects).select("line", "text"), self._read_json)
        if inner.height == 0:
            return rows
        outer = rows.drop("text")
        shared = [c for c in inner.columns if c in outer.columns and c != "line"]
        inner = inner.join(outer, on="line", how="left", suffix="__outer").with_columns(
            pl.coalesce(c, f"{c}__outer").alias(c) for c in shared
        ).drop([f"{c}__outer" for c in shared])
        rest = rows.join(inner.select("line"), on="line", how="anti")
        return pl.concat([inner, rest], how="diagonal_relaxed").sort("line")

    @staticmethod
    def _join_record_lines(rows: pl.DataFrame, preset: Preset, block: _Block) -> pl.DataFrame:
        """The rows with each record of several lines (record_lines.record_runs: the preset's
        multiline start and end) as one row, its texts joined by line breaks: its first line's,
        the others counted as the block's continuation lines."""
        flags = rows.select(
            start=pl.col("text").str.contains(preset.multiline_start), end=pl.col("text").str.contains(preset.multiline_end),
        )
        if not (flags["start"] & ~flags["end"]).any():
            return rows
        runs = record_runs(flags["start"].to_list(), flags["end"].to_list())
        if not runs:
            return rows
        lines, texts = rows["line"].to_list(), rows["text"].to_list()
        joined, dropped = [], []
        for first, last in runs:
            joined.append((first, "\n".join(texts[first:last + 1])))
            dropped += range(first + 1, last + 1)
            if block.owners is not None:
                block.owners.update((lines[k], lines[first]) for k in range(first + 1, last + 1))
        block.continuation += len(dropped)
        at = pl.Series([first for first, _ in joined], dtype=pl.Int64)
        rows = rows.with_columns(rows["text"].scatter(at, pl.Series([text for _, text in joined], dtype=pl.String)))
        keep = pl.Series([True] * rows.height).scatter(pl.Series(dropped, dtype=pl.Int64), False)
        return rows.filter(keep)

    def _join_partials(self, rows: pl.DataFrame, partial: pl.Expr, block: _Block) -> pl.DataFrame:
        """Join partial lines (CRI `P`, Docker lines without newline) into the next full one."""
        flags = rows.select(partial.fill_null(False)).to_series()
        if not flags.any():
            return rows
        data = rows.to_dicts()
        out: list[dict] = []
        pending: dict | None = None
        for row, is_partial in zip(data, flags.to_list()):
            if pending is not None:
                pending["text"] += row["text"]
                block.continuation += 1
                if block.owners is not None:
                    block.owners[row["line"]] = pending["line"]
                if not is_partial:
                    out.append(pending)
                    pending = None
                continue
            if is_partial:
                pending = dict(row)
            else:
                out.append(row)
        if pending is not None:
            block.rejects.append(_reject_frame([pending["line"]], "partial_line", [pending["text"][:REJECT_TEXT_LIMIT]]))
        if not out:
            return rows.clear()
        return pl.from_dicts(out, schema=rows.schema)

    # -- dispatch ---------------------------------------------------------------------
    def parse_block(self, rows: pl.DataFrame, block: _Block, envelope: str | None, lines: LineBytes | None = None) -> None:
        """rows: columns line (Int64), text (String) and optionally carried envelope columns.
        lines: the bytes the texts were split from, which the JSON reader takes instead of the
        texts joined again."""
        if rows.height == 0:
            return
        # The lines' own bytes tell at once (a byte's search: 0.1 ms an 8 MB block, a pattern over
        # every line 2-3 ms) when none of them can end with a CR or begin with a NUL or a BOM.
        data = lines.data if lines is not None else None
        if (data is None or b"\r" in data) and rows["text"].str.ends_with("\r").any():  # stripping copies every line
            rows = rows.with_columns(pl.col("text").str.strip_suffix("\r"))
            lines = None
        if (data is None or b"\x00" in data or b"\xef" in data) and rows["text"].str.contains(r"^[\x00\ufeff]").any():
            # The NULs logrotate's copytruncate leaves where the file was before its truncation,
            # before the next line the writer wrote at its old offset; the BOM of a file that
            # `cat a.log b.log` put after another's lines.
            rows = rows.with_columns(pl.col("text").str.strip_chars_start("\x00\ufeff"))
            lines = None
        # Patterns rather than stripped copies of every line (`\s` is what strip_chars strips); a
        # line that starts with `{` is JSON and not blank without running them.
        texts = rows["text"]
        brace = texts.str.starts_with("{")
        flags = pl.DataFrame({
            "blank": _contains_unless(texts, r"^\s*$", brace, False),
            "too_long": texts.str.len_bytes() > self.config.max_line_bytes,
            "json": _contains_unless(texts, r"^\s*\{", brace, True),
        })
        del texts
        rows = pl.concat([rows, flags], how="horizontal")
        blank = int(rows["blank"].sum())
        if blank:
            block.blank += blank
            block.blank_lines.append(rows["line"].filter(rows["blank"]))
        long_rows = rows.filter(pl.col("too_long") & ~pl.col("blank"))
        if long_rows.height:
            block.rejects.append(pl.DataFrame({
                "line": long_rows["line"], "reason": pl.Series(["line_too_long"] * long_rows.height, dtype=pl.String),
                "text": long_rows["text"].str.slice(0, 200) + "…",
            }))
        usable = rows.filter(~pl.col("blank") & ~pl.col("too_long")).drop("blank", "too_long")
        prefix = f"{envelope}+" if envelope else ""
        json_rows = usable.filter(pl.col("json")).drop("json")
        text_rows = usable.filter(~pl.col("json")).drop("json")
        if lines is not None and json_rows.height != rows.height:
            lines = lines.filter(rows["json"] & ~rows["blank"] & ~rows["too_long"])
        if json_rows.height:
            # An envelope's inner lines are not the file's: they keep their text.
            self._parse_json(json_rows, block, prefix + "ndjson", lines, keep_text=envelope is not None or not block.lines_in_file)
        if text_rows.height:
            # The block's other lines (without their texts: no copy), for a stack trace after a JSON line.
            self._parse_text(text_rows, block, prefix, rows.drop("text"))

    def continued_bytes(self, tail: bytes, head: bytes, envelope: str) -> int:
        """How many bytes at the start of `head` continue a record that began in `tail` (both whole
        lines, either side of a cut between two blocks of one file): `tail` and `head` are parsed
        together and the lines of `head` joined to a record of `tail` are counted (see
        record_cuts.whole_records)."""
        preset = self.presets.get(envelope)
        if preset is None or not preset.is_envelope:
            first = head[: head.find(b"\n") + 1 or len(head)].lstrip()
            if first.startswith(b"{") or LEADING_TS.match(first.decode("utf-8", "replace")):
                return 0  # a JSON line or a line that starts with its time begins a record
        tail_lines = _line_count(tail)
        lines, _ = _decode_lines(tail + head, 2)  # not line 1: a BOM there would be dropped
        block = _Block(owners={})
        self.parse_envelope(lines, block, envelope)
        first_head = 2 + tail_lines
        joined = [line for line, owner in block.owners.items() if line >= first_head > owner]
        if not joined:
            return 0
        end = after_lines(head, max(joined) - first_head + 1)
        return len(head) if end is None else end

    def parse_envelope(self, rows: pl.DataFrame, block: _Block, envelope: str, lines: LineBytes | None = None) -> None:
        preset = self.presets.get(envelope)
        if preset is not None and preset.is_envelope:
            self._unwrap(rows, block, preset, lines)
        else:
            self.parse_block(rows, block, envelope=None, lines=lines)


def _yaml_value(text: str, loader: Any) -> Any:
    """A YAML document's value, None when it does not parse."""
    import yaml  # only for a YAML file

    try:
        return yaml.load(text, Loader=loader)  # no tags, scalars as text (_yaml_loader)
    except yaml.YAMLError:
        return None


@functools.cache
def _yaml_loader() -> Any:
    """libyaml's loader that reads every scalar as the text it is (a time stays the text it was, an
    id is not made a number), but a plain `null` or `~` as null, as the same JSON holds it
    (kubectl's `eventTime: null` before an event's other times)."""
    import yaml  # only for a YAML file

    class Loader(getattr(yaml, "CBaseLoader", yaml.BaseLoader)):  # type: ignore[misc]
        pass

    null = "tag:yaml.org,2002:null"
    Loader.add_implicit_resolver(null, re.compile(r"^(?:~|null|Null|NULL)$"), list("~nN"))
    Loader.add_constructor(null, lambda loader, node: None)
    return Loader


def _merge_by_format(raws: list[tuple[pl.DataFrame, str]]) -> list[tuple[pl.DataFrame, str]]:
    """One frame per format, so sub-blocks split off around a bad line are normalised together."""
    groups: dict[str, list[pl.DataFrame]] = {}
    for raw, fmt in raws:
        groups.setdefault(fmt, []).append(raw)
    return [
        (frames[0] if len(frames) == 1 else pl.concat(frames, how="diagonal_relaxed"), fmt)
        for fmt, frames in groups.items()
    ]


def _text_lines(chunk: bytes, first_line: int) -> list[str] | None:
    """A chunk's lines as text (the BOM of a file's first line dropped); None when some line is
    not UTF-8 (`_decode_lines` then sorts them out)."""
    try:
        text = chunk.decode("utf-8")
    except UnicodeDecodeError:
        return None
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if first_line == 1 and lines and lines[0].startswith("\ufeff"):
        lines[0] = lines[0][1:]  # after the pop: a file holding only a BOM is one blank line
    return lines


def _decode_lines(chunk: bytes, first_line: int) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Split a chunk into numbered text lines; undecodable lines are rejected. The two frames
    together hold _line_count(chunk) rows."""
    texts = split_lines(lines_payload(chunk, first_line))
    if texts is None:
        lines = _text_lines(chunk, first_line)
        if lines is None:
            return _lines_one_by_one(chunk, first_line)
        texts = pl.Series("text", lines, dtype=pl.String)
    frame = pl.DataFrame({
        "line": pl.int_range(first_line, first_line + texts.len(), dtype=pl.Int64, eager=True),
        "text": texts,
    })
    return frame, _no_rejects()


def _lines_one_by_one(chunk: bytes, first_line: int) -> tuple[pl.DataFrame, pl.DataFrame]:
    """`_decode_lines` of a chunk that is not all UTF-8: each line decoded, or rejected, alone."""
    raw_lines = chunk.split(b"\n")
    if raw_lines and raw_lines[-1] == b"":
        raw_lines.pop()
    good_lines, good_texts, bad_lines, bad_texts = [], [], [], []
    for offset, raw in enumerate(raw_lines):
        try:
            good_texts.append(raw.decode("utf-8"))
            good_lines.append(first_line + offset)
        except UnicodeDecodeError:
            bad_lines.append(first_line + offset)
            bad_texts.append(raw.decode("utf-8", errors="backslashreplace")[:REJECT_TEXT_LIMIT])
    frame = pl.DataFrame({"line": pl.Series(good_lines, dtype=pl.Int64), "text": pl.Series(good_texts, dtype=pl.String)})
    return frame, _reject_frame(bad_lines, "undecodable", bad_texts)


def _batch_lines(items: list[_Pending], block: _Block) -> tuple[pl.DataFrame, LineBytes | None, list[int]]:
    """A batch's lines (line, text), the bytes they were split from (LineBytes; None when a file
    is not UTF-8) and each file's line count; lines that are not UTF-8 go to `block.rejects`.
    Line n (from 1) of the batch's file i is numbered `i << FILE_SHIFT | n`."""
    payload: list[bytes] = []  # the files' bytes, each ending a line (see LineBytes)
    sizes: list[int] = []  # each file's part of the payload, in bytes
    for item in items:
        payload.append(lines_payload(item.data, 1))
        sizes.append(len(payload[-1]))
        if not item.data.endswith(b"\n"):
            payload.append(b"\n")
            sizes[-1] += 1
    joined = b"".join(payload)
    del payload
    texts = split_lines(joined)
    if texts is not None:
        lines = LineBytes.split_from(joined, texts)
        counts = _lines_per_part(lines.spans["end"], sizes)
        if counts is not None:
            bases, start = [], 0
            for index, count in enumerate(counts):
                bases.append((index << FILE_SHIFT) + 1 - start)
                start += count
            rows = pl.DataFrame({"line": _line_numbers(bases, counts), "text": texts})
            return rows, lines, counts
    return _batch_lines_one_by_one(items, block, joined)


def _lines_per_part(ends: pl.Series, sizes: list[int]) -> list[int] | None:
    """How many lines each of consecutive parts of a payload holds (`sizes`: their bytes, each
    part ending with a newline; `ends`: each line's newline offset, in order); None when the lines
    do not end where the payload does (then they are not its lines). Counting each file's
    newlines in Python held the GIL for 0.3 s of a 1M-line export of small files."""
    if not sizes or ends.len() == 0 or ends[-1] != sum(sizes) - 1:
        return None
    bounds = pl.Series(list(itertools.accumulate(sizes)), dtype=pl.Int64)  # where each part ends, exclusive
    upto = ends.search_sorted(bounds, side="left").cast(pl.Int64).to_list()  # lines ending before each bound
    return [upto[0], *(b - a for a, b in itertools.pairwise(upto))]


def _line_numbers(bases: list[int], lengths: list[int]) -> pl.Series:
    """Row r of a run of files' lines, in file `k`'s part: `bases[k] + r` (`lengths`: each file's lines)."""
    line = pl.DataFrame({"base": bases, "n": lengths}).filter(pl.col("n") > 0).select(pl.col("base").repeat_by("n").explode())
    return pl.int_range(0, sum(lengths), dtype=pl.Int64, eager=True) + line.to_series()


def _batch_lines_one_by_one(items: list[_Pending], block: _Block, joined: bytes) -> tuple[pl.DataFrame, LineBytes | None, list[int]]:
    """`_batch_lines` where polars' reader does not split them: each file split in Python, each line
    of a file that is not UTF-8 decoded (or rejected) alone."""
    frames, counts = [], []
    # The lines of consecutive UTF-8 files make one frame (a frame a file cost 0.1 ms, 2 s for
    # an export of 20,000 small files): their texts, and each file's line number base and count.
    texts: list[str] = []
    bases: list[int] = []
    lengths: list[int] = []
    every_file_utf8 = True

    def lines_so_far() -> None:
        if texts:
            frames.append(pl.DataFrame({"line": _line_numbers(bases, lengths), "text": pl.Series(texts, dtype=pl.String)}))
            texts.clear()
            bases.clear()
            lengths.clear()

    for index, item in enumerate(items):
        lines = _text_lines(item.data, 1)
        if lines is not None:
            counts.append(len(lines))
            if lines:  # line n of the file: (index << FILE_SHIFT) + n, n from 1
                bases.append((index << FILE_SHIFT) + 1 - len(texts))
                lengths.append(len(lines))
                texts.extend(lines)
            continue
        every_file_utf8 = False
        lines_so_far()
        decoded, undecodable = _lines_one_by_one(item.data, 1)
        counts.append(decoded.height + undecodable.height)  # every line of the file, as _line_count counts them
        frames.append(decoded.with_columns(pl.col("line") + (index << FILE_SHIFT)))
        if undecodable.height:
            block.rejects.append(undecodable.with_columns(pl.col("line") + (index << FILE_SHIFT)))
    lines_so_far()
    rows = pl.concat(frames, how="vertical") if frames else pl.DataFrame(schema={"line": pl.Int64, "text": pl.String})
    return rows, (LineBytes.split_from(joined, rows["text"]) if every_file_utf8 else None), counts


def _loaded(data: bytes) -> Any:
    """data parsed as one JSON document, or _NOT_JSON."""
    try:
        return json_exact.loads(data)
    except orjson.JSONDecodeError:
        return _NOT_JSON


def _sniffed_part(head: bytes) -> bytes:
    """What of a file's first block its format is judged by: its whole lines (a line cut off, or a
    file's last without its newline, is not sampled), of which the sniff reads its sample only."""
    end = sample_end(head)
    if len(head) > end:  # the sniff leaves out the sample's last line
        return head[:end + 1]
    return head[: head.rfind(b"\n") + 1] or head


def _line_count(chunk: bytes) -> int:
    return chunk.count(b"\n") + (0 if chunk.endswith(b"\n") or not chunk else 1)


class Ingestor:
    """Reads sources one by one into canonical tables with full line accounting."""

    def __init__(
        self, config: Config, sink: Callable[[list[tuple[pl.DataFrame, str]]], None],
        progress: Callable[[int], None] | None = None, block_bytes: int | None = None,
    ):
        self.config = config
        # Bytes of lines parsed at once, a chunk of a file or a batch of small files (default:
        # CHUNK_BYTES and BATCH_BYTES).
        self.block_bytes = block_bytes
        self.parser = LineParser(config)
        self.progress = progress
        # Raw records go to the sink block by block, so memory stays bounded on big files.
        self.sink = sink
        # Small files of lines are parsed together (see `_read_batch`): one polars pass each
        # instead of one per file, which is where many small files used to spend their time.
        self.batch: list[_Pending] = []
        self.batch_bytes = 0
        self.grammar_formats = {p.name for p in config.presets if p.is_grammar}

    def _finish_block(self, block: _Block, report: FileReport, source: str, read: _FileRead) -> None:
        """Line accounting of a block; its raw records wait for batch normalisation."""
        report.blank += block.blank
        report.parsed += block.continuation + block.context_lines
        raws = self._with_file_context(block, read, source)
        raws = [(raw.with_columns(pl.lit(source, dtype=pl.String).alias(SOURCE)), fmt) for raw, fmt in raws]
        self.sink(raws)
        for rej in block.rejects:
            report.add_rejects(rej)
            read.rejects.append(_own_text(rej.with_columns(source=pl.lit(source, dtype=pl.String))))

    def read(self, src: Source, report: FileReport | None = None) -> _FileRead:
        """Parse one source: raw records (not yet normalised) and the lines rejected so far."""
        report = report or FileReport(path=src.path)
        read = _FileRead(report)
        rejects = read.rejects
        opened = open_source(src)
        report.compression = opened.compression
        try:
            if opened.compression not in SUPPORTED_COMPRESSION:  # a zip not named .zip
                report.format = "unsupported"
                report.lines = 1
                report.add_rejects(_reject_frame([1], "unsupported_compression"))
                rejects.append(_reject_frame([1], "unsupported_compression", [f"<{opened.compression} data>"]).with_columns(source=pl.lit(src.path)))
                report.notes.append(f"{opened.compression} compression is not supported; decompress the file first")
                return read
            block_bytes = self.block_bytes or CHUNK_BYTES
            head = opened.stream.read(block_bytes)
            sniff = sniff_format(_sniffed_part(head), presets=self.config.presets)
            document = sniff.document and not sniff.line_documents
            if sniff.document:  # a document's reader takes JSON, which a BOM is not
                head = head.removeprefix(UTF8_BOM)
            # a document's blocks are cut anywhere, a file of lines' at a line's end
            chunks = iter_blocks(opened.stream, block_bytes, head) if document else iter_chunks(opened.stream, block_bytes, head)
            first = next(chunks, b"")
            report.format = sniff.label
            lines_only = not (sniff.binary or sniff.csv_preset or sniff.line_documents or sniff.document or sniff.yaml)
            # A framework's own log (Celery's, Sidekiq's) needs a read of its own (_read_batch): not
            # deferred, rather than parsed in a batch and then again alone.
            if lines_only and first and src.rereadable and sniff.label not in self.grammar_formats:
                second = next(chunks, None)
                if second is None:  # the whole file is in `first`: parse it with other small files
                    self._defer(_Pending(src.path, report, first, sniff, read))
                    return read
                chunks = itertools.chain([second], chunks)
            if sniff.binary:
                total = _line_count(first) + sum(_line_count(c) for c in chunks)
                report.lines = total
                binary = _reject_frame(range(1, total + 1), "binary_file")
                report.add_rejects(binary)
                rejects.append(binary.head(1).with_columns(text=pl.lit("<binary data>"), source=pl.lit(src.path)))
                report.notes.append("binary data (NUL bytes): not a log file")
            elif sniff.csv_preset:
                self._read_csv(first + b"".join(chunks), self.parser.presets[sniff.csv_preset], report, src.path, read)
            elif sniff.yaml:
                self._read_yaml(first + b"".join(chunks), report, src.path, read)
            elif sniff.line_documents:
                self._read_line_documents(first, chunks, report, src.path, read)
            elif document:
                self._read_document(first, chunks, report, src.path, read)
            else:
                self._read_lines(first, chunks, sniff, report, src.path, read, in_file=src.rereadable)
        finally:
            if opened.truncated:
                report.truncated = True
                report.notes.append(f"compressed data is truncated or corrupt ({opened.truncation_error}); read what was there")
            if not src.is_stdin:
                opened.stream.close()
        if report.lines == 0:
            report.notes.append("empty file")
        return read

    def _defer(self, item: _Pending) -> None:
        self.batch.append(item)
        # An envelope's inner lines keep their text on the raw records (parse_block): such files
        # are parsed together in half the bytes (at 8 MB a Docker export peaked 40 MB higher).
        self.batch_bytes += len(item.data) * (2 if item.sniff.envelope else 1)
        if self.batch_bytes >= (self.block_bytes or BATCH_BYTES):
            self.flush()

    def flush(self) -> None:
        """Parse the small files still waiting for their batch, those in one envelope together."""
        items, self.batch, self.batch_bytes = self.batch, [], 0
        by_envelope: dict[str, list[_Pending]] = {}
        for item in items:
            by_envelope.setdefault(item.sniff.envelope or "", []).append(item)
        for envelope, group in by_envelope.items():
            if len(group) > 1 and self._read_batch(group, envelope):
                continue
            for item in group:
                self._read_lines(item.data, iter(()), item.sniff, item.report, item.path, item.read, in_file=True)

    def _read_batch(self, items: list[_Pending], envelope: str = "") -> bool:
        """Parse whole files of lines, each in `envelope` ("": none), as one block: a container
        runtime's small files of a pod each (a call a file cost 10 ms or more of fixed costs). The
        lines joined to a line before them (a Docker or CRI partial line's rest) count as parsed
        for their file; a join across two files (one that ends in a partial line) is read file by
        file.

        A batch line number is `file index << 32 | line`, so every parser sees distinct, ordered
        line numbers and the accounting maps back to (file, line). Records of a framework grammar
        (their file context, multi-line records) need their own file: then False, nothing is kept,
        and the caller reads each file by itself.
        """
        block = _Block(lines_in_file=True, owners={})  # whole files of lines, none of them standard input
        rows, lines, counts = _batch_lines(items, block)
        self.parser.parse_envelope(rows, block, envelope, lines)
        # lines joined to a line before them (a partial line's rest), by file; one in another file
        joined = collections.Counter(line >> FILE_SHIFT for line in block.owners)
        across = any(line >> FILE_SHIFT != owner >> FILE_SHIFT for line, owner in block.owners.items())
        per_file = (
            across or len(block.owners) != block.continuation
            or block.context_lines or block.context or block.context_by_source
            or any(fmt.rpartition("+")[2] in self.grammar_formats or any(c.startswith(CONTEXT_PREFIX) for c in raw.columns)
                   for raw, fmt in block.raws)
        )
        if per_file:
            return False
        paths = pl.Series(SOURCE, [item.path for item in items], dtype=pl.String)
        for index, (item, count) in enumerate(zip(items, counts)):
            item.report.lines += count
            item.report.parsed += joined.get(index, 0)
        if block.blank_lines:
            for index, count in (pl.concat(block.blank_lines) // (1 << FILE_SHIFT)).value_counts().rows():
                items[index].report.blank += count
        raws = [(_local_lines(raw, LINE, paths), fmt) for raw, fmt in block.raws]
        self.sink(self._file_workers(raws, items))
        if block.rejects:
            rejects = _local_lines(pl.concat([r.select("line", "reason", "text") for r in block.rejects], how="vertical"), "line", paths)
            _count_rejects({item.path: item.report for item in items}, rejects, SOURCE)
            rejects = _own_text(rejects.select("line", "reason", "text", pl.col(SOURCE).alias("source")))
            by_source = rejects.partition_by("source", as_dict=True, maintain_order=True)
            for item in items:
                rej = by_source.get((item.path,))
                if rej is not None:
                    item.read.rejects.append(rej)
        if self.progress:
            self.progress(sum(len(item.data) for item in items))
        return True

    def _file_workers(self, raws: list[tuple[pl.DataFrame, str]], items: list[_Pending]) -> list[tuple[pl.DataFrame, str]]:
        """`_with_file_context` for a batch: a file whose records include a framework's own
        layout (Laravel, Sidekiq) is named after its worker, as when it is read by itself."""
        formats = self._own_formats({fmt for _, fmt in raws})
        if not any(p.file_worker and p.name in formats for p in self.config.presets):
            return raws
        present: dict[str, set[str]] = {}
        for raw, fmt in raws:
            for source in raw[SOURCE].unique().to_list():
                present.setdefault(source, set()).add(fmt)
        named = {item.path: self._worker_named_by(item.path, present.get(item.path, set())) for item in items}
        workers = {path: worker for path, worker in named.items() if worker}
        if not workers:
            return raws
        for item in items:
            item.read.report.named_worker = workers.get(item.path)
        column = FILE_NAME_PREFIX + "worker_id"
        return [
            (raw.with_columns(pl.col(SOURCE).replace_strict(workers, default=None, return_dtype=pl.String).alias(column)), fmt)
            for raw, fmt in raws
        ]

    def _read_lines(
        self, first: bytes, chunks, sniff: FormatSniff, report: FileReport, source: str, read: _FileRead, in_file: bool = False,
    ) -> None:
        """The lines of a source (`in_file`: a file, which can be read again; not standard input)."""
        next_line = 1
        pending = [first] if first else []
        envelope = sniff.envelope or ""
        inherited = Inherited()
        for chunk in whole_records(
            itertools.chain(pending, chunks), lambda tail, head: self.parser.continued_bytes(tail, head, envelope),
            self.block_bytes or CHUNK_BYTES,
        ):
            lines, undecodable = _decode_lines(chunk, next_line)
            line_bytes = None if undecodable.height else LineBytes.split_from(lines_payload(chunk, next_line), lines["text"])
            count = lines.height + undecodable.height  # every line of the chunk, as _line_count counts them
            next_line += count
            report.lines += count
            block = _Block(lines_in_file=in_file, inherited=inherited)
            if undecodable.height:
                block.rejects.append(undecodable)
            self.parser.parse_envelope(lines, block, sniff.envelope or "", line_bytes)
            self._finish_block(block, report, source, read)
            if self.progress:
                self.progress(len(chunk))

    def _read_document(self, first: bytes, chunks, report: FileReport, source: str, read: _FileRead) -> None:
        cutter = ValueCutter(in_array=first.lstrip(b" \t\r\n").startswith(b"["))
        values = cutter.feed(first)
        if values:  # an array's elements or JSON values back to back: read a block at a time
            return self._read_values(values, cutter, chunks, report, source, read)
        second = next(chunks, None)
        if second is not None:
            chunks = itertools.chain([second], chunks)
        document = _loaded(first) if second is None else _NOT_JSON  # the whole document in the first block
        if document is _NOT_JSON:  # longer than a block, or not JSON: its array of records read as cut
            cut = self._records_array_cut(first)
            if cut is not None:
                return self._read_values(cut[1], cut[0], chunks, report, source, read)
        data = first + b"".join(chunks)
        if document is _NOT_JSON and second is not None:
            document = _loaded(data)
        if document is _NOT_JSON:
            document = concatenated_values(data)  # the first value is longer than a chunk
            if document is None:
                return self._read_not_a_document(data, report, source, read)
            report.notes.append(f"{len(document):,} JSON documents one after the other")
        records, wrapper, preset = unwrap_document(document, self.config.presets)
        del document
        self._document_format(report, wrapper, preset)
        report.lines = len(records)
        block = _Block()
        self._parse_records(list(enumerate(records, start=1)), preset, block)
        self._finish_block(block, report, source, read)

    def _records_array_cut(self, first: bytes) -> tuple[ValueCutter, list] | None:
        """A cutter of the array of records a document's first block is cut off in (`{"events":
        [...]}`, search hits) and the block's elements, if they are what the document's records
        are (an array of other things before them is not cut: the document is read whole)."""
        within = array_within(first)
        if within is None:
            return None
        cutter = ValueCutter(within=within)
        values = cutter.feed(first[len(within.prefix):])
        if not values:
            return None
        _, wrapper, _ = unwrap_document(cutter.document(values), self.config.presets)
        return (cutter, values) if wrapper.startswith(".".join(within.path) + "[]") else None

    def _document_format(self, report: FileReport, wrapper: str, preset: Preset | None, kind: str = "json-document") -> None:
        report.format = f"{preset.label} ({kind}{f' {wrapper}' if wrapper else ''})" if preset else f"{kind}{f' ({wrapper})' if wrapper else ''}"
        report.notes.append(f"line numbers of a {kind.split('-')[0].upper()} document are record positions (1 = first record)")

    def _read_values(self, first: list, cutter: ValueCutter, chunks, report: FileReport, source: str, read: _FileRead) -> None:
        """An array's elements or JSON values back to back, each block's as they are cut: the
        preset that recognises the first records reads the rest; positions count across the file;
        a value that is not JSON is one rejected position, and so is what follows the last value
        that is not JSON (a value cut short). Once the first records show a preset that polars
        can unwrap (RecordReader), each block's elements are read by polars as NDJSON lines; a
        block it refuses is cut and parsed here."""
        state = _ValuesRead()
        self._read_value_batch(first, b"", cutter, state, report, source, read)
        if cutter.after is not None:
            cutter = self._documents_after(cutter, state, report, source, read)
        for chunk in chunks:
            if state.fast is None:
                values = cutter.feed(chunk)
            elif self._read_elements(chunk, cutter, state, report, source, read):
                values, state.refused = None, 0
            else:
                values = cutter.feed(b"")  # what elements() holds, chunk with it
                state.refused += 1
                if state.refused == REFUSED_BLOCKS:  # a compact array of nested arrays of objects
                    state.fast = None
            if values is not None:
                self._read_value_batch(values, b"", cutter, state, report, source, read)
            if cutter.after is not None:
                cutter = self._documents_after(cutter, state, report, source, read)
            if self.progress:
                self.progress(len(chunk))
        last, rest = cutter.finish()
        cut_short = self._records_array_cut(rest) if rest and state.each else None
        self._read_value_batch(last, b"" if cut_short else rest, cutter, state, report, source, read)
        if cut_short:
            self._read_cut_short(*cut_short, state, report, source, read)
        if not cutter.in_array and state.count > 1:
            report.notes.append(f"{state.count:,} JSON documents one after the other")
        self._document_format(report, state.wrapper, state.preset)
        report.lines = state.position

    def _read_elements(self, chunk: bytes, cutter: ValueCutter, state: _ValuesRead, report: FileReport, source: str,
                       read: _FileRead) -> bool:
        """A block's elements read by polars (state.fast); False if it refused them."""
        elements = cutter.elements(chunk)
        got = state.fast.read(elements, state.position + 1, cutter.separator) if elements else None
        if got is None:
            return False
        cutter.take()
        rows, not_records, count = got
        block = _Block()
        self._parse_unwrapped(rows, not_records.to_list(), state.preset.name, block)
        state.position += count
        state.count += count
        self._finish_block(block, report, source, read)
        return True

    def _read_value_batch(self, values: list, rest: bytes, cutter: ValueCutter, state: _ValuesRead, report: FileReport,
                          source: str, read: _FileRead) -> None:
        """A block's values cut and parsed here (`rest`: what follows the last that is not JSON)."""
        block = _Block()
        bad: list[tuple[int, bytes]] = []
        for not_json, run in itertools.groupby(values, key=lambda value: isinstance(value, NotJson)):
            if not_json:
                for value in run:
                    state.position += 1
                    bad.append((state.position, value.data))
                continue
            documents = list(run)
            if state.each:
                records = self._records_of_each(documents, state)
            else:
                document = cutter.document(documents)
                found = document_records(state.preset, document, known=True) if state.preset is not None else None
                if found is None:
                    records, state.wrapper, state.preset = unwrap_document(document, self.config.presets)
                    if state.each is None and self._each_a_document(documents, cutter, state):
                        records = self._records_of_each(documents, state)
                    state.fast = self._fast_reader(cutter, state.preset, state.wrapper)
                else:
                    records = found[0]
            self._parse_records(list(enumerate(records, start=state.position + 1)), state.preset, block)
            state.position += len(records)
        state.count += len(values)
        if rest:
            state.position += 1
            bad.append((state.position, rest))
        if bad:
            texts = [data[:REJECT_TEXT_LIMIT].decode("utf-8", "replace") for _, data in bad]
            block.rejects.append(_reject_frame([p for p, _ in bad], "invalid_json", texts))
        self._finish_block(block, report, source, read)

    def _documents_after(self, ended: ValueCutter, state: _ValuesRead, report: FileReport, source: str,
                         read: _FileRead) -> ValueCutter:
        """The cutter of the JSON values after a document whose array of records was read as cut
        (search responses appended to one file, the first longer than a block): each a document
        that holds records, as its first one does; the documents count from that first one."""
        cutter = ValueCutter()
        state.fast, state.each, state.count = None, True, 1
        values = cutter.feed(ended.after)
        if values:
            self._read_value_batch(values, b"", cutter, state, report, source, read)
        return cutter

    def _read_cut_short(self, cutter: ValueCutter, values: list, state: _ValuesRead, report: FileReport, source: str,
                        read: _FileRead) -> None:
        """The last of documents that each hold records, cut short (a `curl` killed during a
        page): its whole records are read, as those of a single document cut short are, and what
        follows them is one rejected position. It is not counted among the whole documents."""
        more, rest = cutter.finish()
        count, state.each = state.count, False
        self._read_value_batch(values + more, rest, cutter, state, report, source, read)
        state.count = count

    def _each_a_document(self, values: list, cutter: ValueCutter, state: _ValuesRead) -> bool:
        """Whether JSON values back to back are documents that each hold records (pages of search
        hits or `{"items": [...]}` responses appended to one file), as the file's first values
        show: no preset reads them as a list (Firehose's messages) and the first is a wrapper of
        records (state.wrapper and state.preset then say what it is)."""
        state.each = False
        if cutter.in_array or cutter.within is not None or state.wrapper or state.preset is not None:
            return False
        if values and isinstance(values[0], dict):
            _, wrapper, preset = unwrap_document(values[0], self.config.presets)
            if wrapper:
                state.each, state.wrapper, state.preset = True, wrapper, preset
        return state.each

    def _records_of_each(self, values: list, state: _ValuesRead) -> list:
        """The records of documents that each hold records, each unwrapped on its own."""
        records: list = []
        for value in values:
            found = document_records(state.preset, value, known=True) if state.preset is not None else None
            records.extend(found[0] if found is not None else unwrap_document(value, self.config.presets)[0])
        return records

    @staticmethod
    def _fast_reader(cutter: ValueCutter, preset: Preset | None, wrapper: str) -> RecordReader | None:
        """A reader of the array's elements as NDJSON lines, when each element is a record (or
        holds one at a key: a search hit's `_source`) that polars can unwrap."""
        if not cutter.in_array or not RecordReader.handles(preset):
            return None
        array = ".".join(cutter.within.path) + "[]" if cutter.within else "[]"
        tail = wrapper[len(array):]  # nothing, or one key below each element
        if not wrapper.startswith(array) or (tail and not re.fullmatch(r"\.[^.\[\]]+", tail)):
            return None
        return RecordReader(preset, tail[1:])

    def _read_not_a_document(self, data: bytes, report: FileReport, source: str, read: _FileRead) -> None:
        """What looked like a JSON document and is not one: read line by line."""
        sniff = sniff_format(data[: 1 << 20], allow_document=False, presets=self.config.presets)
        report.format = sniff.label
        if sniff.label in ("ndjson", "json-document") or sniff.label.startswith("mixed"):
            report.notes.append("looked like a JSON document but is not valid JSON; read line by line")
        self._read_lines(data, iter(()), sniff, report, source, read)

    def _parse_records(self, records: list[tuple[int, Any]], preset: Preset | None, block: _Block) -> None:
        """Records of JSON documents (position, value); an export preset unwraps each one (polars
        reads a document's elements as cut, RecordReader; records parsed here are unwrapped here,
        which takes less time than writing them out for polars)."""
        good: list[tuple[int, Any]] = []
        bad = []
        for position, record in records:
            unwrapped = unwrap_record(preset, record) if preset is not None else (
                json_exact.dumps(record).decode() if isinstance(record, dict) else None
            )
            if unwrapped is None:
                bad.append(position)
            else:
                good.append((position, unwrapped))
        if preset is not None:
            self._parse_unwrapped(unwrapped_frame(good), bad, preset.name, block)
            return
        rows = pl.DataFrame({
            "line": pl.Series([p for p, _ in good], dtype=pl.Int64), "text": pl.Series([t for _, t in good], dtype=pl.String),
        })
        self._parse_unwrapped(rows, bad, None, block)

    def _parse_unwrapped(self, rows: pl.DataFrame, not_records: list[int], envelope: str | None, block: _Block) -> None:
        """Records taken out of a document parsed as lines (an export preset's inner lines), the
        positions that hold no record rejected."""
        if not_records:
            block.rejects.append(_reject_frame(not_records, "not_a_record"))
        self.parser.parse_block(rows, block, envelope=envelope)

    def _read_csv(self, data: bytes, preset: Preset, report: FileReport, source: str, read: _FileRead) -> None:
        """A CSV export (Logs Insights' download): the header is line 1, each row a record of an
        export preset; a quoted value spread over several lines makes one record of them."""
        text = data.decode("utf-8", errors="replace").lstrip("\ufeff")
        report.lines = _line_count(data)
        block = _Block()
        reader = csv.reader(io.StringIO(text, newline=""))
        header: list[str] | None = None
        items: list[tuple[int, Any]] = []
        bad_lines, bad_texts = [], []
        end = 0
        for row in reader:
            start, end = end + 1, reader.line_num
            block.continuation += end - start
            if not any(cell.strip() for cell in row):
                block.blank += 1
            elif header is None:
                header = row
                block.context_lines += 1
            elif len(row) != len(header):
                bad_lines.append(start)
                bad_texts.append(",".join(row)[:REJECT_TEXT_LIMIT])
            else:
                items.append((start, dict(zip(header, row))))
        if bad_lines:
            block.rejects.append(_reject_frame(bad_lines, "unknown_format", bad_texts))
        self._parse_records(items, preset, block)
        self._finish_block(block, report, source, read)

    def _read_yaml(self, data: bytes, report: FileReport, source: str, read: _FileRead) -> None:
        """YAML documents between `---` lines (`gcloud logging read` without --format): each
        document a record at the line it starts on, its scalars read as text (a time stays the text
        it was); a document that is not a mapping of YAML is one rejected line. An export preset
        recognises the records as it would the same entries as JSON. One document without `---`
        lines that holds records is read as that document in JSON is."""
        loader = _yaml_loader()
        lines = data.decode("utf-8", errors="replace").removeprefix("\ufeff").split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        report.lines = len(lines)
        block = _Block()
        starts: list[tuple[int, int]] = []  # (first line, end) of each document's lines
        begin = None
        for number, line in enumerate(lines, 1):
            if line.rstrip() == "---":
                block.context_lines += 1
                if begin is not None:
                    starts.append((begin, number - 1))
                begin = None
            elif not line.strip():
                block.blank += 1
            elif begin is None:
                begin = number
        if begin is not None:
            starts.append((begin, len(lines)))
        documents = [(begin, end, _yaml_value("\n".join(lines[begin - 1:end]), loader)) for begin, end in starts]
        if len(documents) == 1 and not block.context_lines:  # one document, no `---` line
            document = documents[0][2]
            if not isinstance(document, (dict, list)):  # text that only looks like YAML
                return self._read_not_a_document(data, report, source, read)
            found_records, wrapper, preset = unwrap_document(document, self.config.presets)
            if wrapper or isinstance(document, list):
                # a document of records (`aws logs filter-log-events --output yaml`, `kubectl get
                # events -o yaml`), read as the same document in JSON is; line numbers the records'
                # positions (a mapping that holds none is one entry: a single gcloud entry)
                self._document_format(report, wrapper, preset, "yaml-document")
                report.lines = len(found_records)
                block = _Block()
                self._parse_records(list(enumerate(found_records, start=1)), preset, block)
                return self._finish_block(block, report, source, read)
        records: list[tuple[int, Any]] = []
        bad_lines, bad_texts = [], []
        for begin, end, document in documents:
            block.continuation += sum(1 for line in lines[begin:end] if line.strip())
            if isinstance(document, dict):
                records.append((begin, document))
            else:
                bad_lines.append(begin)
                bad_texts.append(lines[begin - 1][:REJECT_TEXT_LIMIT])
        if bad_lines:
            block.rejects.append(_reject_frame(bad_lines, "invalid_yaml", bad_texts))
        found = find_document_preset(self.config.presets, [record for _, record in records])
        if found is not None and len(found[1]) == len(records):
            report.format = f"{found[0].label} (yaml documents)"
            self._parse_records([(line, record) for (line, _), record in zip(records, found[1], strict=True)], found[0], block)
        else:
            self._parse_records(records, None, block)
        self._finish_block(block, report, source, read)

    def _read_line_documents(self, first: bytes, chunks, report: FileReport, source: str, read: _FileRead) -> None:
        """A JSON document on every line (an OTLP file exporter's batches): records are numbered
        across the file; a line that is not a document counts as one rejected position."""
        report.notes.append("line numbers of JSON documents are record positions (1 = first record of the file)")
        position = 0
        labels: set[str] = set()
        for chunk in itertools.chain([first] if first else [], chunks):
            block = _Block()
            items: dict[str | None, list[tuple[int, Any]]] = {}
            presets: dict[str | None, Preset | None] = {}
            load = json_exact.loader(chunk)
            for raw in chunk.split(b"\n"):
                if not raw.strip():
                    continue
                try:
                    document = load(raw)
                except orjson.JSONDecodeError:
                    position += 1
                    block.rejects.append(_reject_frame([position], "invalid_json", [raw[:REJECT_TEXT_LIMIT].decode("utf-8", "replace")]))
                    continue
                records, _, preset = unwrap_document(document, self.config.presets)
                key = preset.name if preset else None
                presets[key] = preset
                labels.add(preset.label if preset else "json-document")
                for record in records:
                    position += 1
                    items.setdefault(key, []).append((position, record))
            for key, found in items.items():
                self._parse_records(found, presets[key], block)
            self._finish_block(block, report, source, read)
        report.lines = position
        report.format = f"{' + '.join(sorted(labels)) or 'json-document'} (json documents, one a line)"

    def _own_formats(self, formats: set[str]) -> set[str]:
        """The formats of a file's records that are one process's own lines: a framework's log, or
        one inside envelopes of one source (`kubectl-timestamps+celery`, a container's output);
        not inside an export of many (`cloudwatch-logs+celery`)."""
        presets = self.parser.presets
        own = set()
        for fmt in formats:
            *envelopes, inner = fmt.split("+")
            if all(name in presets and presets[name].one_source for name in envelopes):
                own.add(inner)
        return own

    def _worker_named_by(self, path: str, formats: set[str]) -> str | None:
        """The worker a framework's own log file is named after (the `file_worker` pattern of a
        preset whose records it holds, also in an envelope: `kubectl logs --timestamps` of a
        Celery worker), or None: an export is not named after its worker."""
        path = log_owner(path)  # its rotated parts are one worker's; `0.log` is its pod's
        formats = self._own_formats(formats)
        for preset in self.config.presets:
            match = re.search(preset.file_worker, path) if preset.file_worker and preset.name in formats else None
            if match and match.groupdict().get("worker_id"):
                return match.group("worker_id")
        return None

    def _with_file_context(self, block: _Block, read: _FileRead, path: str) -> list[tuple[pl.DataFrame, str]]:
        """Values that hold for the whole file (a Celery node name from its banner or `ready.` line)
        reach the file's records as `file.<column>` fallbacks, from the block where they appear on;
        a framework log without one names its worker after the file."""
        context, by_source = read.context, read.context_by_source
        for key, value in block.context.items():
            context.setdefault(key, value)
        for found, values in block.context_by_source.items():
            for key, value in values.items():
                by_source.setdefault(found, {}).setdefault(key, value)
        sources = [self.parser.source_of(fmt, raw.columns) for raw, fmt in block.raws]
        for (raw, _), source in zip(block.raws, sources, strict=True):
            for column in (c for c in raw.columns if c.startswith(CONTEXT_PREFIX)):
                key = column.removeprefix(CONTEXT_PREFIX)
                if source is None:
                    found = raw[column].drop_nulls()
                    if found.len():
                        context.setdefault(key, found[0])
                    continue
                firsts = raw.select(source.alias("source"), pl.col(column)).drop_nulls()
                for found, value in firsts.unique("source", keep="first", maintain_order=True).rows():
                    by_source.setdefault(found, {}).setdefault(key, value)
        named = {values["worker_id"] for values in by_source.values() if "worker_id" in values}
        if "worker_id" in context or len(named) == 1:
            if read.report.context_worker is None:  # one worker names itself in this file
                read.report.context_worker = context.get("worker_id") or next(iter(named))
        elif not named:
            worker = self._worker_named_by(path, {fmt for _, fmt in block.raws})
            if worker:
                read.report.named_worker = worker
        if not (context or by_source or read.report.named_worker):
            return block.raws
        return [(raw.with_columns(self._file_values(context, by_source, source, read.report.named_worker)), fmt)
                for (raw, fmt), source in zip(block.raws, sources, strict=True)]

    @staticmethod
    def _file_values(context: dict[str, str], by_source: dict[str, dict[str, str]], source: pl.Expr | None,
                     named: str | None) -> list[pl.Expr]:
        """The `file.` columns of a file's records: what its lines said for the whole file, or for
        each record's source in an export of several; and the worker its file's name gives."""
        values = []
        for key in sorted({*context, *(k for v in by_source.values() for k in v)}):
            whole = pl.lit(context.get(key), dtype=pl.String)
            mapping = {found: v[key] for found, v in by_source.items() if key in v}
            if source is not None and mapping:
                whole = pl.coalesce(source.replace_strict(mapping, default=None, return_dtype=pl.String), whole)
            values.append(whole.alias(FILE_PREFIX + key))
        if named:
            values.append(pl.lit(named, dtype=pl.String).alias(FILE_NAME_PREFIX + "worker_id"))
        return values


@dataclass
class _Pending:
    """A small file of lines read whole, waiting to be parsed with others (Ingestor.flush)."""

    path: str
    report: FileReport
    data: bytes
    sniff: FormatSniff
    read: _FileRead


def _local_lines(frame: pl.DataFrame, column: str, paths: pl.Series) -> pl.DataFrame:
    """Batch line numbers (file index << 32 | line) -> the file's path (SOURCE) and its own line."""
    index = frame[column] // (1 << FILE_SHIFT)
    return frame.with_columns(
        (frame[column] & ((1 << FILE_SHIFT) - 1)).alias(column), paths.gather(index).alias(SOURCE),
    )


@dataclass
class _ValuesRead:
    """Where the read of a document's values is: positions and values so far, the preset that
    recognised its records, the path they sat at, and polars' reader of its elements."""

    position: int = 0
    count: int = 0
    preset: Preset | None = None
    wrapper: str = ""
    fast: RecordReader | None = None
    refused: int = 0  # blocks polars refused in a row
    each: bool | None = None  # values back to back that are documents holding records (None: not yet known)


@dataclass
class _FileRead:
    """One source parsed: its report, raw record frames (with _source) and rejected lines."""

    report: FileReport
    rejects: list[pl.DataFrame] = field(default_factory=list)
    context: dict[str, str] = field(default_factory=dict)  # column -> value for the whole file
    context_by_source: dict[str, dict[str, str]] = field(default_factory=dict)  # source -> column -> value


class _Normaliser:
    """Normalises raw frames in batches across files: many small files cost one pass."""

    def __init__(
        self, config: Config, reports: dict[str, FileReport], labels: LabelPool, since: datetime | None = None,
        until: datetime | None = None, survey: bool = False, keep: Callable[[pl.DataFrame], pl.DataFrame] | None = None,
        spill: Callable[[pl.DataFrame], None] | None = None,
    ) -> None:
        self.config = config
        self.labels = labels  # the pool each batch's label columns are held in (assembly's too)
        self.reports = reports
        self.since, self.until = since, until
        self.survey = survey  # count rows per second (time_counts), keep only those `keep` gives
        self.keep = keep
        self.spill = spill  # given each normalised batch of a survey (dupfind.windows.Spill)
        self.time_counts: list[pl.DataFrame] = []
        self.pending: list[tuple[pl.DataFrame, str]] = []
        self.pending_rows = 0
        self.pending_bytes = 0
        self.tables: list[HeldBatch] = []
        self.coded = coded_columns(config.business_keys)
        self.rejects: list[pl.DataFrame] = []
        self.spans: list[pl.DataFrame] = []  # per batch: first and last time per file
        self.unmapped: list[pl.DataFrame] = []  # per batch: records of kind `other` per file and name
        self.filtered_out = 0  # records outside --since/--until, dropped batch by batch
        # What each batch adds to the file reports, applied by `apply_reports` once parsing is
        # done: the parsing thread updates the same reports meanwhile.
        self.report_updates: list[tuple[list[tuple], dict[str, dict[str, list[str]]], pl.DataFrame]] = []

    def add(self, raws: list[tuple[pl.DataFrame, str]]) -> None:
        self.pending.extend(raws)
        self.pending_rows += sum(raw.height for raw, _ in raws)
        self.pending_bytes += sum(raw.estimated_size() for raw, _ in raws)
        if self.pending_rows >= NORMALISE_BATCH_ROWS or self.pending_bytes >= NORMALISE_BATCH_BYTES:
            self.flush()

    def flush(self) -> None:
        for raw, fmt in _merge_by_format(self.pending):
            result = normalize(raw, config_for_format(self.config, fmt), fmt)
            table = result.table
            # File reports describe every record; --since/--until then drop rows batch by batch,
            # so a narrow window over a large export holds only the records it keeps.
            per_file = table.group_by("source").agg(
                pl.len(), pl.col("ts_naive").sum(), pl.col("ts").min().alias("first"), pl.col("ts").max().alias("last")
            )
            self.spans.append(per_file.select("source", "first", "last"))
            self.unmapped.append(
                table.filter((pl.col("kind") == "other") & pl.col("name").is_not_null()).group_by("source", "name").len()
            )
            kept = rows_within(table, self.since, self.until)
            self.filtered_out += table.height - kept.height
            table = kept
            if self.survey:
                self.time_counts.append(_per_second(table))
                if self.spill is not None and table.height:
                    self.spill(table)
                table = self.keep(table) if self.keep is not None else table.clear()
            self.tables.append(held_for_assembly(table, self.coded, self.labels))
            counts = per_file.select("source", "len", "ts_naive").rows()
            self.report_updates.append((counts, result.fields, result.rejects))
            if result.rejects.height:
                self.rejects.append(_own_text(result.rejects))
        self.pending = []
        self.pending_rows = self.pending_bytes = 0

    def apply_reports(self) -> None:
        """Records, fields and rejects of every normalised batch, added to the file reports in batch order."""
        for counts, fields_by_source, rejects in self.report_updates:
            for source, records, naive in counts:
                report = self.reports[source]
                report.records += records
                report.parsed += records
                report.naive_ts += naive
            for source, found in fields_by_source.items():
                self.reports[source].add_fields(found)
            _count_rejects(self.reports, rejects, "source")
        self.report_updates = []


class _NormalisingThread:
    """Normalises parsed blocks on a second thread while the next one is parsed.

    polars releases the GIL while it works, so parsing and normalisation overlap on two cores. The
    normaliser sees the same blocks in the same order as in one thread, so the result is the same."""

    def __init__(self, normaliser: _Normaliser) -> None:
        self.normaliser = normaliser
        self.queue: queue.Queue = queue.Queue(maxsize=NORMALISE_QUEUE_BLOCKS)
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="dupfind-normalise", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while (raws := self.queue.get()) is not None:
            if self.error is None:
                try:
                    self.normaliser.add(raws)
                except BaseException as exc:  # noqa: BLE001 (raised again in the reading thread)
                    self.error = exc

    def add(self, raws: list[tuple[pl.DataFrame, str]]) -> None:
        if self.error is not None:
            raise self.error
        self.queue.put(raws)

    def close(self) -> None:
        """Wait for the blocks handed over so far; raise what normalising them raised."""
        self.queue.put(None)
        self.thread.join()
        if self.error is not None:
            raise self.error


def empty_rejects() -> pl.DataFrame:
    """A frame of rejected lines that holds none (source, line, reason, text)."""
    return pl.DataFrame(schema={"source": pl.String, "line": pl.Int64, "reason": pl.String, "text": pl.String})


def _per_second(table: pl.DataFrame) -> pl.DataFrame:
    return table.group_by(pl.col("ts").dt.truncate("1s").alias("second")).agg(pl.len().alias("records"))


def _finalize_reports(reports: dict[str, FileReport], spans: list[pl.DataFrame], unmapped: list[pl.DataFrame]) -> None:
    """Time span and unmapped event names per file, from the per-batch summaries of the normaliser."""
    if not spans:
        return
    spans_all = pl.concat(spans, how="vertical").group_by("source").agg(pl.col("first").min(), pl.col("last").max())
    for source, first, last in spans_all.rows():
        reports[source].first_ts, reports[source].last_ts = first, last
    other = pl.concat(unmapped, how="vertical")
    if other.height:
        per_source = (
            other.group_by("source", "name").agg(pl.col("len").sum())
            .sort(["source", "len", "name"], descending=[False, True, False])
            .group_by("source", maintain_order=True)
            .agg(pl.len().alias("distinct"), pl.col("name").head(UNMAPPED_LIMIT), pl.col("len").head(UNMAPPED_LIMIT))
        )
        # One pass: a frame per file cost 50 us each (1 s for 20,000 small files).
        for source, distinct, names, lens in per_source.iter_rows():
            report = reports[source]
            report.unmapped_distinct = distinct
            report.unmapped_events = dict(zip(names, lens, strict=True))


def ingest(
    paths: list[str],
    config: Config,
    since: datetime | None = None,
    until: datetime | None = None,
    progress: Callable[[int], None] | None = None,
    cache=None,
    store_later: bool = False,
    survey: bool = False,
    keep: Callable[[pl.DataFrame], pl.DataFrame] | None = None,
    spill: Callable[[pl.DataFrame], None] | None = None,
    block_bytes: int | None = None,
    naming: list[FileReport] = (),
) -> IngestResult:
    """Read every input into one canonical table (sorted by time, then source and line).

    `cache` (a dupfind.cache.TableCache) serves unchanged files and stores freshly parsed ones:
    before this returns, or with `store_later` once the command's output is out, after its other
    cache writes (dupfind.background.defer, last). With `survey`, every line is read and
    accounted for but no row is kept, or only the rows `keep` returns of each normalised batch:
    the result's `time_counts` says how many records each second of time holds (no cache is read
    or written); `spill` is given each normalised batch of the survey (its rows within the bounds).
    `block_bytes`: lines are parsed this many bytes at a time (default: 8 MB chunks of a file,
    batches of BATCH_BYTES; smaller blocks hold less memory in flight, for more time).
    `naming`: the reports of inputs not read here that name workers of those read (a rotated log's
    oldest part, with its banner, outside a read of a time; see file_workers).
    """
    sources = expand_inputs(paths)
    reports: dict[str, FileReport] = {}
    if survey:
        cache = None
    labels = LabelPool()
    normaliser = _Normaliser(config, reports, labels, since, until, survey, keep, spill)
    normalising = _NormalisingThread(normaliser)
    ingestor = Ingestor(config, sink=normalising.add, progress=progress, block_bytes=block_bytes)
    parse_rejects: list[pl.DataFrame] = []
    reads: list[_FileRead] = []
    cached_tables: list[HeldBatch] = []
    cache_filtered = 0
    coded = coded_columns(config.business_keys)
    to_store: dict[str, str] = {}  # source path -> identity, for files parsed in this run
    with reading_heap():  # the files' byte strings from the heap while they are read
        try:
            # Taken as the command listed its inputs (sources.listings_kept), before the read.
            identities = {} if cache is None else {src.path: src.identity() for src in sources if src.file is not None}
            cached_reports: dict[str, FileReport] = {}
            if cache is not None:
                cached = cache.load([(path, identity) for path, identity in identities.items() if identity is not None],
                                    lambda rows: rows_within(rows, since, until))
                cached_reports = cached.reports
                while cached.parts:  # each pack's rows released once held
                    part = cached.parts.pop()
                    cache_filtered += part.left_out
                    # Only the texts of the rows kept, unless they are the pack's every row.
                    cached_tables.append(held_from_coded(part.rows, part.texts, coded, compact=not part.whole, labels=labels))
                    parse_rejects.append(part.rejects)
                    del part
            for src in sources:
                identity = identities.get(src.path)
                if src.path in cached_reports:
                    reports[src.path] = cached_reports[src.path]
                    if progress and src.file is not None:
                        progress(os.stat(src.file).st_size)
                    continue
                reports[src.path] = FileReport(path=src.path)  # filled by read(); normalisation may start first
                reads.append(ingestor.read(src, reports[src.path]))
                if identity is not None and since is None and until is None:  # rows of a window are not the file's
                    to_store[src.path] = identity
            ingestor.flush()
        finally:
            normalising.close()
    for read in reads:  # a batched file's rejects are known once its batch was parsed
        parse_rejects.extend(read.rejects)
    normaliser.flush()
    normaliser.apply_reports()
    ordered = [reports[src.path] for src in sources]
    if sum(r.lines for r in ordered) == 0:
        truncated = [r.path for r in ordered if r.truncated]
        detail = f" ({truncated[0]} is compressed data cut off before its first line)" if truncated else ""
        raise DupfindError(f"the input is empty: no log lines were found{detail}.")
    schema = canonical_schema(config.business_keys)
    _finalize_reports(reports, normaliser.spans, normaliser.unmapped)
    all_rejects = [r.select("source", "line", "reason", "text") for r in (*parse_rejects, *normaliser.rejects)]
    rejects = with_line_texts(
        pl.concat(all_rejects, how="vertical") if all_rejects else empty_rejects(), sources,
    )
    tables = [*cached_tables, *normaliser.tables]
    cached_tables.clear()
    normaliser.tables.clear()
    table, filtered_out, texts = assemble_held(tables, schema, since, until, coded, labels)
    filtered_out += cache_filtered
    pack = None
    if to_store:
        if store_later:
            # A first run's report then comes as soon as a run without the cache gives it (at 1M
            # lines 5.3-5.7 s instead of 6.4-6.8 s with the store on a thread beside correlation).
            pack = PackRows(table, lambda rows: _store_in_cache(cache, to_store, reports, rows, texts, rejects, schema))
            background.defer(pack.store, last=True)
        else:
            _store_in_cache(cache, to_store, reports, PackRows(table), texts, rejects, schema)
    copies: list[list] = []
    time_counts = None
    # After the pack took its rows: a file's entry holds what the file says alone.
    if not survey:
        table, copies = without_copies(table)
        table = with_crashes(with_file_workers(table, [*ordered, *(r for r in naming if r.path not in reports)]), texts)
    else:
        # Without a Categorical column: polars keeps every text it turned into one for as long as
        # any lives, so an empty one held through the windows would keep all their texts.
        table = with_file_workers(as_strings(texts.decoded(table)), ordered)
        texts = Texts.empty(coded)
        time_counts = (
            pl.concat(normaliser.time_counts, how="vertical").group_by("second").agg(pl.col("records").sum()).sort("second")
            if normaliser.time_counts else pl.DataFrame(schema={"second": schema["ts"], "records": pl.UInt32})
        )
    return IngestResult(table, ordered, rejects, filtered_out + normaliser.filtered_out, time_counts, texts, pack, copies)


def _store_in_cache(
    cache, identities: dict[str, str], reports: dict[str, FileReport], pack: PackRows, texts: Texts,
    rejects: pl.DataFrame, schema: dict[str, pl.DataType],
) -> None:
    """Store the freshly parsed files (`identities`: path -> sources.file_identity) as one pack:
    their rows as the assembled table holds them (ids and messages as codes, with the texts those
    rows use), their rejects and reports."""
    if background.stopping():
        return  # interrupted: these files are parsed again next time
    try:
        # An identity is taken as the command lists its inputs, before the read: a file written
        # since then is not stored under what it was (it is parsed again next time).
        fresh = [path for path, identity in identities.items() if cache.identity(path) == identity]
        if not fresh:
            return
        every = set(pack.table["source"].unique().cast(pl.String).to_list()) <= set(fresh)
        dictionary = texts.values
        apart = None
        if every and pack.apart is not None:  # the columns held apart stored apart (their rows by position)
            rows = pack.table.select([c for c in schema if c in pack.table.columns])
            apart = pack.apart
        else:
            rows = pack.whole().select(list(schema))
        if not every:
            rows = rows.filter(pl.col("source").cast(pl.String).is_in(fresh))
            rows, dictionary = Texts.compacted(rows, dictionary, texts.columns)
        stored_rejects = rejects.filter(pl.col("source").is_in(fresh)) if rejects.height else rejects
        cache.store({identities[path]: reports[path] for path in fresh}, rows, dictionary, stored_rejects, apart)
    except KeyboardInterrupt:
        background.stop()  # polars raises Ctrl-C in whichever thread is in it
        if threading.current_thread() is threading.main_thread():
            raise  # the command's own Ctrl-C (the store deferred after the report): exit 130, said once
