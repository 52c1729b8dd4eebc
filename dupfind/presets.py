"""Presets: data in rules/presets/*.toml that recognise an export or log shape and say how to read it."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

import orjson

from dupfind import json_exact, parse_memo
from dupfind.errors import DupfindError

T = TypeVar("T")

# A terminal's colour codes (Sidekiq's, RQ's text logs), and a line's carriage return before its
# newline (a log written or exported on Windows, `aws` or `gcloud` there: CRLF): what a line's text
# is read without.
ANSI_ESCAPE = r"\x1b\[[0-9;?]*[ -/]*[@-~]|\r$"
ENVELOPE_PREFIX = "envelope."  # raw columns holding envelope values (fallbacks for the inner record)
# Raw columns holding a text envelope's key="value" pairs (`pairs`: RFC 5424's structured data):
# the inner record's own fields where it lacks them (normalize.config_for_format).
PAIRS_PREFIX = ENVELOPE_PREFIX + "pairs."
FILE_PREFIX = "file."  # raw columns holding a value found once for the whole file (a worker's node name)
FILE_NAME_PREFIX = "filename."  # raw columns holding what the file's name says (the worker of a framework's log)
# What follows a text's first line (an envelope's text of several lines: a record and its traceback).
AFTER_FIRST_LINE = r"\r?\n[\s\S]*$"
EVERY_GRAMMAR = "*"  # `inner_lines`: the lines of every grammar preset
CONTEXT_PREFIX = "_context."  # raw columns of grammar lines whose value becomes the file's value
_KINDS = ("json", "text")


@dataclass(frozen=True)
class GrammarRule:
    """One kind of line a framework writes: a regex and the event name it stands for."""

    pattern: str
    event: str | None
    context: tuple[str, ...] = ()  # captured columns that hold for the whole file
    inherit: tuple[str, ...] = ()  # columns taken from the last line of the same thread that had them

    @property
    def regex(self) -> re.Pattern:
        """The compiled pattern (re keeps it: compiled once, where a file's lines use it)."""
        return re.compile(self.pattern)


@dataclass(frozen=True)
class Preset:
    """How to recognise one shape of log record or export, and where its parts are."""

    name: str
    title: str
    kind: str  # "json" or "text"
    origin: str
    detect_all: tuple[str, ...] = ()
    detect_any: tuple[str, ...] = ()
    detect_none: tuple[str, ...] = ()  # paths a record of this shape never has (another's it is then)
    detect_text: tuple[str, ...] = ()  # paths whose value must be a string (Docker's `log`, not ECS's object)
    detect_numbers: tuple[str, ...] = ()  # paths whose value must be a number (pino's numeric `level`)
    label: str = ""  # what `formats` calls a file of this shape (default: the name)
    records: tuple[str, ...] = ()  # JSON documents: paths to the records, `[]` marks a list
    lines: bool = True  # also one record a line (NDJSON); a document-only export sets false
    csv: bool = False  # also exported as a CSV table whose header names the fields
    record_pairs: tuple[str, str] | None = None  # a record that is a list of {field, value} pairs
    record_list: tuple[str, ...] = ()  # a record that is a list of values: their names in order (Loki's [time, line])
    inner: tuple[str, ...] = ()  # the record inside an envelope: an object or a line of text
    inner_json_only: bool = False  # only unwrap inner text that is a JSON object
    # A text envelope whose inner line is any text once the file is taken for one: sniffed as this
    # envelope when most sampled lines' inner is a JSON object or a line of these grammar presets
    # (a Celery worker's log from `kubectl logs --timestamps`), not for any line after a time.
    # `"*"`: every grammar preset (load_presets), those of rules_dir too.
    inner_lines: tuple[str, ...] = ()
    # The line regexes of those presets (load_presets): with `inner_json_only`, an inner text that
    # is one of their lines is unwrapped too (Celery's text log shipped by Filebeat in `message`).
    inner_line_patterns: tuple[str, ...] = ()
    # Where else such a line may be: an export that moved the line to a field of its own
    # (Datadog's `attributes.message`). A line found there is the record's text, before the inner
    # value and anything lifted.
    inner_lines_at: tuple[str, ...] = ()
    # Paths whose text value says the record was decoded already (it names its event or job): its
    # inner field is then its message, not a line to unwrap (see decoded_record).
    inner_unless: tuple[str, ...] = ()
    # A JSON envelope preset whose records a text envelope's inner JSON objects are (Fluentd's
    # out_file line `<time>\t<tag>\t<record>`, the record a container's line in `log`): those
    # are unwrapped by it too, this envelope's values kept where it has none.
    inner_envelope: str | None = None
    join_partial: str | None = None  # "missing_newline" or "GROUP=VALUE"
    one_source: bool = False  # an envelope file holds one process's lines (a container log), so
    # multi-line records (tracebacks) can be joined; an export interleaves many sources
    kv_lists: tuple[str, ...] = ()  # [{key, value: {stringValue: ...}}] lists turned into objects
    tag_lists: tuple[str, ...] = ()  # ["key:value", ...] lists turned into objects
    lift: tuple[str, ...] = ()  # objects whose keys become fields of the record
    ignore: tuple[str, ...] = ()  # a record's keys that are no field (Monolog's `channel`, its logger's
    # name), and lifted objects' keys as `<object>.<key>` (Monolog's `extra.uid`, a run's unique id)
    fields: dict[str, tuple[str, ...]] = field(default_factory=dict)  # column -> envelope paths (fallbacks)
    prefer: dict[str, tuple[str, ...]] = field(default_factory=dict)  # column -> record paths tried first
    values: dict[str, dict[str, str]] = field(default_factory=dict)  # column -> raw value -> value
    timezone: str | None = None  # the zone of the envelope's zone-less times
    line: str | None = None  # text: the regex of a record line (group `inner`: an envelope)
    rules: tuple[GrammarRule, ...] = ()  # text: refinements of a record line's message
    context_lines: tuple[GrammarRule, ...] = ()  # text: lines that only carry context (a banner)
    continuation: bool = False  # text: unparseable lines after a record belong to it (tracebacks)
    file_worker: str | None = None  # regex on the file name giving the worker when nothing else does
    rules_from: str | None = None  # another preset whose rules (and thread) read this one's records too
    thread: tuple[str, ...] = ()  # text: the columns that name one thread of work (for rules' `inherit`)
    # text envelope: a value made of several of the line's groups, joined by a space where they are
    # apart in the line (Papertrail's system and program, between them its IP, facility and severity)
    joined: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # text envelope: its time is optional (`kubectl logs --prefix` without --timestamps), so the time
    # a line of its own begins with reads as the envelope's: a grammar that knows the line whole
    # (Spring Boot's `2026-12-06T10:14:02.118Z  INFO 1 --- ...`) is given it with that time back
    time_optional: bool = False
    # text grammar: groups of the line that hold `key=value` pairs (Rust tracing's span and event
    # fields), each pair a field of the record where the line's groups do not name it already;
    # text envelope: the inner record's fields where it has none of its own (RFC 5424's structured
    # data: log4j2's MDC `[mdc@32473 jobId="..."]`); a JSON record shape: its text fields that hold
    # them (logstash-logback-encoder's `message`: a logger's `Started job order_id=ord_1`)
    pairs: tuple[str, ...] = ()
    # text grammar: fields a record's continuation lines state, column -> a regex whose group
    # `value` is the field's value (the Kafka client's `ConsumerConfig values:` record and its
    # `\tmax.poll.interval.ms = 300000` line)
    continuation_fields: dict[str, str] = field(default_factory=dict)
    # text envelope: a record of several lines (`aws logs filter-log-events --output text` prints
    # a message's line breaks as they are): a line matching `start` and not `end` goes on through
    # the first later line matching `end` (record_lines), then `line` reads it whole
    multiline_start: str | None = None
    multiline_end: str | None = None

    @property
    def is_envelope(self) -> bool:
        return bool(self.inner) or (self.line is not None and "(?P<inner>" in self.line)

    @property
    def is_grammar(self) -> bool:
        return self.kind == "text" and not self.is_envelope

    @property
    def is_record_shape(self) -> bool:
        """A JSON record layout (Laravel, Sidekiq JSON, pino...): no envelope, no document paths."""
        return self.kind == "json" and not self.inner and not self.records

    def matches(self, record: Any) -> bool:
        if not isinstance(record, dict):
            return False
        if self.detect_all and any(get_path(record, p) is None for p in self.detect_all):
            return False
        if any(get_path(record, p) is not None for p in self.detect_none):
            return False
        if any(not isinstance(get_path(record, p), str) for p in self.detect_text):
            return False
        if any(not _is_number(get_path(record, p)) for p in self.detect_numbers):
            return False
        return not self.detect_any or any(get_path(record, p) is not None for p in self.detect_any)

    def may_match(self, heads: set[str]) -> bool:
        """False when no record whose top-level keys begin with these `heads` (a key's text before
        its first dot) can match: a path is found only under a key that begins with its first
        segment (get_path). Sniffing tries every preset on every sampled record of every file."""
        required, alternatives = self._detect_heads
        return required <= heads and (not alternatives or not alternatives.isdisjoint(heads))

    @functools.cached_property
    def _detect_heads(self) -> tuple[frozenset[str], frozenset[str]]:
        """The first segments of the paths a record must have, and of those it needs one of."""
        def head(path: str) -> str:
            return path.split(".", 1)[0]

        required = frozenset(map(head, (*self.detect_all, *self.detect_text, *self.detect_numbers)))
        return required, frozenset(map(head, self.detect_any))

    @functools.cached_property
    def line_searches(self) -> tuple[Callable[[str], re.Match | None], ...]:
        """A grammar's record line's and context lines' searches with Python's `re`: whether a
        line may be one of its lines (sniffing; grammar._claiming)."""
        return (re.compile(self.line).search, *(rule.regex.search for rule in self.context_lines))  # type: ignore[arg-type]

    def key_paths(self) -> set[str]:
        """Every record path this preset reads (for the JSON reader's key selection)."""
        paths = set(self.detect_all) | set(self.detect_any) | set(self.detect_text) | set(self.detect_numbers)
        for group in (self.prefer, self.fields):
            for values in group.values():
                paths.update(values)
        paths.update(path.removesuffix("[]") for path in self.lift if self.is_record_shape)
        return paths


def _is_number(value: Any) -> bool:
    return (isinstance(value, (int, float)) and not isinstance(value, bool)) or (
        isinstance(value, str) and value.strip().lstrip("-").replace(".", "", 1).isdigit()
    )


def get_path(obj: Any, path: str) -> Any:
    """The value at a dotted path: a literal dotted key or nested objects (ECS uses both)."""
    if not isinstance(obj, dict):
        return None
    if path in obj:
        return obj[path]
    if "." not in path:
        return None
    parts = path.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        head = ".".join(parts[:cut])
        if head in obj:
            found = get_path(obj[head], ".".join(parts[cut:]))
            if found is not None:
                return found
    return None


def _strings(value: Any, where: str) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise DupfindError(f"{where} must be a string or a list of strings.")


def named_groups(regex: str) -> list[str]:
    """The names of a regular expression's named groups, in order, without compiling it."""
    return re.findall(r"\(\?P<(\w+)>", regex)


def checked_regex(pattern: Any, where: str) -> str:
    """The pattern, checked to be a regular expression (compiled where it is used); a one-line
    error naming `where` when it is not."""
    if not isinstance(pattern, str):
        raise DupfindError(f"{where} must be a regular expression (a string).")
    try:
        parse_memo.check_regex(pattern)
        return pattern
    except re.error as exc:
        raise DupfindError(f"{where} has an invalid regular expression {pattern!r}: {exc}.") from None


def _rules(items: Any, where: str) -> tuple[GrammarRule, ...]:
    if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
        raise DupfindError(f"{where} must be an array of tables ([[{where.rsplit('.', 1)[-1]}]]).")
    rules = []
    for index, item in enumerate(items):
        at = f"{where}[{index}]"
        pattern = checked_regex(item.get("match"), f"{at}.match")
        event = item.get("event")
        if event is not None and not isinstance(event, str):
            raise DupfindError(f"{at}.event must be a string.")
        context = _strings(item.get("context", []), f"{at}.context")
        inherit = _strings(item.get("inherit", []), f"{at}.inherit")
        rules.append(GrammarRule(pattern, event, context, inherit))
    return tuple(rules)


def _column_map(table: Any, where: str) -> dict[str, tuple[str, ...]]:
    if not isinstance(table, dict):
        raise DupfindError(f"{where} must be a table of column = [paths].")
    return {column: _strings(paths, f"{where}.{column}") for column, paths in table.items()}


def parse_preset(data: dict[str, Any], origin: str, columns: set[str]) -> Preset:
    """A preset from its TOML table; a bad one is a one-line error naming the file and key."""
    name = data.get("name")
    if not isinstance(name, str) or not re.fullmatch(r"[a-z0-9][a-z0-9-]*", name):
        raise DupfindError(f"{origin}: name must be lower-case letters, digits and dashes.")
    kind = data.get("kind", "json")
    if kind not in _KINDS:
        raise DupfindError(f"{origin}: kind must be one of {', '.join(_KINDS)}.")
    known = {
        "name", "title", "label", "kind", "detect", "records", "lines", "csv", "record_pairs", "record_list", "inner",
        "inner_json_only", "inner_lines", "inner_lines_at", "inner_unless", "inner_envelope", "join_partial", "one_source",
        "lists", "fields", "prefer", "values", "timezone", "line", "rules", "context_lines", "continuation",
        "file_worker", "thread", "joined", "pairs", "multiline", "ignore", "continuation_fields",
        "time_optional", "rules_from",
    }
    unknown = sorted(set(data) - known)
    if unknown:
        raise DupfindError(f"{origin}: unknown key {unknown[0]!r}.")
    detect = data.get("detect", {})
    lists = data.get("lists", {})
    fields = _column_map(data.get("fields", {}), f"{origin}: fields")
    prefer = _column_map(data.get("prefer", {}), f"{origin}: prefer")
    for column in (*fields, *prefer):
        if column not in columns:
            raise DupfindError(f"{origin}: {column!r} is not a canonical column.")
    values = data.get("values", {})
    if not isinstance(values, dict) or not all(isinstance(v, dict) for v in values.values()):
        raise DupfindError(f"{origin}: values must hold one table per column.")
    line = data.get("line")
    if line is not None:
        line = checked_regex(line, f"{origin}: line")
    file_worker = data.get("file_worker")
    if file_worker is not None:
        file_worker = checked_regex(file_worker, f"{origin}: file_worker")
    if not isinstance(data.get("joined", {}), dict):
        raise DupfindError(f"{origin}: joined must be a table of value names and the line's groups.")
    joined = {name: _strings(groups, f"{origin}: joined.{name}") for name, groups in data.get("joined", {}).items()}
    pair_groups = _strings(data.get("pairs", []), f"{origin}: pairs")
    grouped = [("joined", [g for named in joined.values() for g in named])] + ([("pairs", pair_groups)] if kind == "text" else [])
    for key, groups in grouped:
        missing = [g for g in groups if line is None or f"(?P<{g}>" not in line]
        if missing:
            raise DupfindError(f"{origin}: {key} names {missing[0]!r}, which is not a group of the line regex.")
    continued = data.get("continuation_fields", {})
    if not isinstance(continued, dict):
        raise DupfindError(f"{origin}: continuation_fields must be a table of column = regex.")
    for column, regex in continued.items():
        if column not in columns:
            raise DupfindError(f"{origin}: continuation_fields.{column} is not a canonical column.")
        if "(?P<value>" not in str(regex):
            raise DupfindError(f"{origin}: continuation_fields.{column} must hold a group named value.")
        checked_regex(regex, f"{origin}: continuation_fields.{column}")
    multiline = data.get("multiline", {})
    if not isinstance(multiline, dict) or (multiline and set(multiline) != {"start", "end"}):
        raise DupfindError(f"{origin}: multiline must be a table of two regexes, start and end.")
    multiline = {key: checked_regex(value, f"{origin}: multiline.{key}") for key, value in multiline.items()}
    pairs = data.get("record_pairs")
    if pairs is not None and not (isinstance(pairs, list) and len(pairs) == 2):
        raise DupfindError(f"{origin}: record_pairs must name the key field and the value field.")
    preset = Preset(
        name=name,
        title=str(data.get("title", name)),
        label=str(data.get("label", name)),
        kind=kind,
        origin=origin,
        detect_all=_strings(detect.get("all", []), f"{origin}: detect.all"),
        detect_any=_strings(detect.get("any", []), f"{origin}: detect.any"),
        detect_none=_strings(detect.get("none", []), f"{origin}: detect.none"),
        detect_text=_strings(detect.get("text", []), f"{origin}: detect.text"),
        detect_numbers=_strings(detect.get("numbers", []), f"{origin}: detect.numbers"),
        records=_strings(data.get("records", []), f"{origin}: records"),
        lines=bool(data.get("lines", not data.get("records"))),
        csv=bool(data.get("csv", False)),
        record_pairs=tuple(pairs) if pairs else None,  # type: ignore[arg-type]
        record_list=_strings(data.get("record_list", []), f"{origin}: record_list"),
        inner=_strings(data.get("inner", []), f"{origin}: inner"),
        inner_json_only=bool(data.get("inner_json_only", False)),
        inner_lines=_strings(data.get("inner_lines", []), f"{origin}: inner_lines"),
        inner_lines_at=_strings(data.get("inner_lines_at", []), f"{origin}: inner_lines_at"),
        inner_unless=_strings(data.get("inner_unless", []), f"{origin}: inner_unless"),
        inner_envelope=data.get("inner_envelope"),
        join_partial=data.get("join_partial"),
        one_source=bool(data.get("one_source", False)),
        kv_lists=_strings(lists.get("kv", []), f"{origin}: lists.kv"),
        tag_lists=_strings(lists.get("tags", []), f"{origin}: lists.tags"),
        lift=_strings(lists.get("lift", []), f"{origin}: lists.lift"),
        ignore=_strings(data.get("ignore", []), f"{origin}: ignore"),
        fields=fields,
        prefer=prefer,
        values={col: {str(k): str(v) for k, v in table.items()} for col, table in values.items()},
        timezone=data.get("timezone"),
        line=line,
        rules=_rules(data.get("rules", []), f"{origin}: rules"),
        context_lines=_rules(data.get("context_lines", []), f"{origin}: context_lines"),
        continuation=bool(data.get("continuation", False)),
        file_worker=file_worker,
        rules_from=data.get("rules_from"),
        thread=_strings(data.get("thread", []), f"{origin}: thread"),
        joined=joined,
        time_optional=bool(data.get("time_optional", False)),
        pairs=pair_groups,
        continuation_fields={str(c): str(r) for c, r in continued.items()},
        multiline_start=multiline.get("start"),
        multiline_end=multiline.get("end"),
    )
    if preset.inner_lines_at and not preset.inner_lines:
        raise DupfindError(f"{origin}: inner_lines_at needs inner_lines (the presets whose lines are there).")
    if kind == "text" and preset.line is None:
        raise DupfindError(f"{origin}: a text preset needs a line regex.")
    if kind == "json" and not (preset.detect_all or preset.detect_any or preset.detect_text):
        raise DupfindError(f"{origin}: a JSON preset needs detect.all or detect.any.")
    return preset


def load_presets(directories: list[Path], columns: set[str]) -> tuple[Preset, ...]:
    """Presets from each folder's presets/*.toml; a later folder's preset replaces one of the same name."""
    found: dict[str, Preset] = {}
    for directory in directories:
        folder = directory / "presets"
        if not folder.is_dir():
            continue
        for path in sorted(folder.glob("*.toml")):
            try:
                data = parse_memo.toml_text(path.read_text(encoding="utf-8"))
            except (parse_memo.TomlError, UnicodeDecodeError) as exc:
                raise DupfindError(f"preset file {path} is not valid TOML: {exc}.") from None
            preset = parse_preset(data, str(path), columns)
            found[preset.name] = preset
    for preset in list(found.values()):
        if preset.rules_from:
            shared = found.get(preset.rules_from)
            if shared is None or shared.rules_from or not shared.rules:
                raise DupfindError(f"{preset.origin}: rules_from must name a preset with rules of its own.")
            found[preset.name] = replace(preset, rules=preset.rules + shared.rules, thread=preset.thread or shared.thread)
    grammars = tuple(sorted(name for name, p in found.items() if p.is_grammar))
    for preset in list(found.values()):
        if EVERY_GRAMMAR in preset.inner_lines:
            preset = found[preset.name] = replace(preset, inner_lines=tuple(dict.fromkeys(
                name for entry in preset.inner_lines for name in (grammars if entry == EVERY_GRAMMAR else (entry,)))))
        for name in preset.inner_lines:
            if name not in found or not found[name].is_grammar:
                raise DupfindError(f"{preset.origin}: inner_lines names {name!r}, which is not a text preset of log lines.")
        nested = found.get(preset.inner_envelope) if preset.inner_envelope else None
        if preset.inner_envelope and (nested is None or nested.kind != "json" or not nested.inner or preset.kind != "text"):
            raise DupfindError(f"{preset.origin}: inner_envelope must name a JSON envelope preset (one with inner), in a text envelope.")
        if preset.inner_lines:
            found[preset.name] = replace(preset, inner_line_patterns=tuple(found[n].line for n in preset.inner_lines))
    # Most specific first: a shape that needs more keys wins over one that needs fewer.
    return tuple(sorted(found.values(), key=lambda p: (-len(p.key_paths()), p.name)))


# -- turning one JSON record of an export into (inner text, envelope values) -------------------
def _names_itself(value: Any) -> bool:
    """Whether a value at an `inner_unless` path names the record's event or job: a string or a
    number, not an object or array (ECS's `event` object) nor text that reads as one (as polars
    reads these paths as text: envelopes.decoded_record)."""
    if value is None or isinstance(value, (dict, list)):
        return False
    return not (isinstance(value, str) and value.startswith(("{", "[")))


def _framework_line(preset: Preset, inner: Any) -> bool:
    """Whether an inner text is a line of the preset's `inner_lines` (its first line: a text of
    several is a record and its traceback)."""
    if not isinstance(inner, str) or not preset.inner_line_patterns:
        return False
    first = re.sub(AFTER_FIRST_LINE, "", inner)
    return any(re.search(pattern, first) for pattern in preset.inner_line_patterns)


def _framework_text(preset: Preset, record: dict) -> str | None:
    """The record's first value at its `inner_lines_at` paths if it is a line of its
    `inner_lines` (envelopes.with_framework_lines, in polars)."""
    if not preset.inner_line_patterns:
        return None
    for path in preset.inner_lines_at:
        value = _any_value(get_path(record, path))
        if value is not None:
            return value if _framework_line(preset, value) else None
    return None


def text_of_bytes(value: Any) -> str | None:
    """A field written as the array of its bytes (`journalctl -o json` writes so a field that holds
    a control character, a terminal colour, or bytes that are not UTF-8) as its text, bytes that
    are not UTF-8 replaced; None for any other value."""
    if isinstance(value, list) and value and all(isinstance(b, int) and 0 <= b < 256 for b in value):
        return bytes(value).decode("utf-8", "replace")
    return None


def _any_value(value: Any) -> Any:
    """An OpenTelemetry AnyValue ({"stringValue": "x"}, {"intValue": "3"}, ...) as a plain value."""
    if isinstance(value, dict) and len(value) == 1:
        (key, inner), = value.items()
        if key == "kvlistValue" and isinstance(inner, dict):
            return _kv_object(inner.get("values", []))
        if key == "arrayValue" and isinstance(inner, dict):
            return [_any_value(v) for v in inner.get("values", [])]
        if key.endswith("Value"):
            return inner
    return value


def _kv_object(items: Any) -> Any:
    if not isinstance(items, list):
        return items
    out = {}
    for item in items:
        if isinstance(item, dict) and isinstance(item.get("key"), str):
            out[item["key"]] = _any_value(item.get("value"))
    return out


def _tag_object(items: Any) -> Any:
    if not isinstance(items, list):
        return items
    out: dict[str, str] = {}
    for item in items:
        if isinstance(item, str):
            key, sep, value = item.partition(":")
            if sep and key not in out:
                out[key] = value
    return out


def _set_path(record: dict, path: str, value: Any) -> None:
    """Replace the value at a path found by get_path (literal dotted keys or nested objects)."""
    if path in record:
        record[path] = value
        return
    parts = path.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        head = ".".join(parts[:cut])
        child = record.get(head)
        if isinstance(child, dict):
            child = dict(child)
            record[head] = child
            _set_path(child, ".".join(parts[cut:]), value)
            return


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value) if isinstance(value, float) else str(value)
    return json_exact.dumps(value).decode()


