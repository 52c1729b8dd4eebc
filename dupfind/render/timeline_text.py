"""Terminal timeline: one row per worker grouped by generation, executions as bars, stops and kills marked."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from rich.console import Console
from rich.text import Text

from dupfind.render.rich_lines import write_lines
from dupfind.render.safe import safe_str, safe_text

if TYPE_CHECKING:
    import polars as pl

LEGEND = (
    ("·", "dim", "alive"),
    ("━", "green", "executing"),
    ("█", "bold red", "duplicated action"),
    ("▒", "magenta", "cut short"),
    ("S", "bold yellow", "stop signal"),
    ("K", "bold red", "killed"),
    ("E", "cyan", "exited"),
    ("?", "bold red", "went silent"),
    ("═", "blue", "deploy window"),
    ("▓", "bold blue", "generations overlap"),
)
DENSITY = " ░▒▓█"
# What this view draws of each execution (timeline.timeline_document's entry_fields).
DRAWN_ENTRY_FIELDS = ("start_ms", "end_ms", "state", "duplicate")
BAR, DUPLICATED_BAR, CUT_SHORT_BAR = "━", "█", "▒"
BAR_STYLE = {BAR: "green", DUPLICATED_BAR: "bold red", CUT_SHORT_BAR: "magenta"}
END_MARK = {"killed": ("K", "bold red"), "exited": ("E", "cyan"), "gone": ("?", "bold red")}


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_US = timedelta(microseconds=1)


def _parse(ts: str | None) -> datetime | None:
    return datetime.fromisoformat(ts.replace("Z", "+00:00")) if ts else None


def _parsed_ms(ts: str | None) -> int | None:
    t = _parse(ts)
    return None if t is None else (t - _EPOCH) // _US // 1000


def _bars(executions: list[dict], scale: _Scale) -> list[tuple[int | None, int | None]]:
    """The first and last column of each execution's bar. The drawn fields (DRAWN_ENTRY_FIELDS)
    carry the times as milliseconds (`start_ms`), a whole document as text."""
    col = scale.col_ms
    if executions and "start_ms" in executions[0]:
        return [(col(e["start_ms"]), col(e["end_ms"])) for e in executions]
    return [(col(_parsed_ms(e["start"])), col(_parsed_ms(e["end"]))) for e in executions]


def bar_width(console_width: int) -> int:
    """How many columns a window's bars take on a console this wide (the rest is the labels')."""
    width = max(40, console_width)
    return width - min(26, max(12, width // 4)) - 1


def bar_cells(shown: pl.DataFrame, windows: list[tuple[str, str]], width: int) -> pl.DataFrame:
    """What each worker's row draws of its executions, worked out for every window at once: for
    each `_w` and `worker` of `shown` (one row per execution shown in a window, in the order a
    row paints them; `start_ms`, `end_ms`, `state`, `duplicate`), `cols` (ascending) with the
    `glyphs` there and `busy`, how many executions cover each. The same cells as painting each
    execution's bar in turn (duplicated and cut-short ones over the others) on a scale of
    `width` columns for each window's (start, end)."""
    import polars as pl

    scales = [_Scale(start, end, width) for start, end in windows]
    scale = pl.DataFrame(
        {"_w": range(len(scales)), "_start_us": [s.start_us for s in scales], "_span": [s.span for s in scales]},
        schema={"_w": shown.schema["_w"], "_start_us": pl.Int64, "_span": pl.Float64},
    )

    def col(ms: str) -> pl.Expr:  # _Scale.col_ms, in the same floating-point steps
        at = (pl.col(ms) * 1000 - pl.col("_start_us")).cast(pl.Float64) / 10**6 / pl.col("_span") * width
        return at.cast(pl.Int64).clip(0, width - 1)

    over = pl.col("duplicate") | (pl.col("state") == "interrupted")
    glyph = (pl.when(pl.col("duplicate")).then(pl.lit(DUPLICATED_BAR))
             .when(pl.col("state") == "interrupted").then(pl.lit(CUT_SHORT_BAR)).otherwise(pl.lit(BAR)))
    return (
        shown.lazy()
        .select("_w", "worker", "start_ms", "end_ms", "state", "duplicate")
        .with_row_index("_order")
        .join(scale.lazy(), on="_w", how="left")
        .select("_w", "worker", pl.int_ranges(col("start_ms"), col("end_ms") + 1).alias("_col"), glyph.alias("_glyph"),
                (over.cast(pl.UInt32) * pl.len() + pl.col("_order")).alias("_paint"))
        .explode("_col")
        .drop_nulls("_col")
        .group_by("_w", "worker", "_col")
        .agg(pl.col("_glyph").sort_by("_paint").last(), pl.len().alias("_busy"))
        .sort("_w", "worker", "_col")
        .group_by("_w", "worker", maintain_order=True)
        .agg(pl.col("_col").alias("cols"), pl.col("_glyph").str.join("").alias("glyphs"), pl.col("_busy").alias("busy"))
        .collect()
    )


