"""Detect a file's format from a sample, and find the records inside JSON documents."""

from __future__ import annotations

import csv
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any, NamedTuple

import orjson

from dupfind.lineparse import parse_logfmt, parse_plain
from dupfind.presets import ANSI_ESCAPE, Preset, find_document_preset, per_presets
from dupfind.record_lines import joined_records
from dupfind.stack_lines import EXCEPTION_LINE, TRACE_LINE

SAMPLE_BYTES = 64 << 10
SAMPLE_LINES = 50
MIN_SAMPLE_LINES = 8  # whole lines a sniff reads, however long (see sample_end)
# Keys under which exports wrap their list of records, tried in order.
WRAPPER_KEYS = ("Records", "records", "events", "logs", "entries", "data", "items", "results", "rows", "messages")


@dataclass
class FormatSniff:
    """What a file looks like: a label for humans, and how to read it."""

    label: str
    envelope: str | None = None  # the envelope preset (docker, cri, gcp-logging...)
    document: bool = False
    binary: bool = False
    line_documents: bool = False  # every line is a JSON document of several records (OTLP file exporter)
    csv_preset: str | None = None  # a CSV table whose header names an export preset's fields
    yaml: bool = False  # YAML documents between `---` lines (`gcloud logging read`'s default output), or one


def after_lines(data: bytes, count: int) -> int | None:
    """Where the first `count` lines of `data` end (after the newline of the last), or None when
    `data` holds fewer whole lines."""
    end = -1
    for _ in range(count):
        end = data.find(b"\n", end + 1)
        if end < 0:
            return None
    return end + 1


def sample_end(head: bytes) -> int:
    """Where a sniff's sample of `head` ends: after SAMPLE_BYTES, or after its first
    MIN_SAMPLE_LINES lines if they are longer (a traceback or a payload dump as a file's first
    records: judged by one cut line, a file of envelopes or search hits was read as a document)."""
    if len(head) <= SAMPLE_BYTES:
        return len(head)
    whole = after_lines(head, MIN_SAMPLE_LINES)
    return max(SAMPLE_BYTES, head.rfind(b"\n") + 1 if whole is None else whole)


def _sample_lines(head: bytes, strip: bool = True) -> list[str]:
    end = sample_end(head)
    text = head[:end].decode("utf-8", errors="replace").removeprefix("\ufeff")
    lines = [line.strip() if strip else line.rstrip("\r") for line in text.split("\n")]
    if len(head) > end and lines:
        lines.pop()  # probably cut in the middle
    return [line for line in lines if line and (strip or not line.isspace())][:SAMPLE_LINES]


def _trace_lines(head: bytes) -> int:
    """How many of the sampled lines look like a stack trace's (read with their indentation)."""
    clean = (_without_ansi(line) for line in _sample_lines(head, strip=False))
    return sum(1 for line in clean if TRACE_LINE.match(line) or EXCEPTION_LINE.match(line))


_ANSI = re.compile(ANSI_ESCAPE)


@cache
def _line_pattern(line: str) -> re.Pattern:
    return re.compile(line)


def _without_ansi(line: str) -> str:
    return _ANSI.sub("", line) if "\x1b" in line else line


def _grammar_test(preset: Preset):
    """Whether a line is one of a grammar preset's lines (its record line or a context line)."""
    patterns = preset.line_searches

    def test(line: str) -> bool:
        for search in patterns:
            if search(line):
                return True
        return False
    return test


_JSON_OBJECT_START = re.compile(r'\{\s*(?:"|\})')


