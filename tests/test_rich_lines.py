"""write_lines writes what console.print(Group(*lines)) writes, for every kind of line and console."""

from __future__ import annotations

from io import StringIO

import pytest
from rich.console import Console, Group
from rich.text import Text

from dupfind.render.rich_lines import write_lines
from dupfind.render.safe import safe_str


def _lines() -> list[Text]:
    bar = Text("worker-1".ljust(12) + " ", style="italic")
    bar.append("···", style="dim").append("━━━━", style="green").append("███", style="bold red").append("   ")
    deploy = Text("deploy v2".ljust(12) + " ", style="bold blue")
    deploy.append("═══════", style="blue").append("▓▓▓", style="bold blue")
    legend = Text("legend: ", style="dim")
    for glyph, style, meaning in (("·", "dim", "alive"), ("━", "green", "executing"), ("█", "bold red", "duplicated")):
        legend.append(glyph, style=style).append(f" {meaning} " * 6, style="dim")
    return [
        Text("dupfind timeline: deploy v2 (replacing v1)", style="bold"),
        bar,
        deploy,
        Text(""),
        legend,  # longer than the width: wrapped by rich
        legend,  # the same again (drawn once, written twice)
        Text("a\tb tab", style="dim"),
        Text("two\nlines", style="yellow"),
        Text(safe_str("ワーカー\x1b[31m-東京") + " " * 10 + "━" * 8, style="green"),  # wide characters
        Text("centred", justify="center"),
        Text("x" * 40 + " trailing   "),
        Text("plain line, no style at all"),
    ]


@pytest.mark.parametrize("system", [None, "standard", "256", "truecolor"])
@pytest.mark.parametrize("width", [24, 40, 100])
def test_same_text_as_rich(system, width):
    def console() -> Console:
        return Console(file=StringIO(), width=width, force_terminal=system is not None, color_system=system,
                       highlight=False, soft_wrap=False)

    expected, written = console(), console()
    expected.print(Group(*_lines()))
    write_lines(written, _lines())
    assert written.file.getvalue() == expected.file.getvalue()
    if system is not None:
        assert "\x1b[" in written.file.getvalue()


def test_no_color_is_honoured(monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")
    expected = Console(file=StringIO(), width=60, force_terminal=True, color_system="truecolor")
    written = Console(file=StringIO(), width=60, force_terminal=True, color_system="truecolor")
    assert written.no_color
    expected.print(Group(*_lines()))
    write_lines(written, _lines())
    assert written.file.getvalue() == expected.file.getvalue()
