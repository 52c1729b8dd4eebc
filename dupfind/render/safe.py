"""Make untrusted log text safe for the terminal: no escape sequences, no rich markup."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.text import Text

# The redaction in force while a report is rendered (see dupfind.redact); None: show as logged.
_REDACT: ContextVar[Callable[[str], str] | None] = ContextVar("dupfind_redact", default=None)


@contextmanager
def redacting(redact: Callable[[str], str] | None) -> Iterator[None]:
    """Every safe_str/safe_text inside the block also masks personal data with `redact`."""
    token = _REDACT.set(redact)
    try:
        yield
    finally:
        _REDACT.reset(token)

# C0 and C1 control characters (ESC, BEL, CSI, ...), DEL, Unicode bidi overrides, and lone
# surrogates (the bytes of a file name that is not UTF-8, as Python decodes them).
_UNSAFE = re.compile(r"[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def _escape_char(match: re.Match) -> str:
    char = match.group(0)
    if char == "\n":
        return "\\n"
    if char == "\t":
        return "\\t"
    code = ord(char)
    if 0xDC80 <= code <= 0xDCFF:  # a byte of a name that is not UTF-8 (surrogateescape)
        code -= 0xDC00
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def safe_str(value: object, limit: int | None = None) -> str:
    """Printable text: control characters shown as \\xNN escapes, optionally shortened (and redacted)."""
    text = "" if value is None else str(value)
    redact = _REDACT.get()
    if redact is not None:
        text = redact(text)
    if limit is not None and len(text) > limit:
        text = text[: limit - 1] + "…"
    return _UNSAFE.sub(_escape_char, text)


def safe_text(value: object, style: str = "", limit: int | None = None) -> Text:
    """A rich Text that renders literally: markup in log values is not interpreted."""
    from rich.text import Text

    return Text(safe_str(value, limit), style=style)