def _envelope_judge(preset: Preset, presets: tuple[Preset, ...]) -> Callable[[list[str], int], bool]:
    """Whether sampled lines (of `total`) are a text envelope's: most of them its lines; with
    `inner_lines`, also a quarter of those a JSON object or a line of those grammar presets inside
    (a Celery log's traceback and banner lines are not, and any text after a time is not enough)."""
    search = _line_pattern(preset.line).search  # type: ignore[arg-type]
    if preset.multiline_start and preset.multiline_end:
        start, end = _line_pattern(preset.multiline_start), _line_pattern(preset.multiline_end)

        def whole(record: str) -> bool:  # sampled lines are stripped: a record's last line of its tab
            return search(record) is not None or ("\n" in record and start.search(record) is not None)

        def records_judge(lines: list[str], total: int) -> bool:
            records = joined_records(lines, start, end)  # most records its own, not most lines
            return _majority_of(whole, records, len(records))
        return records_judge
    if not preset.inner_lines:
        return lambda lines, total: _majority_of(search, lines, total)
    inner_tests = [_grammar_test(p) for p in presets if p.name in preset.inner_lines]

    def known(inner: str) -> bool:
        return bool(_JSON_OBJECT_START.match(inner)) or any(inner_test(inner) for inner_test in inner_tests)

    def inner_of(found: re.Match) -> str:
        """The inner line; where the envelope's time is optional and it took one, with that time
        before it (the line's own: Preset.time_optional), when a grammar knows it only so."""
        inner = found.group("inner") or ""
        if preset.time_optional and found.group("ts") and not known(inner):
            return f"{found.group('ts')} {inner}"
        return inner

    def judge(lines: list[str], total: int) -> bool:
        if not _majority_of(search, lines, total):
            return False
        inners = [inner_of(found) for found in map(search, lines) if found is not None]
        return 4 * sum(map(known, inners)) >= len(inners)
    return judge


def _majority(count: int, total: int) -> bool:
    return total > 0 and count * 2 > total


def _passing(test, items: list, total: int) -> int:
    """How many items pass `test`; -1 as soon as too many failed for more than half of `total` to
    pass. Sniffing tries every preset on every sampled line of every file, and most presets fail
    most lines: they are dropped after about half of them."""
    need = total // 2 + 1
    hits, misses, allowed = 0, 0, len(items) - need
    for item in items:
        if test(item):
            hits += 1
        else:
            misses += 1
            if misses > allowed:
                return -1
    return hits


def _majority_of(test, items: list, total: int) -> bool:
    """_majority(number of items that pass `test`, total)."""
    return total > 0 and _majority(_passing(test, items, total), total)


_YAML_KEY = re.compile(r"[A-Za-z_@][\w@./-]*:(?: |$)")
_YAML_OPENS = re.compile(r"[A-Za-z_@][\w@./-]*:\s*$")


def _yaml_documents(head: bytes) -> bool:
    """Whether a sample is YAML documents between `---` lines, as `gcloud logging read` prints
    entries: a `---` line, and nearly every other line a `key:` at the margin or indented under one."""
    lines = [line.removesuffix("\r") for line in head.decode("utf-8", "replace").split("\n")[:200] if line.strip()]
    if len(lines) > 1 and not head.endswith(b"\n"):
        lines.pop()  # probably cut in the middle
    separators = sum(line.rstrip() == "---" for line in lines)
    body = [line for line in lines if line.rstrip() != "---"]
    if not body or not _YAML_KEY.match(body[0]):
        return False
    shaped = sum(bool(_YAML_KEY.match(line)) or line[:1] == " " or line.startswith("- ") for line in body)
    if not separators:
        # One document (`aws ... --output yaml`, `kubectl get events -o yaml`): a mapping whose
        # lists and mappings nest, a key alone at the margin opening one (lines of `Word: text`
        # are not enough).
        nested = sum(line[:1] == " " or line.startswith("- ") for line in body)
        if nested * 2 < len(body) or not any(_YAML_OPENS.match(line) for line in body):
            return False
    return shaped * 10 >= len(body) * 9


def _csv_preset(header: str, presets: tuple[Preset, ...]) -> Preset | None:
    """The export preset whose fields a CSV header names (Logs Insights: @timestamp,@message,...)."""
    if "," not in header or header.startswith(("{", "[")):
        return None
    try:
        names = next(csv.reader([header]))
    except csv.Error:
        return None
    row = {name.strip(): "" for name in names}
    # The preset that the header names most of the fields of (Logs Insights' @timestamp and
    # @message before Kibana's report of Elasticsearch documents, which has an @timestamp).
    matching = [preset for preset in presets if preset.csv and preset.matches(row)]
    return max(matching, key=lambda preset: len(set(preset.detect_all) | set(preset.detect_any)), default=None)


