"""Queue frameworks' own text lines (Celery, RQ, Dramatiq, Sidekiq): regex grammars from rules/presets."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field

import polars as pl

from dupfind.lineparse import PAIR_PATTERN
from dupfind.normalize import FALLBACK_TS, FILE_SHIFT, LINE, TEXT
from dupfind.presets import CONTEXT_PREFIX, Preset
from dupfind.record_ids import ASSIGNED_PARTITIONS, single_topic

EVENT = "event"
# Up to this many lines, Python's `re` first tells which grammars could claim one of them (the
# stray text lines of a JSON block: a traceback printed to stdout). Each grammar's patterns in
# polars cost a compilation each (polars keeps 32 compiled patterns), 4 ms a block of a few lines.
FEW_LINES = 256


@dataclass
class GrammarResult:
    """What the grammars made of a block of text lines."""

    raws: list[tuple[pl.DataFrame, Preset]] = field(default_factory=list)  # record rows per grammar
    context_lines: int = 0  # lines that only carried context (a startup banner)
    context: dict[str, str] = field(default_factory=dict)  # column -> value for the whole file
    # source -> column -> value, for the lines of an export of several sources (`source`)
    context_by_source: dict[str, dict[str, str]] = field(default_factory=dict)
    continuing: pl.Series | None = None  # line numbers of records that take continuation lines
    rest: pl.DataFrame | None = None  # rows no grammar claimed: line, text, clean (+ carried)


@dataclass
class Inherited:
    """A file's threads' last values of the columns grammar rules inherit, as its blocks so far
    left them: preset name -> a frame of THREAD and those columns (one row a thread)."""

    last: dict[str, pl.DataFrame] = field(default_factory=dict)


THREAD = "__thread"


def refine(frame: pl.DataFrame, preset: Preset, source: pl.Expr | None = None,
           inherited: Inherited | None = None) -> pl.DataFrame:
    """Apply the preset's message rules (a grammar's line's, a JSON record shape's `message`): the
    first that matches names the event (a record's own `event` where none does) and adds fields.
    `source`: what names each line's source in an export of several (see parse_grammar_lines);
    `inherited`: the file's blocks before this one (see _inherit)."""
    message = pl.col("message") if "message" in frame.columns else pl.col("clean")
    own = pl.col(EVENT) if frame.schema.get(EVENT) == pl.String else pl.lit(None, dtype=pl.String)
    frame = frame.with_columns(own.alias(EVENT), pl.lit(False).alias("__done"))
    for rule in preset.rules:
        hit = ~pl.col("__done") & message.str.contains(rule.pattern)
        groups = list(rule.regex.groupindex)
        updates = {}
        if groups:
            extracted = message.str.extract_groups(rule.pattern)
            for name in groups:
                value = extracted.struct.field(name)
                current = pl.col(name) if name in frame.columns else pl.lit(None, dtype=pl.String)
                updates[name] = pl.when(hit).then(pl.coalesce(value, current)).otherwise(current)
                if name in rule.context:
                    ctx = CONTEXT_PREFIX + name
                    previous = pl.col(ctx) if ctx in frame.columns else pl.lit(None, dtype=pl.String)
                    updates[ctx] = pl.when(hit).then(value).otherwise(previous)
        if rule.event is not None:
            updates[EVENT] = pl.when(hit).then(pl.lit(rule.event)).otherwise(pl.col(EVENT))
        if rule.inherit:
            updates["__inherit"] = (pl.col("__inherit") if "__inherit" in frame.columns else pl.lit(False)) | hit
        updates["__done"] = pl.col("__done") | hit
        frame = frame.with_columns(**updates)
    if ASSIGNED_PARTITIONS in frame.columns:  # a Kafka consumer's partitions: its topic, when they are one's
        topic = single_topic(pl.col(ASSIGNED_PARTITIONS))
        frame = frame.with_columns(queue=pl.coalesce(pl.col("queue"), topic) if "queue" in frame.columns else topic) \
            .drop(ASSIGNED_PARTITIONS)
    return _inherit(frame, preset, source, inherited).drop("__done")


def _inherit(frame: pl.DataFrame, preset: Preset, source: pl.Expr | None, inherited: Inherited | None) -> pl.DataFrame:
    """A line about a job that does not name it (Dramatiq's failure line) takes the id the same
    process and thread logged last (its `Received message ... with id` line), in this block or,
    through `inherited`, in the file's blocks before it."""
    if "__inherit" not in frame.columns:
        return frame
    columns = sorted({c for r in preset.rules for c in r.inherit if c in frame.columns})
    parts = [pl.col(c) for c in preset.thread if c in frame.columns]
    if not (columns and parts):
        return frame.drop("__inherit")
    # Threads of one name in two files of a batch, or two pods of one export, are two threads.
    parts += [pl.col(LINE) // (1 << FILE_SHIFT), *([source] if source is not None else [])]
    frame = frame.with_columns(pl.concat_str([p.cast(pl.String).fill_null("") for p in parts], separator="\x1f").alias(THREAD))
    before = inherited.last.get(preset.name) if inherited is not None else None
    if before is not None:  # each thread's last values, as a line before the block's first
        frame = pl.concat([before.with_columns(pl.lit(-1, dtype=frame.schema[LINE]).alias(LINE)), frame], how="diagonal_relaxed")
    frame = frame.sort(LINE).with_columns(**{
        c: pl.when(pl.col("__inherit").eq_missing(True) & pl.col(c).is_null())
        .then(pl.col(c).forward_fill().over(THREAD)).otherwise(pl.col(c))
        for c in columns
    })
    if inherited is not None:
        inherited.last[preset.name] = frame.group_by(THREAD).agg(pl.col(c).drop_nulls().last() for c in columns)
    if before is not None:
        frame = frame.filter(pl.col(LINE) >= 0)
    return frame.drop("__inherit", THREAD)


def with_pairs(frame: pl.DataFrame, groups: tuple[str, ...], keys: Collection[str] | None = None) -> pl.DataFrame:
    """The records with the `key=value` pairs of these groups as fields (the first group's value
    of a key first; a field the line's groups name is kept): all pairs of a block extracted,
    split and spread into columns at once. `keys`: the only keys kept (the configuration's
    aliases): a log whose pairs hold ever new keys would make a column each."""
    found = [g for g in groups if g in frame.columns]
    if not found:
        return frame
    pairs = pl.concat([
        frame.select(pl.col(LINE), pl.col(g).str.extract_all(PAIR_PATTERN).alias("pair"), pl.lit(i).alias("group"))
        for i, g in enumerate(found)
    ]).explode("pair").drop_nulls("pair")
    if pairs.height == 0:
        return frame
    # Each step's columns made once (nested in one select, the split was made again for each use).
    pairs = pairs.select(
        pl.col(LINE), pl.col("group"),
        pl.col("pair").str.strip_chars_start(" \t{,").str.splitn("=", 2).struct.rename_fields(["key", "value"]),
    ).unnest("pair")
    if keys is not None:
        pairs = pairs.filter(pl.col("key").is_in(list(keys)))
        if pairs.height == 0:
            return frame
    value, quoted = pl.col("value"), pl.col("_quoted")
    pairs = pairs.with_columns(_quoted=(
        (value.str.starts_with('"') & value.str.ends_with('"')) | (value.str.starts_with("'") & value.str.ends_with("'"))
    ) & (value.str.len_bytes() >= 2))
    unquoted = pl.when(quoted).then(value.str.slice(1, value.str.len_chars() - 2).str.replace_all(r'\\(.)', "$1"))
    # A pair closing a bracketed prefix (`[Consumer clientId=consumer-1, groupId=notifier]`) ends before its `]`.
    unquoted = unquoted.when(value.str.ends_with("]") & ~value.str.contains("[", literal=True)) \
        .then(value.str.strip_suffix("]")).otherwise(value)
    spread = (
        pairs.select(pl.col(LINE), pl.col("group"), "key", unquoted.alias("value"))
        .sort(LINE, "group", maintain_order=True)
        .pivot(on="key", index=LINE, values="value", aggregate_function="first")
    )
    new = [c for c in spread.columns if c != LINE and c not in frame.columns]
    kept = [c for c in spread.columns if c != LINE and c in frame.columns]
    joined = frame.join(spread.rename({c: f"__pair_{c}" for c in kept}), on=LINE, how="left")
    return joined.with_columns(pl.coalesce(pl.col(c), pl.col(f"__pair_{c}")).alias(c) for c in kept).drop(
        [f"__pair_{c}" for c in kept]
    ).select([*frame.columns, *new])


def _context_values(frame: pl.DataFrame, rules, column: str = "clean") -> dict[str, str]:
    values: dict[str, str] = {}
    for rule in rules:
        for name in rule.context:
            found = frame.select(pl.col(column).str.extract(rule.pattern, rule.regex.groupindex[name])).drop_nulls()
            if found.height and name not in values:
                values[name] = found.item(0, 0)
    return values


def parse_grammar_lines(
    rows: pl.DataFrame, grammars: list[Preset], source: pl.Expr | None = None, keys: Collection[str] | None = None,
    time_optional: bool = False, inherited: Inherited | None = None,
) -> GrammarResult:
    """rows: line, text, clean (ANSI stripped) and carried columns. Claims the lines a grammar knows.
    `source`: what names each line's source in an export of several (an envelope's log stream or
    pod), whose banners are each their own source's; `keys`: the keys of `pairs` kept;
    `time_optional`: the lines are an envelope's whose time is optional (Preset.time_optional):
    a line a grammar knows only with the envelope's time before it is that line whole;
    `inherited`: the file's blocks before these lines' (see _inherit)."""
    result = GrammarResult(rest=rows)
    continuing: list[pl.Series] = []
    rest = rows
    if rows.height <= FEW_LINES and not time_optional:
        grammars = _claiming(grammars, rows["clean"].to_list())
    for preset in grammars:
        if rest.height == 0:
            break
        if preset.context_lines:
            is_context = pl.any_horizontal([pl.col("clean").str.contains(r.pattern) for r in preset.context_lines])
            context = rest.filter(is_context)
            if context.height:
                result.context_lines += context.height
                parts = {None: context} if source is None else \
                    context.with_columns(source.alias("__source")).partition_by("__source", as_dict=True)
                for key, part in parts.items():
                    found = key[0] if isinstance(key, tuple) else key
                    target = result.context if found is None else result.context_by_source.setdefault(found, {})
                    for name, value in _context_values(part, preset.context_lines).items():
                        target.setdefault(name, value)
                rest = rest.filter(~is_context)
        is_record = pl.col("clean").str.contains(preset.line)
        if time_optional and FALLBACK_TS in rest.columns:
            whole = pl.concat_str(pl.col(FALLBACK_TS), pl.lit(" "), pl.col("clean"))
            rest = rest.with_columns(clean=pl.when(~is_record & whole.str.contains(preset.line).fill_null(False))
                                     .then(whole).otherwise(pl.col("clean")))
        claimed = rest.filter(is_record)
        if claimed.height == 0:
            continue
        rest = rest.filter(~is_record)
        groups = claimed.select(pl.col("clean").str.extract_groups(preset.line)).unnest("clean")
        carried = [c for c in claimed.columns if c not in ("line", "text", "clean")]
        frame = pl.concat(
            [claimed.select(pl.col("line").alias(LINE), pl.col("text").alias(TEXT), "clean", *carried), groups],
            how="horizontal",
        )
        frame = with_pairs(refine(frame, preset, source, inherited), preset.pairs, keys).drop("clean")
        result.raws.append((frame, preset))
        if preset.continuation:
            continuing.append(frame[LINE])
    result.rest = rest
    result.continuing = pl.concat(continuing) if continuing else None
    return result


def _claiming(grammars: list[Preset], lines: list[str]) -> list[Preset]:
    """The grammars one of whose patterns (its record line's, its context lines') Python's `re`
    finds in one of `lines` (Preset.line_searches, as sniffing judges lines): the others claim none
    of them. (The patterns are checked with `re` when loaded.)"""
    return [preset for preset in grammars if any(search(line) for line in lines for search in preset.line_searches)]


def continuation_lines(
    all_lines: pl.Series, records: pl.Series, candidates: pl.Series, continuing: pl.Series,
) -> pl.DataFrame:
    """Candidate lines (unparseable) that directly follow, possibly after other candidates, a record
    whose format writes multi-line records (a traceback after a Celery error line): `line`, and
    `owner`, the line of the record each belongs to."""
    frame = pl.DataFrame({"line": all_lines}).with_columns(
        takes=pl.when(pl.col("line").is_in(continuing.implode())).then(pl.lit(True))
        .when(pl.col("line").is_in(records.implode())).then(pl.lit(False))
    ).sort("line").with_columns(
        pl.col("takes").forward_fill(),
        owner=pl.when(pl.col("takes").is_not_null()).then(pl.col("line")).forward_fill(),
    )
    joined = pl.col("line").is_in(candidates.implode()) & pl.col("takes").fill_null(False)
    return frame.filter(joined).select("line", "owner")
