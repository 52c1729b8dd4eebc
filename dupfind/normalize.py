"""Map raw parsed records (columns named by raw field path) onto the canonical event table."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from datetime import UTC, datetime

import polars as pl

from dupfind.config import EVENT_NAME_SEPARATORS, Config
from dupfind.crashes import CRASH_OFFSET, CRASH_TEXT, crash_records
from dupfind.lineparse import LEVEL_FIELD, PLAIN_NAME
from dupfind.presets import ENVELOPE_PREFIX, FILE_NAME_PREFIX, FILE_PREFIX, PAIRS_PREFIX, named_groups
from dupfind.record_ids import coordinates_id
from dupfind.schema import FLOAT_COLUMNS, INT_COLUMNS, STATED_TIMEOUTS, canonical_schema
from dupfind.stack_lines import QUIET_LEVELS, exception_of
from dupfind.timeparse import parse_timestamps

# Internal columns a parser may add beside the raw field paths.
LINE = "_line"
SOURCE = "_source"
TEXT = "_text"
FILE_SHIFT = 32  # a batch's line number: the file's index << FILE_SHIFT | its line (see ingest)
LEADING_TS = "_leading_ts"
FALLBACK_TS = "_fallback_ts"
QUARTER_HOUR_US = 15 * 60 * 1_000_000  # zones are whole quarter hours from UTC (India +05:30, Nepal +05:45)
ZONE_SLACK_US = 5 * 60 * 1_000_000  # how far a record's envelope may be from its zone's offset
ENVELOPE_TIME = "(envelope time)"  # what `formats` shows when records took their time from the envelope
PLAIN_MESSAGE = "_plain_message"
NUMBER = r"^-?\d+(?:\.\d+)?$"  # a status code or count: no event's name
KIND_NAME = "__kind_name"  # the text a record's kind is named by, where it is not its `name` (_classify)
LEADING_LEVEL = LEVEL_FIELD  # a text line's level word after its leading time (lineparse)
LEVEL_WORD = "(word after the time)"  # what `formats` shows when records took their level from it
# The exception a stack trace after the record reports (stack_lines.exception_of): `stack_trace`.
TRACE_ERROR = "_trace_error"
STACK_TRACE = "(lines after the record)"  # what `formats` shows as the raw field of `stack_trace`
ERROR_TRACEBACK = "(error's traceback)"  # ... when it comes from a traceback in the record's error

# Columns that keep structured (JSON object/array) values as text; all others drop them.
STRUCTURED_OK = {"message", "error", "result"}
KILL_EXIT_CODES = (137, -9)
# The times a log record can have been written at: a value outside is a sentinel (Go's zero time,
# .NET's DateTimeOffset.MinValue with its offset, 9999-12-31) or garbage, a bad timestamp, and some
# of them (year 0 once in UTC) are beyond what Python's datetime holds.
EARLIEST_TIME = datetime(1900, 1, 1, tzinfo=UTC)
LATEST_TIME = datetime(2200, 1, 1, tzinfo=UTC)


@dataclass
class Normalized:
    """A block of canonical rows, the lines rejected on the way, and which fields fed what."""

    table: pl.DataFrame
    rejects: pl.DataFrame  # columns: source, line, reason, text
    fields: dict[str, dict[str, list[str]]]  # source -> canonical column -> raw field paths used


def path_expr(path: str, available: set[str], objects: set[str] | None = None) -> pl.Expr | None:
    """The value at a raw field path: a literal (dotted) key, or nested inside a parent.

    `objects`, when given, names the columns that hold a JSON object somewhere; a path is only
    looked up inside those (the others would give null on every row anyway).
    """
    options: list[pl.Expr] = []
    if path in available:
        options.append(pl.col(path))
    parts = path.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        parent = ".".join(parts[:cut])
        if parent in available and (objects is None or parent in objects):
            json_path = "$" + "".join(f"['{p}']" for p in parts[cut:])
            col = pl.col(parent)
            options.append(
                pl.when(col.str.starts_with("{")).then(col.str.json_path_match(json_path))
            )
    if not options:
        return None
    return options[0] if len(options) == 1 else pl.coalesce(options)


_FORMAT_CONFIGS: dict[tuple[int, str], tuple[str, Config]] = {}  # (id, format) -> (its digest, derived)


def config_for_format(config: Config, fmt: str) -> Config:
    """The aliases in force for one format: a preset's own paths first, its envelope's values last.

    `fmt` names the layers a record came through (`cri+celery`, `gcp-logging+ndjson`); each layer
    that is a preset adds what it knows about where the canonical columns are.
    """
    key = (id(config), fmt)
    digest = config.digest()
    cached = _FORMAT_CONFIGS.get(key)
    if cached is not None and cached[0] == digest:  # the same configuration, not one at its old address
        return cached[1]
    by_name = {p.name: p for p in config.presets}
    layers = [by_name[part] for part in fmt.split("+") if part in by_name]
    aliases = {column: list(paths) for column, paths in config.aliases.items()}
    if any(p.pairs and p.is_envelope for p in layers):
        # An envelope's key="value" pairs (syslog's structured data) right after the record's own fields.
        aliases = {column: [*paths, *(PAIRS_PREFIX + p for p in paths)] for column, paths in aliases.items()}
    values: dict[str, dict[str, str]] = {c: dict(m) for c, m in config.value_maps.items()}
    context_columns = {"worker_id"} | {c for p in config.presets for r in p.rules + p.context_lines for c in r.context}
    # A framework's own word for the whole file (its node name) comes before the envelope's host.
    for column in context_columns:
        aliases[column] = [*aliases.get(column, []), FILE_PREFIX + column]
    for preset in layers:
        for column, paths in preset.prefer.items():
            aliases[column] = [*paths, *(a for a in aliases.get(column, []) if a not in paths)]
        for column, paths in preset.fields.items():
            if column != "ts":
                aliases[column] = [*aliases.get(column, []), *(ENVELOPE_PREFIX + p for p in paths)]
        for column, mapping in preset.values.items():
            values.setdefault(column, {}).update(mapping)
    # A file's name comes last: an envelope's stream, pod or dyno tells apart the processes of one export.
    aliases["worker_id"] = [*aliases.get("worker_id", []), FILE_NAME_PREFIX + "worker_id"]
    derived = replace(config, aliases=aliases, value_maps=values)
    _FORMAT_CONFIGS[key] = (digest, derived)
    return derived


def _materialize_paths(raw: pl.DataFrame, config: Config, available: set[str], objects: set[str]) -> pl.DataFrame:
    """Each alias path's value, computed once (a nested path parses its parent's JSON once).

    Values are stripped; empty strings become null. Structured values (JSON objects or arrays)
    are kept here and dropped later for columns that want scalars.
    """
    exprs: dict[str, pl.Expr] = {}
    for paths in config.aliases.values():
        for path in paths:
            if path in exprs:
                continue
            expr = path_expr(path, available, objects)
            if expr is not None:
                exprs[path] = expr.cast(pl.String).alias(path)
    if not exprs:
        return pl.DataFrame({"_rows": pl.Series([None] * raw.height, dtype=pl.String)})
    values = raw.select(list(exprs.values()))
    # Only the columns with a padded or empty value are stripped: a stripped copy of every column
    # held 20 MiB more for a 48k-row batch (the values as read share the parsed block's buffers),
    # and finding them (a regex a column) takes the time stripping all took.
    # Stripped shorter: padded (a regex `^\s|\s$` took twice the time over 48k rows).
    flags = values.select(
        ((pl.col(c).str.strip_chars().str.len_bytes() != pl.col(c).str.len_bytes()) | (pl.col(c) == "")).any().alias(str(i))
        for i, c in enumerate(values.columns)
    ).row(0)
    fixed = [pl.col(c).str.strip_chars().replace("", None) for c, flag in zip(values.columns, flags) if flag]
    return values.with_columns(fixed) if fixed else values


# A JSON object's or array's text (a field read as text holds its JSON): `{...}`, `[...]` whose
# first element begins as a value does; not a message that begins with a bracketed context
# (`[Consumer clientId=consumer-1, groupId=notifier] consumer poll timeout has expired`, Rails'
# `[ActiveJob] [SendJob] Performing ...`).
_STRUCTURED_TEXT = r'(?s)^(?:\{.*\}|\[\s*(?:[\[{"\-0-9tfn].*)?\])$'


def _begins_structured(expr: pl.Expr) -> pl.Expr:
    return expr.str.starts_with("{") | expr.str.starts_with("[")


def _is_structured(expr: pl.Expr) -> pl.Expr:
    return _begins_structured(expr) & expr.str.contains(_STRUCTURED_TEXT)


def _resolve_column(
    values: pl.DataFrame, column: str, paths: list[str], structured: set[str], statuses: frozenset[str] = frozenset(),
) -> tuple[pl.Expr, list[str]]:
    """The first non-empty alias value of a canonical column, and the aliases it can come from.
    `structured`: the paths with a JSON object or array on some row; `statuses`: the status
    column's aliases, whose numbers name no event."""
    usable = [p for p in paths if p in values.columns]
    if not usable:
        return pl.lit(None, dtype=pl.String), []
    exprs = []
    for path in usable:
        expr = pl.col(path)
        if column not in STRUCTURED_OK and path in structured:
            expr = pl.when(_is_structured(expr)).then(None).otherwise(expr)
        if column == "name" and path in statuses and len(usable) > 1:
            # A number names no event: `status=200` beside tracing's or zap's message (its name).
            expr = pl.when(expr.str.contains(NUMBER)).then(None).otherwise(expr)
        exprs.append(expr)
    return (exprs[0] if len(exprs) == 1 else pl.coalesce(exprs)), usable