class _PresetGroups(NamedTuple):
    """The presets each step of sniffing tries, in order, with their line tests built."""

    line_envelopes: tuple[Preset, ...]
    text_envelopes: tuple[tuple[Preset, Callable[[list[str], int], bool]], ...]
    record_shapes: tuple[Preset, ...]
    grammars: tuple[tuple[Preset, Callable[[str], bool]], ...]
    # the heads of a sample's keys -> the line envelopes and record shapes that may match them
    fitting: dict[frozenset[str], tuple[tuple[Preset, ...], tuple[Preset, ...]]]

    def may_match(self, heads: set[str]) -> tuple[tuple[Preset, ...], tuple[Preset, ...]]:
        """The line envelopes and the record shapes whose records' keys may begin with `heads`
        (Preset.may_match), for each set of heads once: the files of an export of many small
        files share a few (20,000 files asked 17 presets each)."""
        key = frozenset(heads)
        found = self.fitting.get(key)
        if found is None:
            if len(self.fitting) >= 256:
                self.fitting.clear()
            found = self.fitting[key] = (tuple(p for p in self.line_envelopes if p.may_match(heads)),
                                         tuple(p for p in self.record_shapes if p.may_match(heads)))
        return found


_GROUPS: dict[int, tuple[Any, Any]] = {}  # presets.per_presets


def _groups(presets: tuple[Preset, ...]) -> _PresetGroups:
    """The presets grouped once per configuration (sniffing asked each preset what it is for every
    file: 20,000 small files took 1 s to sniff)."""
    return per_presets(_GROUPS, presets, lambda: _PresetGroups(
        tuple(p for p in presets if p.kind == "json" and p.is_envelope and p.lines),
        tuple((p, _envelope_judge(p, presets)) for p in presets if p.kind == "text" and p.is_envelope),
        tuple(p for p in presets if p.is_record_shape),
        tuple((p, _grammar_test(p)) for p in presets if p.is_grammar),
        {},
    ))


def _binary(sample: bytes) -> bool:
    """Whether the start of a file is binary data, not lines of text: NUL bytes on most of its
    lines. A run of NULs at its start (logrotate's copytruncate leaves the bytes the writer had
    written before the truncation as a hole) or a NUL in a record or two is text with NULs: those
    lines are rejected, not the file."""
    sample = sample.lstrip(b"\x00")
    if b"\x00" not in sample:
        return False
    lines = sample.split(b"\n")
    return sum(1 for line in lines if b"\x00" in line) * 2 > len(lines)


def _records_after(lines: list[str]) -> bool:
    """Whether the lines after the first are mostly JSON records each: a file of JSON lines whose
    first is bad (two records glued, NaN, a lone surrogate, a stray brace) or an array on a line
    of its own, not a document whose lines are parts of one value."""
    rest = lines[1:]
    if len(rest) < 2:
        return False
    records = 0
    for line in rest:
        if line.startswith("{"):
            try:
                records += isinstance(orjson.loads(line), dict)
            except orjson.JSONDecodeError:
                pass
    return records * 2 > len(rest)


def _known_text_lines(lines: list[str], presets: tuple[Preset, ...]) -> bool:
    """Whether most sampled lines are a text envelope's or a framework's, lines that begin with `[`
    as a JSON array does (`kubectl logs --prefix`'s `[pod/notifier-x/worker] ...`, Celery's
    `[2024-05-14 09:10:15,123: INFO/MainProcess] ...`): read a block at a time, not whole as a
    document first (a 72 MB `kubectl logs --prefix` export: 2.7 s and its size in memory)."""
    groups = _groups(presets)
    clean = [_without_ansi(line) for line in lines]
    return any(judge(clean, len(lines)) for _, judge in groups.text_envelopes) \
        or any(_majority(_passing(test, clean, len(lines)), len(lines)) for _, test in groups.grammars)