class _Scale:
    def __init__(self, start: str, end: str, width: int) -> None:
        self.start, self.end, self.width = _parse(start), _parse(end), width
        self.span = max((self.end - self.start).total_seconds(), 1e-6)
        self.start_us = (self.start - _EPOCH) // _US

    def col(self, ts: str | None, clip: bool = True) -> int | None:
        t = _parse(ts)
        if t is None:
            return None
        return self._clipped(int((t - self.start).total_seconds() / self.span * self.width), clip)

    def col_ms(self, ms: int | None) -> int | None:
        """col of a time in milliseconds since the epoch: the same column as col of its text
        (timedelta.total_seconds divides whole microseconds by 10**6, as here)."""
        if ms is None:
            return None
        return self._clipped(int((ms * 1000 - self.start_us) / 10**6 / self.span * self.width), True)

    def _clipped(self, c: int, clip: bool) -> int | None:
        if not clip and (c < 0 or c >= self.width):
            return None
        return min(self.width - 1, max(0, c))


def _cells(width: int) -> list[tuple[str, str]]:
    return [(" ", "")] * width


def _paint(cells: list[tuple[str, str]], a: int | None, b: int | None, glyph: str, style: str) -> None:
    if a is None or b is None or b < a:
        return
    cells[a : b + 1] = [(glyph, style)] * (b + 1 - a)


def _exec_glyph(e: dict) -> tuple[str, str]:
    glyph = DUPLICATED_BAR if e["duplicate"] else CUT_SHORT_BAR if e["state"] == "interrupted" else BAR
    return glyph, BAR_STYLE[glyph]


def _worker_cells(w: dict, scale: _Scale) -> list[tuple[str, str]]:
    cells = _cells(scale.width)
    _paint(cells, scale.col(w["start"]), scale.col(w["end"] or w["last_seen"]), "·", "dim")
    if "cells" in w:  # the document of this view alone: its bars worked out (bar_cells)
        cols, glyphs, _ = w["cells"]
        for c, glyph in zip(cols, glyphs):
            cells[c] = (glyph, BAR_STYLE[glyph])
        _mark_stop_and_end(cells, w, scale)
        return cells
    executions = w["executions"]
    # Duplicated and cut-short executions are painted over the others (in their own order).
    over = []
    for e, (a, b) in zip(executions, _bars(executions, scale)):
        if e["duplicate"] or e["state"] == "interrupted":
            over.append((a, b, e))
        else:
            _paint(cells, a, b, BAR, BAR_STYLE[BAR])
    for a, b, e in over:
        _paint(cells, a, b, *_exec_glyph(e))
    _mark_stop_and_end(cells, w, scale)
    return cells


def _mark_stop_and_end(cells: list[tuple[str, str]], w: dict, scale: _Scale) -> None:
    stop = scale.col(w["stop"], clip=False)
    if stop is not None:
        cells[stop] = ("S", "bold yellow")
    if w["end_kind"] in END_MARK:
        end = scale.col(w["end"], clip=False)
        if end is not None:
            cells[end] = END_MARK[w["end_kind"]]