def _merged(labelled_patterns: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The patterns with each run of one label as one alternation: the same first match, in a
    third of the passes over the text (the vocabulary lists 60 patterns of 20 kinds)."""
    merged: list[tuple[str, list[str]]] = []
    for label, regex in labelled_patterns:
        if merged and merged[-1][0] == label:
            merged[-1][1].append(regex)
        else:
            merged.append((label, [regex]))
    return [(label, regexes[0] if len(regexes) == 1 else "|".join(f"(?:{r})" for r in regexes)) for label, regexes in merged]


def _first_match(text: pl.Expr, labelled_patterns: list[tuple[str, str]]) -> pl.Expr:
    """The label of the first regex that matches `text`, in order; null when none does."""
    chain = None
    for label, regex in _merged(labelled_patterns):
        cond = text.str.contains(regex)
        chain = pl.when(cond).then(pl.lit(label)) if chain is None else chain.when(cond).then(pl.lit(label))
    return chain.otherwise(None) if chain is not None else pl.lit(None, dtype=pl.String)


# A name's `key=value` fields after its words (a line of text whose fields follow its event:
# Spring's `job_started job_id=j-2`, structlog's console `job_started    job_id=j-1`, with its
# logger's name before them when it adds it: `job_started  [notifier.worker] job_id=j-1`; a value
# quoted, or a dict or list as Python prints it: `meta={'a': 'b c'}`).
_TRAILING_PAIRS = r'(?:\s+\[[\w.:\-]+\])?(?:\s+[A-Za-z_][\w.\-]*=(?:"[^"]*"|\'[^\']*\'|\{[^{}]*\}|\[[^\[\]]*\]|\S*))+\s*$'


def _folded(name: pl.Expr) -> pl.Expr:
    return name.str.to_lowercase().str.replace_all(EVENT_NAME_SEPARATORS, "_").str.strip_chars("_")


def _kind_expr(config: Config) -> pl.Expr:
    """The kind of each row's name (and exit code, status): an exact name, else the words before
    its trailing `key=value` fields as an exact name, else the first pattern that matches."""
    folded = _folded(pl.col("name"))
    bare = pl.col("name").str.replace(_TRAILING_PAIRS, "")
    exact = pl.coalesce(
        folded.replace_strict(config.kinds, default=None, return_dtype=pl.String),
        _folded(bare).replace_strict(config.kinds, default=None, return_dtype=pl.String),
    )
    kind = pl.coalesce(exact, _first_match(pl.col("name").str.to_lowercase(), config.patterns))
    if config.status_kinds:
        pairs = {f"{name}\x1f{status}": k for name, by in config.status_kinds.items() for status, k in by.items()}
        named = pl.concat_str([folded, pl.col("status").str.to_lowercase()], separator="\x1f")
        kind = pl.coalesce(named.replace_strict(pairs, default=None, return_dtype=pl.String), kind)
    killed_by_code = pl.col("exit_code").is_in(KILL_EXIT_CODES) & (
        kind.is_null() | kind.is_in(["worker_exit", "other", "fail"])
    )
    return pl.when(killed_by_code).then(pl.lit("worker_killed")).otherwise(kind).fill_null("other")


_SEPARATED = r"[\s.\-/:_]"  # what a name's separators and underscores may be before folding


def _could_name_a_kind(config: Config) -> str:
    """One regex that matches (lower-cased) every name the vocabulary could give a kind to: any of
    its patterns, or an exact name with any separators (a superset: the exact lookup decides)."""
    cached = config.__dict__.get("_could_name")
    vocabulary = (tuple(config.kinds), tuple(config.patterns))
    if cached is not None and cached[0] == vocabulary:
        return cached[1]
    exact = "|".join(sorted(
        f"{_SEPARATED}+".join(re.escape(part) for part in name.split("_") if part) for name in config.kinds if name.strip("_")
    ))
    parts = [f"(?:{regex})" for _, regex in config.patterns]
    if exact:
        parts.append(f"^{_SEPARATED}*(?:{exact})(?:{_SEPARATED}*$|{_TRAILING_PAIRS})")
    combined = "|".join(parts) or "$^"
    config.__dict__["_could_name"] = (vocabulary, combined)
    return combined


def _with_kinds(frame: pl.DataFrame, config: Config) -> pl.DataFrame:
    """`frame` (distinct names, exit codes, statuses) with its kinds. Only the rows whose name the
    vocabulary could name (one regex of its patterns and exact names), or that carry an exit code
    or a status, are classified; the others are `other` at once. Classifying every row evaluates
    60 patterns and the folding on each: 11 of the 18 s of 500k lines of prose with ids in them
    (most name nothing)."""
    if frame.height < 64:
        return frame.with_columns(kind=_kind_expr(config))
    named = pl.col("name").str.to_lowercase().str.contains(_could_name_a_kind(config)).fill_null(False)
    others = [c for c in ("exit_code", "status") if c in frame.columns]  # an exit code or a status decides too
    needed = frame.select(pl.any_horizontal(named, *(pl.col(c).is_not_null() for c in others))).to_series()
    if needed.all():
        return frame.with_columns(kind=_kind_expr(config))
    return _in_parts(frame, needed, kind=(_kind_expr(config), pl.lit("other")))


def _in_parts(frame: pl.DataFrame, rows: pl.Series, **columns: tuple[pl.Expr, pl.Expr]) -> pl.DataFrame:
    """`frame` with each column computed by its first expression on `rows` and its second on the
    others, in the frame's order: an expression costly on every row is evaluated on its rows alone."""
    numbered = frame.with_row_index("__order")
    return pl.concat([
        numbered.filter(rows).with_columns(**{name: pair[0] for name, pair in columns.items()}),
        numbered.filter(~rows).with_columns(**{name: pair[1] for name, pair in columns.items()}),
    ]).sort("__order").drop("__order")


def _action_expr(config: Config) -> pl.Expr:
    effect = pl.col("kind").is_in(["side_effect", "side_effect_result"])
    text = pl.concat_str(
        [pl.col("name").fill_null(""), pl.col("provider").fill_null("")], separator=" "
    ).str.to_lowercase()
    return pl.coalesce(
        pl.col("action").str.to_lowercase(),
        pl.when(effect).then(pl.coalesce(_first_match(text, config.action_patterns), pl.lit("side_effect"))),
    )


# Distinct (name, exit code, action, provider) a configuration remembers the kind and side-effect
# type of: evaluating the vocabulary's regexes costs about 13 ms a block even on a few dozen keys.
CLASSIFIED_MAX = 100_000


def _classified(config: Config) -> dict[tuple, tuple[str, str | None]]:
    """What `config` remembers of classified keys, forgotten if its vocabulary changed since."""
    vocabulary = (tuple(config.kinds.items()), tuple(config.patterns), tuple(config.action_patterns),
                  tuple((name, tuple(by.items())) for name, by in config.status_kinds.items()))
    remembered = config.__dict__.get("_classified")
    if remembered is None or remembered[0] != vocabulary:
        remembered = config.__dict__["_classified"] = (vocabulary, {})
    return remembered[1]


def _kinds_and_actions(fresh: pl.DataFrame, config: Config) -> pl.DataFrame:
    """Distinct keys with their kind and (`__action`) side-effect type."""
    fresh = _with_kinds(fresh, config)
    own = pl.col("action").str.to_lowercase()
    effect = fresh["kind"].is_in(["side_effect", "side_effect_result"])
    if not effect.any():
        return fresh.with_columns(__action=own)
    return _in_parts(fresh, effect, __action=(_action_expr(config), own))  # the side-effect type of side effects alone


# Distinct keys in a block beyond which they are classified in polars without being remembered: a
# Python tuple a key cost 2 s at 500k lines of prose, each line's name its own.
REMEMBERED_BLOCK_KEYS = 4096


def _library_lines(frame: pl.DataFrame, config: Config) -> pl.DataFrame:
    """A library's own lines inside any log (vocabulary.library_lines: APScheduler's `Running job
    "<name> (trigger: ...)" (scheduled at ...)`, in whatever format the application logs): the
    first rule whose text the message (else the name) contains and whose regex matches names the
    record's event and fills the columns of its groups that the record leaves empty. One literal
    search a rule over a block that has none of them."""
    if not config.library_lines:
        return frame
    text = pl.coalesce("message", "name")
    for contains, regex, event in config.library_lines:
        if not frame.select(text.str.contains(contains, literal=True).any()).item():
            continue
        if "__claimed" not in frame.columns:
            frame = frame.with_columns(__claimed=pl.lit(False))
        hit = ~pl.col("__claimed") & (text.str.contains(contains, literal=True) & text.str.contains(regex)).fill_null(False)
        frame = frame.with_columns(__hit=hit)
        extracted = text.str.extract_groups(regex)
        updates = {
            name: pl.when(pl.col("__hit")).then(pl.coalesce(name, extracted.struct.field(name))).otherwise(pl.col(name))
            for name in named_groups(regex)
        }
        for column in ("name", KIND_NAME):
            if column in frame.columns:
                updates[column] = pl.when(pl.col("__hit")).then(pl.lit(event)).otherwise(pl.col(column))
        frame = frame.with_columns(**updates).with_columns(__claimed=pl.col("__claimed") | pl.col("__hit")).drop("__hit")
    return frame.drop("__claimed", strict=False)


def _classify(frame: pl.DataFrame, config: Config) -> pl.DataFrame:
    """Kind and side-effect type, computed once per distinct (name, exit code, action, provider, and
    status where the vocabulary names kinds by status): once per block for a key the blocks
    before did not have, looked up after that (a block of many keys: each block's own)."""
    keys = ["name", "exit_code", "action", "provider", *(["status"] if config.status_kinds else [])]
    # A free-text line's text names its kind, not the record: the keys' `name` is that text.
    named = pl.col(KIND_NAME).alias("name") if KIND_NAME in frame.columns else pl.col("name")
    key_frame = frame.select(named, *keys[1:])
    distinct = key_frame.unique()
    if distinct.height > REMEMBERED_BLOCK_KEYS:
        distinct = _kinds_and_actions(distinct, config)
    else:
        known = _classified(config)
        rows = distinct.rows()
        new = [row for row in rows if row not in known]
        found: dict = {}
        if new:
            fresh = _kinds_and_actions(pl.DataFrame(new, schema=distinct.schema, orient="row"), config)
            found = dict(zip(new, fresh.select("kind", "__action").rows()))
            if len(known) < CLASSIFIED_MAX:
                known.update(found)
        results = [found.get(row) or known[row] for row in rows]
        distinct = distinct.with_columns(
            kind=pl.Series([r[0] for r in results], dtype=pl.String),
            __action=pl.Series([r[1] for r in results], dtype=pl.String),
        )
    # Join only the key columns, then attach the two results: joining the whole frame would copy it.
    looked_up = key_frame.join(
        distinct.select(*keys, "kind", "__action"), on=keys, how="left", nulls_equal=True, maintain_order="left"
    )
    return frame.with_columns(kind=looked_up["kind"], action=looked_up["__action"]).drop(KIND_NAME, strict=False)


def _with_stack_trace(frame: pl.DataFrame, fields: dict[str, dict[str, list[str]]]) -> pl.DataFrame:
    """`stack_trace`: the exception the stack trace after a record reports (`__trace_error`), for a
    record whose level does not say it reports no error (a crash printed after an INFO record,
    another thread's traceback after a JSON line). Beside the record's own `error`, which it may
    only name (`error=OperationalError`), not in its place: the effects read `error`."""
    level = pl.col("level").cast(pl.String).str.strip_chars().str.to_lowercase() if "level" in frame.columns else pl.lit(None, dtype=pl.String)
    taken = pl.col("__trace_error").is_not_null() & ~level.is_in(list(QUIET_LEVELS)).fill_null(False)
    frame = frame.with_columns(stack_trace=pl.when(taken).then(pl.col("__trace_error")), __taken=taken)
    _add_field_source(fields, frame.filter("__taken").rename({"__source": SOURCE}), "stack_trace", STACK_TRACE)
    return frame.drop("__trace_error", "__taken")


def _error_traceback(frame: pl.DataFrame, fields: dict[str, dict[str, list[str]]]) -> pl.DataFrame:
    """`stack_trace` from an `error` that is a whole traceback (python-json-logger's `exc_info`,
    structlog's `exception`): the exception it reports (stack_lines.exception_of), where the
    lines after the record gave none."""
    errors = frame["error"].cast(pl.String)
    several = errors.str.contains("\n", literal=True).fill_null(False)
    if not several.any():
        return frame
    at = several.arg_true()
    found = pl.Series([exception_of(text.split("\n")) for text in errors.gather(at).to_list()], dtype=pl.String)
    traced = pl.Series("stack_trace", [None] * frame.height, dtype=pl.String).scatter(at, found)
    own = frame["stack_trace"] if "stack_trace" in frame.columns else pl.Series([None] * frame.height, dtype=pl.String)
    frame = frame.with_columns(stack_trace=pl.coalesce(own, traced))
    _add_field_source(fields, frame.filter(own.is_null() & traced.is_not_null()).rename({"__source": SOURCE}), "stack_trace", ERROR_TRACEBACK)
    return frame


def _add_field_source(fields: dict[str, dict[str, list[str]]], rows: pl.DataFrame, column: str, label: str) -> None:
    """`label` (not a raw field: a stack trace, the word after a text line's time) among what fed
    `column` in the files `rows` come from (their SOURCE)."""
    for source in rows[SOURCE].unique().to_list():
        known = fields.get(source, {})  # a new value: files with the same fields present share theirs
        if label not in known.get(column, []):
            fields[source] = {**known, column: [*known.get(column, []), label]}


def normalize(raw: pl.DataFrame, config: Config, fmt: str) -> Normalized:
    """Turn one raw block into canonical rows; rows without a usable time are rejected."""
    # Only fields that carry a value somewhere in this block: most aliases are absent, and a
    # smaller expression graph is much cheaper on small blocks.
    candidates_cols = [c for c in raw.columns if not c.startswith("_")]
    present = raw.select(
        *[pl.col(c).is_not_null().any().alias(f"v{i}") for i, c in enumerate(candidates_cols)],
        *[pl.col(c).cast(pl.String).str.starts_with("{").any().alias(f"o{i}") for i, c in enumerate(candidates_cols)],
    ).row(0) if candidates_cols else ()
    available = {c for c, hit in zip(candidates_cols, present) if hit}
    objects = {c for c, hit in zip(candidates_cols, present[len(candidates_cols):]) if hit}
    values = _materialize_paths(raw, config, available, objects)
    paths = [c for c in values.columns if c != "_rows"]
    # The regex only over the columns where a value begins as one does (most have none).
    found = values.select(_begins_structured(pl.col(p)).any().alias(p) for p in paths).row(0) if paths else ()
    begun = [p for p, hit in zip(paths, found) if hit]
    found = values.select(_is_structured(pl.col(p)).any().alias(p) for p in begun).row(0) if begun else ()
    structured = {p for p, hit in zip(begun, found) if hit}
    values = values.with_columns(raw[SOURCE].alias(SOURCE))
    fields: dict[str, dict[str, list[str]]] = {}
    selections: dict[str, pl.Expr] = {}
    candidates_by_column: dict[str, list[str]] = {}
    statuses = frozenset(config.aliases.get("status", ()))
    for column, aliases in config.aliases.items():
        selections[column], candidates_by_column[column] = _resolve_column(values, column, aliases, structured, statuses)
    if PLAIN_MESSAGE in raw.columns:
        values = values.with_columns(raw[PLAIN_MESSAGE])
        selections["message"] = pl.coalesce(selections["message"], pl.col(PLAIN_MESSAGE)) if "message" in selections else pl.col(PLAIN_MESSAGE)
    if PLAIN_NAME in raw.columns:
        # What a free-text line says names its kind, not the record: held as its name, every line's
        # own text would be as many labels as lines (a label column holds 60,000), and each a name
        # `formats` lists as unmapped. The record keeps it as its message.
        values = values.with_columns(raw[PLAIN_NAME])
        if "name" in selections:
            # A number names no event where the line's text does (`Email sent ... status=200`).
            selections["name"] = pl.when(pl.col(PLAIN_NAME).is_not_null() & selections["name"].str.contains(NUMBER)).then(None) \
                .otherwise(selections["name"])
        selections[KIND_NAME] = pl.coalesce(selections["name"], pl.col(PLAIN_NAME)) if "name" in selections else pl.col(PLAIN_NAME)
    if LEADING_LEVEL in raw.columns:
        values = values.with_columns(raw[LEADING_LEVEL])
        # The line's own word before any field: GKE names every line on stderr ERROR.
        selections["level"] = pl.coalesce(pl.col(LEADING_LEVEL), selections["level"]) if "level" in selections else pl.col(LEADING_LEVEL)
    # Which raw fields carry a value (for `formats`), per source: a structured value (JSON object
    # or array) only counts for the columns that keep it, so such paths count their scalar values.
    counts: dict[str, pl.Expr] = {}
    flag_names = []
    for column, usable in candidates_by_column.items():
        for path in usable:
            name = f"s\x00{path}" if column not in STRUCTURED_OK and path in structured else f"n\x00{path}"
            if name not in counts:
                counts[name] = (
                    (~_is_structured(pl.col(path))).sum() if name[0] == "s" else pl.col(path).count()
                ).alias(name)
            flag_names.append((column, path, name))
    if counts:
        position = {name: i for i, name in enumerate(counts)}
        hit = [(column, path, position[name]) for column, path, name in flag_names]
        # Files with the same fields present share them (a batch of 20,000 small files spent 0.3 s
        # here a file at a time): FileReport.add_fields never changes them in place.
        shared: dict[tuple[bool, ...], dict[str, list[str]]] = {}
        flags = values.group_by(SOURCE).agg(expr > 0 for expr in counts.values())
        for row in flags.iter_rows():
            source, present = row[0], row[1:]
            found = shared.get(present)
            if found is None:
                found = shared[present] = {}
                for column, path, i in hit:
                    if present[i]:
                        found.setdefault(column, []).append(path)
            if found:
                fields[source] = found
    if LEADING_LEVEL in raw.columns:
        _add_field_source(fields, values.filter(pl.col(LEADING_LEVEL).is_not_null()), "level", LEVEL_WORD)

    extras = {
        "__lead": raw[LEADING_TS] if LEADING_TS in raw.columns else pl.repeat(None, raw.height, dtype=pl.String, eager=True),
        "__fallback": raw[FALLBACK_TS] if FALLBACK_TS in raw.columns else pl.repeat(None, raw.height, dtype=pl.String, eager=True),
    }
    # with_columns (not select) so that columns with no alias present broadcast to the height.
    frame = values.with_columns(
        *[expr.alias(f"__{col}") for col, expr in selections.items()],
    ).select([f"__{col}" for col in selections]).rename({f"__{col}": col for col in selections}).with_columns(
        line=raw[LINE].cast(pl.Int64), __source=raw[SOURCE],
        __text=raw[TEXT] if TEXT in raw.columns else pl.lit(None, dtype=pl.String),
        **({"__trace_error": raw[TRACE_ERROR]} if TRACE_ERROR in raw.columns else {}),
        **({"__crash_offset": raw[CRASH_OFFSET], "__crash_text": raw[CRASH_TEXT],
            "__crash_error": raw[TRACE_ERROR] if TRACE_ERROR in raw.columns else pl.lit(None, dtype=pl.String)}
           if CRASH_OFFSET in raw.columns else {}),
        **{name: series.alias(name) for name, series in extras.items()},
    )

    # Timestamps: the record's own field, then a leading timestamp, then the envelope's.
    candidates = ["ts", "__lead", "__fallback"] if "ts" in frame.columns else ["__lead", "__fallback"]
    parsed = pl.concat(
        [parse_timestamps(frame[c], config.assume_tz).rename({"ts": f"t{i}", "naive": f"n{i}"})
         for i, c in enumerate(candidates)],
        how="horizontal",
    )
    parsed = parsed.with_columns(  # a time no log was written at: the next candidate's, or a bad timestamp
        pl.when(pl.col(f"t{i}").is_between(EARLIEST_TIME, LATEST_TIME, closed="left")).then(pl.col(f"t{i}"))
        for i in range(len(candidates))
    )
    first_ts = pl.coalesce([pl.col(f"t{i}") for i in range(len(candidates))])
    first_naive = pl.coalesce(
        [pl.when(pl.col(f"t{i}").is_not_null()).then(pl.col(f"n{i}")) for i in range(len(candidates))]
    )
    chosen = parsed.select(__ts=first_ts, __naive=first_naive.fill_null(False))
    if FALLBACK_TS in raw.columns:
        # A record's own time without a zone (Celery's local time) yields to its envelope's zoned
        # time, unless that is whole seconds (Loki's text output) and the record's is not: then
        # the record's time is read in the zone the envelope's shows (their difference to the
        # nearest quarter hour, when within ZONE_SLACK of one), and keeps its fraction and the
        # order of a second's records.
        env = len(candidates) - 1
        envelope_zone = pl.col("__naive") & pl.col(f"t{env}").is_not_null() & ~pl.col(f"n{env}")
        apart = (pl.col(f"t{env}") - pl.col("__ts")).dt.total_microseconds()
        zone = (apart / QUARTER_HOUR_US).round() * QUARTER_HOUR_US
        to_the_second = (pl.col(f"t{env}").dt.microsecond() == 0) & (pl.col("__ts").dt.microsecond() != 0)
        in_zone = envelope_zone & to_the_second & ((apart - zone).abs() <= ZONE_SLACK_US)
        envelope_wins = envelope_zone & ~in_zone
        chosen = pl.concat([chosen, parsed.select(f"t{env}", f"n{env}")], how="horizontal").select(
            __ts=pl.when(in_zone).then(pl.col("__ts") + pl.duration(microseconds=zone.cast(pl.Int64)))
            .when(envelope_wins).then(pl.col(f"t{env}")).otherwise(pl.col("__ts")),
            __naive=pl.when(envelope_zone).then(False).otherwise(pl.col("__naive")),
            __env_time=pl.col(f"t{env}").is_not_null() & (envelope_wins | pl.col("__ts").eq(pl.col(f"t{env}"))),
        )
        used = pl.concat([frame.select("__source"), chosen.select("__env_time")], how="horizontal")
        for source, hit in used.group_by("__source").agg(pl.col("__env_time").any()).rows():
            if hit:  # a new value: files with the same fields present share theirs (above)
                known = fields.get(source, {})
                fields[source] = {**known, "ts": [*known.get("ts", []), ENVELOPE_TIME]}
        chosen = chosen.drop("__env_time")
    any_text = pl.any_horizontal([pl.col(c).is_not_null() for c in candidates])
    frame = pl.concat([frame, chosen], how="horizontal").with_columns(
        __reason=pl.when(pl.col("__ts").is_not_null()).then(None)
        .when(any_text).then(pl.lit("bad_timestamp"))
        .otherwise(pl.lit("no_timestamp"))
    )
    rejects = frame.filter(pl.col("__reason").is_not_null()).select(
        pl.col("__source").alias("source"), "line", pl.col("__reason").alias("reason"), pl.col("__text").alias("text")
    )
    if "__crash_offset" in frame.columns:  # a crash report after a rejected record goes with it
        lost = frame.filter(pl.col("__reason").is_not_null() & pl.col("__crash_offset").is_not_null())
        if lost.height:
            rejects = pl.concat([rejects, lost.select(
                pl.col("__source").alias("source"), (pl.col("line") + pl.col("__crash_offset")).alias("line"),
                pl.col("__reason").alias("reason"), pl.col("__crash_text").alias("text"),
            )])
    frame = frame.drop("__text").filter(pl.col("__reason").is_null())

    schema = canonical_schema(config.business_keys)
    mapped = {c: pl.col(c).replace(m) for c, m in config.value_maps.items() if c in frame.columns}
    if mapped:
        frame = frame.with_columns(**mapped)
    numeric = {
        **{c: pl.col(c).cast(pl.Float64, strict=False).cast(schema[c], strict=False) for c in INT_COLUMNS if c in frame.columns},
        **{c: pl.col(c).cast(schema[c], strict=False) for c in FLOAT_COLUMNS if c in frame.columns},
    }
    frame = frame.with_columns(**numeric)
    if "__trace_error" in frame.columns:
        frame = _with_stack_trace(frame, fields)
    if "error" in frame.columns:
        frame = _error_traceback(frame, fields)
    if "retry_count" in frame.columns:
        retries = pl.col("retry_count").cast(pl.Float64, strict=False).cast(pl.Int32, strict=False) + 1
        frame = frame.with_columns(attempt=pl.coalesce(pl.col("attempt"), retries) if "attempt" in frame.columns else retries)
    if "duration_s" in frame.columns:
        seconds = pl.col("duration_s").cast(pl.Float64, strict=False) * 1000.0
        frame = frame.with_columns(duration_ms=pl.coalesce(pl.col("duration_ms"), seconds) if "duration_ms" in frame.columns else seconds)
    stated = [(c, name, scale) for c, (name, scale) in STATED_TIMEOUTS.items() if c in frame.columns]
    if stated:
        # Each platform's lease, in seconds, and the name it goes by: the first stated in
        # STATED_TIMEOUTS' order (visibility_timeout_s is already a number, a non-number null).
        values = [pl.col(c).cast(pl.Float64, strict=False) * scale for c, _, scale in stated]
        names = [pl.when(value.is_not_null()).then(pl.lit(name)) for value, (_, name, _) in zip(values, stated)]
        frame = frame.with_columns(
            visibility_timeout_s=pl.coalesce(values) if len(values) > 1 else values[0],
            timeout_name=pl.coalesce(names) if len(names) > 1 else names[0],
        )
    missing = {c: pl.lit(None, dtype=t) for c, t in schema.items() if c not in frame.columns}
    frame = frame.with_columns(**missing)
    frame = frame.with_columns(
        ts=pl.col("__ts"),
        ts_naive=pl.col("__naive"),
        source=pl.col("__source"),
        format=pl.lit(fmt, dtype=pl.String),
    )
    frame = _library_lines(frame, config)
    frame = _classify(frame, config)
    if candidates_by_column.get("kafka_partition") and candidates_by_column.get("kafka_offset"):
        # A consumer that names its group on some of its lines reads in it on the others too: the
        # one group a file's worker names for a topic (two groups' runs of a record would otherwise
        # share the message `(service ...)`, and read as a redelivery).
        named = pl.col("consumer_group").drop_nulls()
        by = ["source", "worker_id", "queue"]
        group = pl.when(pl.col("consumer_group").is_null() & (named.n_unique().over(by) == 1)).then(named.first().over(by)) \
            .otherwise(pl.col("consumer_group"))
        coordinates = coordinates_id(pl.col("queue"), pl.col("kafka_partition"), pl.col("kafka_offset"), group,
                                     pl.col("service"), ~pl.col("kind").eq_missing("publish"))
        # An offset commit's offset may be the next record's (the committed position): no id.
        frame = frame.with_columns(job_id=pl.coalesce(pl.col("job_id"), pl.when(~pl.col("kind").eq_missing("ack")).then(coordinates)))
    table = frame.select([pl.col(c).cast(t) for c, t in schema.items()])
    if "__crash_offset" in frame.columns:
        owners = frame.filter(pl.col("__crash_offset").is_not_null())
        if owners.height:
            table = pl.concat([table, crash_records(owners, schema)], rechunk=False)
            _add_field_source(fields, owners.rename({"__source": SOURCE}), "stack_trace", STACK_TRACE)
    return Normalized(table, rejects, fields)