_NAIVE_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?$")


def envelope_time(preset: Preset, value: str | None) -> str | None:
    """The envelope's time text; a zone-less time gets the preset's zone (Logs Insights writes UTC)."""
    if value is not None and preset.timezone == "UTC" and _NAIVE_TIME.match(value.strip()):
        return value.strip() + "Z"
    return value


@dataclass
class Unwrapped:
    """One export record taken apart: the text to parse as a line, and the envelope's values."""

    text: str
    fallback_ts: str | None
    envelope: dict[str, str]  # envelope.<path> -> value


def unwrap_record(preset: Preset, record: Any) -> Unwrapped | None:
    """Apply a preset to one record of a JSON document (Python: documents are read whole anyway)."""
    if preset.record_pairs and isinstance(record, list):
        key, value = preset.record_pairs
        record = {p.get(key): p.get(value) for p in record if isinstance(p, dict) and isinstance(p.get(key), str)}
    if not isinstance(record, dict):
        return None
    record = dict(record)
    for path in preset.kv_lists:
        found = get_path(record, path)
        if isinstance(found, list):
            _set_path(record, path, _kv_object(found))
    for path in preset.tag_lists:
        found = get_path(record, path)
        if isinstance(found, list):
            _set_path(record, path, _tag_object(found))
    inner: Any = None
    for path in preset.inner:
        inner = _any_value(get_path(record, path))
        if inner is not None:
            break
    if isinstance(inner, list):
        inner = text_of_bytes(inner) or inner
    is_json_text = isinstance(inner, str) and inner.lstrip().startswith("{")
    if preset.inner_json_only and not (isinstance(inner, dict) or is_json_text or _framework_line(preset, inner)):
        inner = None
    inner = _framework_text(preset, record) or inner
    if inner is not None and any(_names_itself(get_path(record, path)) for path in preset.inner_unless):
        inner = None  # a decoded record: its message is its message (envelopes.decoded_record)
    lifted: dict = {}
    # a framework's line is parsed as its own (OTLP's body), not a message among lifted fields
    for path in preset.lift if preset.lift and not _framework_line(preset, inner) else ():
        found = get_path(record, path)
        if isinstance(found, dict):
            lifted.update(found)
    if lifted:
        body = inner
        if isinstance(body, str):
            try:
                body = json_exact.loads(body)
            except orjson.JSONDecodeError:
                body = {"message": body}
        if isinstance(body, dict):
            lifted.update(body)
        text = json_exact.dumps(lifted).decode()
    elif isinstance(inner, str):
        text = inner
    elif inner is not None:
        text = json_exact.dumps(inner).decode()
    else:
        text = json_exact.dumps(record).decode()
    envelope: dict[str, str] = {}
    fallback_ts = None
    for column, paths in preset.fields.items():
        for path in paths:
            value = _text(get_path(record, path))
            if value is None or value == "":
                continue
            if column == "ts":
                if value.strip("0") == "":
                    continue  # OTLP writes 0 for "time unknown": the observed time follows
                fallback_ts = fallback_ts or envelope_time(preset, value)
            else:
                envelope[ENVELOPE_PREFIX + path] = value
    return Unwrapped(text, fallback_ts, envelope)