def _aggregate_cells(workers: list[dict], scale: _Scale) -> list[tuple[str, str]]:
    """Several workers in one row: density of busy workers per column, plus stop and kill marks."""
    busy = [0] * scale.width
    for w in workers:
        if "cells" in w:
            cols, _, counts = w["cells"]
            for c, n in zip(cols, counts):
                busy[c] += n
            continue
        for a, b in _bars(w["executions"], scale):
            for c in range(a, b + 1):
                busy[c] += 1
    cells = [
        (DENSITY[min(len(DENSITY) - 1, -(-n * (len(DENSITY) - 1) // len(workers)))] if n else " ", "green")
        for n in busy
    ]
    for w in workers:
        _mark_stop_and_end(cells, w, scale)
    return cells


def _row(label: str, cells: list[tuple[str, str]], label_width: int, label_style: str = "", plain: bool = False) -> Text:
    text = Text(safe_str(label).ljust(label_width)[:label_width] + " ", style=label_style)
    if plain:  # drawn without colour: the styles would not be written
        return text.append("".join([glyph for glyph, _ in cells]))
    # A run of cells in one style is one span: rich draws far fewer (a bar is mostly runs).
    run, run_style = [], None
    for glyph, style in cells:
        if style != run_style and run:
            text.append("".join(run), style=run_style)
            run = []
        run.append(glyph)
        run_style = style
    if run:
        text.append("".join(run), style=run_style)
    return text


def _label(worker: str, width: int) -> str:
    worker = safe_str(worker)
    return worker if len(worker) <= width else "…" + worker[-(width - 1) :]


def _axis(scale: _Scale, label_width: int) -> list[Text]:
    ticks = max(2, scale.width // 16)
    line = [" "] * scale.width
    marks = Text(" " * (label_width + 1))
    labels = [" "] * (scale.width + 8)
    for i in range(ticks + 1):
        c = min(scale.width - 1, round(i * (scale.width - 1) / ticks))
        line[c] = "┬"
        t = scale.start + (scale.end - scale.start) * (c / max(1, scale.width - 1))
        stamp = t.strftime("%H:%M:%S")
        pos = max(0, min(c - 4, scale.width - len(stamp)))
        if all(ch == " " for ch in labels[max(0, pos - 1) : pos + len(stamp) + 1]):
            labels[pos : pos + len(stamp)] = list(stamp)
    marks.append("".join(line), style="dim")
    return [Text(" " * (label_width + 1) + "".join(labels[: scale.width]).rstrip(), style="dim"), marks]


def render_window(data: dict, console: Console, max_rows: int = 40) -> None:
    width = max(40, console.width)
    bar = bar_width(console.width)
    label_width = width - bar - 1
    scale = _Scale(data["start"], data["end"], bar)
    plain = getattr(console, "plain", False)
    console.print(Text(f"dupfind timeline: {safe_str(data['title'])}", style="bold"))
    console.print(Text(f"{data['start']} → {data['end']} (UTC), one column ≈ {scale.span / bar:.1f} s", style="dim"))
    for line in _axis(scale, label_width):
        console.print(line)
    deploy = data["deploy"]
    if deploy:
        cells = _cells(bar)
        _paint(cells, scale.col(deploy["start"]), scale.col(deploy["end"]), "═", "blue")
        if data["overlap"]:
            _paint(cells, scale.col(data["overlap"]["start"]), scale.col(data["overlap"]["end"]), "▓", "bold blue")
        console.print(_row(f"deploy {deploy['deploy']}", cells, label_width, "bold blue", plain))
    generations = data["generations"]
    total = sum(len(g["workers"]) for g in generations)
    budget = max(2, max_rows // max(1, len(generations)))
    # Several services' generations are named by service too (each service's version is its own).
    services = _services(generations)
    for gen in generations:
        how = "" if not gen["inferred"] else f", inferred from {gen['source'].replace('_', ' ')}"
        name = gen["generation"] or "unknown generation"
        if services > 1 and gen.get("service"):
            name = f"{gen['service']} {name}"
        count = len(gen["workers"])
        console.print(safe_text(f"{name} ({count} worker{'' if count == 1 else 's'}{how})", style="bold"))
        workers = gen["workers"]
        if total <= max_rows:
            shown, rest = workers, []
        else:
            notable = sorted(
                workers,
                key=lambda w: (
                    -(w["flags"]["duplicate"] + w["flags"]["interrupted"] + w["flags"]["after_stop"]),
                    w["worker"],
                ),
            )
            shown, rest = notable[: budget - 1], notable[budget - 1 :]
            shown = sorted(shown, key=lambda w: workers.index(w))
        for w in shown:
            console.print(_row(_label(w["worker"], label_width), _worker_cells(w, scale), label_width, plain=plain))
        if rest:
            console.print(_row(f"+{len(rest)} more workers", _aggregate_cells(rest, scale), label_width, "italic", plain))
    legend = Text("legend: ", style="dim")
    for glyph, style, meaning in LEGEND:
        legend.append(glyph, style=style)
        legend.append(f" {meaning}  ", style="dim")
    console.print(legend)
    _summary(data, console)


def _services(generations: list[dict]) -> int:
    """How many services a window's generations are of."""
    return len({gen.get("service") for gen in generations} - {None})


def _summary(data: dict, console: Console) -> None:
    s = data["summary"]
    services = _services(data["generations"])
    of = f" of {services} services" if services > 1 else ""
    parts = [f"{s['generations']} generation(s){of}, {s['workers']} worker(s), {s['executions']} execution(s)"]
    if s["overlap_s"]:
        parts.append(f"generations consumed together for {s['overlap_s']:.0f} s")
    parts.append(f"{s['taken_after_stop']} taken after a stop signal, {s['interrupted']} cut short")
    parts.append(
        f"duplicated side effects: {s['duplicates_in_window']} in this window, {s['duplicates_outside_window']} outside"
    )
    console.print(safe_text("; ".join(parts)))
    if s.get("concentration"):
        console.print(safe_text(s["concentration"], style="bold"))


class _Lines:
    """Collects what render_window prints, written at once by write_lines (a print per line was
    most of drawing a few hundred windows)."""

    def __init__(self, width: int, plain: bool = False) -> None:
        self.width = width
        self.plain = plain  # the console draws no colour
        self.items: list = []

    def print(self, item=None) -> None:
        self.items.append(Text("") if item is None else item)


def render_timeline(document: dict, console: Console, max_rows: int = 40) -> None:
    lines = _Lines(console.width, plain=console.color_system is None)
    for i, window in enumerate(document["windows"]):
        if i:
            lines.print()
        render_window(window, lines, max_rows)
    if lines.items:
        write_lines(console, lines.items)