def sniff_format(head: bytes, allow_document: bool = True, presets: tuple[Preset, ...] = ()) -> FormatSniff:
    """Guess the format from the first block; per-line fallbacks handle mixed files."""
    if _binary(head[:8192]):
        return FormatSniff("binary", binary=True)
    stripped = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    lines = _sample_lines(head)
    if not lines:
        if not stripped:
            return FormatSniff("empty")
        # one line longer than the sample (a search response on one line): judged by its start
        lines = [head[:SAMPLE_BYTES].decode("utf-8", errors="replace").removeprefix("\ufeff").strip()]
    if allow_document and stripped.startswith(b"[") and not _records_after(lines) and not _known_text_lines(lines, presets):
        return FormatSniff("json-document", document=True)
    if allow_document and stripped.startswith(b"{"):
        try:
            first = orjson.loads(lines[0])
        except orjson.JSONDecodeError:
            first = None
        if first is None and not _records_after(lines):
            # A pretty-printed JSON document (or a broken first line: the reader falls back).
            return FormatSniff("json-document", document=True)
        found = find_document_preset(presets, first)  # once: unwrap_document would look again
        if len(lines) == 1 and _unwrapped(first, found)[1]:
            return FormatSniff("json-document", document=True)
        if found is not None:
            return FormatSniff(f"{found[0].label} (json documents, one a line)", document=True, line_documents=True)
    csv_preset = _csv_preset(lines[0], presets)
    if csv_preset is not None:
        return FormatSniff(f"{csv_preset.label} (csv)", csv_preset=csv_preset.name)
    if allow_document and (lines[0] == "---" or _YAML_KEY.match(lines[0])) and _yaml_documents(stripped):
        return FormatSniff("yaml documents", yaml=True)
    decoded = []
    for line in lines:
        if line.startswith("{"):
            try:
                decoded.append(orjson.loads(line))
            except orjson.JSONDecodeError:
                decoded.append(None)
    keys: set[str] = set()
    for record in decoded:
        if isinstance(record, dict):
            keys.update(record)
    heads = {key.split(".", 1)[0] for key in keys}  # what a preset's paths can be found under (Preset.may_match)
    groups = _groups(presets)
    line_envelopes, record_shapes = groups.may_match(heads)
    for preset in line_envelopes:
        if _majority_of(preset.matches, decoded, len(decoded)):
            return FormatSniff(preset.label, envelope=preset.name)
    clean = [_without_ansi(line) for line in lines]
    # A text envelope's line never begins as a JSON record does: with most sampled lines records,
    # none can hold a majority (a file of 10 NDJSON lines spent 6 of its 91 us trying them all).
    if _majority(sum(not line.startswith("{") for line in clean), len(lines)):
        for preset, judge in groups.text_envelopes:
            if judge(clean, len(lines)):
                return FormatSniff(preset.label, envelope=preset.name)
    for preset in record_shapes:
        if _majority_of(preset.matches, decoded, len(lines)):
            return FormatSniff(preset.label)
    grammar_hits = 0
    grammar_label = None
    grammar_total = len(lines)
    traced = None
    # A grammar claims no line that begins as a JSON object does (parse_block reads those as JSON):
    # they are misses for every grammar, without testing them (an NDJSON file's sniff spent 40 %
    # of its time trying each grammar on half its lines).
    unclaimed = [line for line in clean if not line.startswith("{")]
    for preset, test in groups.grammars if unclaimed else ():
        # A framework whose records go on over several lines (Celery's error and its traceback) is
        # judged on the other lines: a long traceback in the first block is no vote against it.
        total = len(lines)
        if preset.continuation:
            if traced is None:  # (no trace among JSON lines: most files of an export, not read again)
                traced = _trace_lines(head) if any(not line.startswith("{") for line in clean) else 0
            total -= traced
        # A preset that cannot match most lines is not counted out: only a majority is used below.
        hits = _passing(test, unclaimed, total)
        if hits > grammar_hits:
            grammar_hits, grammar_label, grammar_total = hits, preset.label, total
    votes = {"ndjson": len(decoded), "logfmt": 0, "text": 0}
    for line in clean:
        if line.startswith("{"):
            continue
        if parse_logfmt(line) is not None:
            votes["logfmt"] += 1
        elif parse_plain(line) is not None:
            votes["text"] += 1
    if grammar_label and _majority(grammar_hits, grammar_total):
        return FormatSniff(grammar_label)
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


def unwrap_document(document: Any, presets: tuple[Preset, ...] = ()) -> tuple[list, str, Preset | None]:
    """The records of a JSON document, the wrapper they sat in ('' for a bare array), and the
    export preset that recognised them (None: a generic wrapper), or the line envelope most of a
    generic wrapper's first records are (FireLens' records back to back, as Firehose writes them
    to S3 without a delimiter; Docker's records in an array)."""
    records, wrapper, preset = _unwrapped(document, find_document_preset(presets, document))
    if preset is None and presets:
        sample = [r for r in records[:SAMPLE_LINES] if isinstance(r, dict)]
        preset = next((p for p in _groups(presets).line_envelopes if _majority_of(p.matches, sample, len(sample))), None)
    return records, wrapper, preset


def _unwrapped(document: Any, found: tuple[Preset, list, str] | None) -> tuple[list, str, Preset | None]:
    """unwrap_document, given what find_document_preset found (no line envelope)."""
    if found is not None:
        return found[1], found[2], found[0]
    records, wrapper = _generic_records(document)
    return records, wrapper, None


def _generic_records(document: Any) -> tuple[list, str]:
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