def _named_values(preset: Preset, record: Any) -> Any:
    """A record that is a list of values (Loki's `[time, line]`) as an object of the preset's
    `record_list` names (values beyond them left out); any other record as it is. Done where a
    document's records are found (document_records), before their ancestors' keys join them."""
    if preset.record_list and isinstance(record, list) and len(record) >= len(preset.record_list):
        return dict(zip(preset.record_list, record))
    return record


def _walk(node: Any, segments: tuple[str, ...], context: dict) -> list[tuple[Any, dict]] | None:
    """Follow `a[].b[].c` through a document; ancestors' other keys travel with each record."""
    head, rest = segments[0], segments[1:]
    target = get_path(node, head) if head else node
    if not rest:
        return [(target, context)] if target is not None else None
    if not isinstance(target, list):
        return None
    out: list[tuple[Any, dict]] = []
    next_key = rest[0].split(".")[0] if rest[0] else ""
    for element in target:
        if len(rest) > 1 and isinstance(element, dict):
            inherited = {**context, **{k: v for k, v in element.items() if k != next_key}}
            found = _walk(element, rest, inherited)
        else:
            found = _walk(element, rest, context) if rest[0] else [(element, context)]
        # an element without the rest of the path (a message whose logEvents is not a list, a hit
        # without _source) holds no record: None in its place, counted as not a record
        out.extend(found if found is not None else [(None, context)])
    return out


