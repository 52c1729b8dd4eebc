"""Lines of rich Text written exactly as console.print(Group(*lines)) writes them, in a tenth of the time."""

from __future__ import annotations

from rich.console import Console
from rich.segment import Segment
from rich.text import Text

_JOINER = Text("\n")


def _fits(line: Text, width: int) -> bool:
    """A line rich would write as it is: one line, no tab to expand, no padding, within the width."""
    plain = line.plain
    return "\n" not in plain and "\t" not in plain and line.justify in (None, "default") and line.cell_len <= width


def _segments(line: Text, fits: bool, console: Console, width: int):
    if fits:
        # What Text.__rich_console__ renders for a line it leaves whole: joining moves the line's
        # own style into a span under the others.
        return _JOINER.join([line]).render(console, end=line.end)
    return (s for row in Segment.split_and_crop_lines(console.render(line, console.options), width, pad=False) for s in row)


def write_lines(console: Console, lines: list[Text]) -> None:
    """Write `lines` to the console's file, the text console.print(Group(*lines)) writes.

    Rich measures, wraps and crops every line it prints: most of drawing a timeline of a few
    thousand lines. A line that fits is rendered alone; the others go through rich, once for each
    distinct line (a timeline's legend repeats in every window)."""
    width, system = console.width, console._color_system
    strip_color = console.no_color and system is not None
    drawn: dict[tuple, str] = {}
    out: list[str] = []
    for line in lines:
        fits = _fits(line, width)
        if system is None and fits:
            # Without colour rich writes a line's segments' texts as they are: the line itself.
            out.append(line.plain + line.end)
            continue
        key = None
        if not fits:
            key = (line.plain, line.style, tuple(line.spans), line.end, line.justify, line.overflow, line.no_wrap,
                   line.tab_size)
            if key in drawn:
                out.append(drawn[key])
                continue
        segments = _segments(line, fits, console, width)
        if strip_color:
            segments = Segment.remove_color(segments)
        text = "".join(
            style.render(text, color_system=system, legacy_windows=console.legacy_windows) if style else text
            for text, style, _ in segments
        )
        if key is not None:
            drawn[key] = text
        out.append(text)
    console.file.write("".join(out))
