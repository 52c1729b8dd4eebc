"""Markdown text from untrusted log values: inert on GitHub and GitLab (no links, HTML, mentions, refs)."""

from __future__ import annotations

import re

from dupfind.render.safe import safe_str

# Backslash-escaped: what CommonMark/GFM gives a meaning inline, plus `|` (tables) and `$` (math);
# parentheses are left alone: they only matter after a `]`, which is escaped.
_SPECIAL = re.compile(r"([\\`*_{}\[\]<>#+!|~&$%])")
# GitHub and GitLab turn `@name`, `#12`, `!12`, `~label`, `%milestone`, `$12`, `&12` into references
# after Markdown is parsed, so a backslash does not stop them; an invisible word joiner does.
_REFERENCE = re.compile(r"(\\[#!~%$&])(?=\w)")
_AT = re.compile(r"@")
# Autolinks: a URL scheme or `www.` stops being a link once its `:` or `.` is escaped.
_SCHEME = re.compile(r"(?i)\b([a-z][a-z0-9+.-]{1,20}):(?=//)")
_WWW = re.compile(r"(?i)\b(www)\.")
JOINER = "\u2060"


def md(value: object, limit: int | None = 200) -> str:
    """Inline text from logs (redacted when redaction is on): it renders literally."""
    text = _SPECIAL.sub(r"\\\1", safe_str(value, limit))
    text = _REFERENCE.sub(rf"\1{JOINER}", text)
    text = _AT.sub(f"{JOINER}@{JOINER}", text)
    text = _SCHEME.sub(r"\1\\:", text)
    return _WWW.sub(r"\1\\.", text)


def code(value: object, limit: int | None = 120, cell: bool = False) -> str:
    """An inline code span holding the value exactly (a backtick in it cannot close the span);
    `cell=True` also escapes `|` so that the span can sit in a GFM table cell."""
    text = safe_str(value, limit)
    if not text:
        return "-"
    fence = "`" * (max((len(run) for run in re.findall(r"`+", text)), default=0) + 1)
    pad = " " if text[0] in "` " or text[-1] in "` " else ""
    span = f"{fence}{pad}{text}{pad}{fence}"
    return span.replace("|", "\\|") if cell else span


def table(header: list[str], rows: list[list[str]]) -> list[str]:
    """A GFM table; cells must already be Markdown-safe (md, or code with cell=True)."""
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(" --- " for _ in header) + "|"]
    lines += ["| " + " | ".join(cell if cell else " " for cell in row) + " |" for row in rows]
    return lines