@functools.cache
def _segments(path: str) -> tuple[str, ...]:
    """A record path's segments between its `[]` (every file's sniff walks each preset's paths)."""
    return tuple(s.lstrip(".") for s in path.split("[]"))


def document_records(preset: Preset, document: Any, known: bool = False) -> tuple[list, str] | None:
    """The records of a document in this preset's shape, and the path they were found at.
    `known`: the preset recognised earlier documents of the file, so a path that leads to no
    record (CloudWatch Logs' control messages) is this document's records, none."""
    empty = None
    for path in preset.records:
        # one document of a list of them (`[].logEvents[]`): a file or a line holding only one
        within = [document] if isinstance(document, dict) and path.startswith("[].") else document
        found = _walk(within, _segments(path), {})
        if not found:
            empty = ([], path) if known and found is not None and empty is None else empty
            continue
        named = ((_named_values(preset, rec), ctx) for rec, ctx in found)
        records = [{**ctx, **rec} if ctx and isinstance(rec, dict) else rec for rec, ctx in named]
        sample = next((r for r in records if isinstance(r, (dict, list))), None)
        if preset.record_pairs and isinstance(sample, list):
            key, value = preset.record_pairs
            sample = {p.get(key): p.get(value) for p in sample if isinstance(p, dict) and isinstance(p.get(key), str)}
        if known or (sample is not None and preset.matches(sample)):
            return records, path
    return empty


@functools.cache
def _object_keys(records: tuple[str, ...]) -> frozenset[str]:
    """The keys one of which a JSON object must hold for one of these record paths to lead to
    anything in it (`hits.hits[]._source`: `hits` or `hits.hits`; `[].logEvents[]`: `logEvents`;
    `[]`, a list at the root: none)."""
    keys: set[str] = set()
    for path in records:
        segments = _segments(path)
        first = segments[1] if path.startswith("[].") else segments[0]
        parts = first.split(".") if first else []
        keys.update(".".join(parts[:k]) for k in range(1, len(parts) + 1))
    return frozenset(keys)


def per_presets(memo: dict[int, tuple[Any, Any]], presets: tuple[Preset, ...], build: Callable[[], T]) -> T:
    """What `build()` makes of a configuration's presets, made once per presets tuple (kept by its
    identity, with the tuple itself: a Preset holds dicts, so the tuple cannot be a key; 16 kept)."""
    found = memo.get(id(presets))
    if found is not None and found[0] is presets:
        return found[1]
    made = build()
    if len(memo) >= 16:
        memo.clear()
    memo[id(presets)] = (presets, made)
    return made


_DOCUMENT_KEYS: dict[int, tuple[Any, Any]] = {}  # per_presets: every key a preset's record paths start with


def _document_keys(presets: tuple[Preset, ...]) -> frozenset[str]:
    """The keys one of which an object must hold for some preset's record paths to lead into it."""
    return per_presets(_DOCUMENT_KEYS, presets,
                       lambda: frozenset().union(*(_object_keys(p.records) for p in presets if p.records)))


def find_document_preset(presets: tuple[Preset, ...], document: Any) -> tuple[Preset, list, str] | None:
    """The first preset whose record paths lead to records it recognises. (Every JSON file's first
    line is asked: an object without any key a preset's paths start with is not walked by it,
    which was half of the sniff of each of 20,000 small NDJSON files; an object with none of
    any preset's such keys, as a worker's line, asks none of them.)"""
    keys = document.keys() if isinstance(document, dict) else None
    if keys is not None and _document_keys(presets).isdisjoint(keys):
        return None
    for preset in presets:
        if preset.records:
            if keys is not None and _object_keys(preset.records).isdisjoint(keys):
                continue
            found = document_records(preset, document)
            if found is not None:
                return preset, found[0], found[1]
    return None
