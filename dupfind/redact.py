"""Mask personal data and secrets in report text while keeping correlation ids intact."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import polars as pl

from dupfind.render.machine import JSONText
from dupfind.schema import ID_COLUMNS
from dupfind.textcodes import Texts

# Columns whose values are the story's identifiers: never masked, even when they look like a
# phone number, a card number or an address (an order id of 16 digits, a worker called after its IP).
PROTECTED_COLUMNS = (
    *ID_COLUMNS, "worker_id", "process_id", "deployment_id", "queue", "job_type", "lock_key", "lock_owner", "source",
)
# A cheap Rust-regex pre-filter: only id values that could ever look like personal data are
# remembered as protected, so the set stays small on big inputs.
_MAYBE_SENSITIVE = r"@|\d[\d ().-]{5,}\d|\d\.\d|::|:[0-9A-Fa-f]{1,4}:|eyJ|(?i:bearer|basic|_live_|_test_)|AKIA|ASIA"

# Issuer prefixes by card length: a Luhn-valid number is card-like only with a prefix that cards of
# its length really have (epoch milliseconds and snowflake ids start with 1 and stay readable).
_CARD_PREFIXES = {
    13: re.compile(r"4"),
    14: re.compile(r"3(?:0[0-5]|[689])"),
    15: re.compile(r"3[47]"),
    16: re.compile(r"4|5[1-5]|2(?:22[1-9]|2[3-9]\d|[3-6]\d\d|7[01]\d|720)|6(?:011|4[4-9]|5|2)|35(?:2[89]|[3-8])"),
}
_LONG_CARD_PREFIX = re.compile(r"4|5[06-9]|6|35|62")  # 17 to 19 digits: Visa, Maestro, Discover, JCB, UnionPay
_TOKEN_CHARS = r"[A-Za-z0-9._~+/=-]"


def _luhn_ok(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = ord(ch) - 48
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def _card(text: str) -> bool:
    digits = re.sub(r"[ -]", "", text)
    if not 13 <= len(digits) <= 19:
        return False
    return bool(_CARD_PREFIXES.get(len(digits), _LONG_CARD_PREFIX).match(digits)) and _luhn_ok(digits)


def _phone(text: str) -> bool:
    return 7 <= sum(ch.isdigit() for ch in text) <= 15


def _ipv6(text: str) -> bool:
    if "::" not in text and text.count(":") != 7:
        return False
    try:
        ipaddress.IPv6Address(text)
    except ValueError:
        return False
    return sum(1 for part in text.split(":") if part) >= 2


@dataclass(frozen=True)
class _Rule:
    """One kind of sensitive value: where it is in a match (group), and a check on it."""

    kind: str
    pattern: re.Pattern
    group: int | str = 0
    check: Callable[[str], bool] | None = None


# Order matters: secrets first (a bearer token may hold digits), cards before phone numbers.
RULES = (
    _Rule("token", re.compile(
        r"(?i)\b(?:api[_-]?key|apikey|x-api-key|access[_-]?token|refresh[_-]?token|auth[_-]?token|client[_-]?secret"
        r"|secret|password|passwd|pwd|token|authorization)[\"']?\s*[:=]\s*[\"']?"
        r"(?P<v>(?:(?:bearer|basic|token)\s+)?[^\s\"',;&}\]]{4,})"
    ), "v"),
    _Rule("token", re.compile(r"(?i)\b(?:bearer|basic)\s+(?P<v>" + _TOKEN_CHARS + r"{8,})"), "v"),
    _Rule("token", re.compile(r"\beyJ[A-Za-z0-9_-]{6,}\.eyJ[A-Za-z0-9_-]{6,}\.[A-Za-z0-9_-]*")),
    _Rule("token", re.compile(
        r"\b(?:(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{10,}|A[KS]IA[0-9A-Z]{16}|gh[pousr]_[A-Za-z0-9]{30,}"
        r"|github_pat_[A-Za-z0-9_]{20,}|glpat-[A-Za-z0-9_-]{20,}|xox[abprs]-[A-Za-z0-9-]{10,}"
        r"|SG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}|AIza[0-9A-Za-z_-]{35}|key-[0-9a-f]{32})\b"
    )),
    _Rule("email", re.compile(r"[A-Za-z0-9._%+-]+@(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?\.)+[A-Za-z]{2,}\b")),
    _Rule("ip", re.compile(r"(?<![\w:.])(?:[0-9A-Fa-f]{0,4}:){2,7}[0-9A-Fa-f]{0,4}(?![\w:])"), check=_ipv6),
    _Rule("ip", re.compile(
        r"(?<![\w.])(?:(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(?!\w|\.\d)"
    )),
    _Rule("card", re.compile(r"(?<![\w+-])\d(?:[ -]?\d){12,18}(?![\w-])"), check=_card),
    _Rule("phone", re.compile(
        r"(?<![\w+])\+\d{1,3}(?:[ .-]?\(?\d{1,4}\)?){2,5}(?![\w-])"  # +44 20 7946 0958, +4915112345678
        r"|(?<![\w-])\(?\d{3}\)?[ .-]\d{3}[ .-]\d{4}(?![\w-])"  # (555) 010-4477, 555.010.4477
        r"|(?<![\w-])0\d{1,4}[ -]\d{3,4}[ -]?\d{3,4}(?![\w-])"  # 030 1234 5678, 020 7946 0958
        r"|(?i:\btel:)\+?[\d().-]{6,}\d"
    ), check=_phone),
)
# Something every rule needs somewhere in the text: most strings (ids, kinds, timestamps) fail this
# one search and skip the rules.
_ANY = re.compile(
    r"@|(?i:api|secret|passw|pwd|token|authoriz|bearer|basic)|eyJ|A[KS]IA|gh[pousr]_|github_pat|glpat|xox[abprs]-"
    r"|SG\.|AIza|key-|::|(?:[0-9A-Fa-f]{1,4}:){7}|\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}|\d(?:[ -]?\d){12}"
    r"|\+\d|\(\d{3}\)|\d{3}[ .-]\d{3}[ .-]\d{4}|\b0\d{1,4}[ -]\d{3}|(?i:tel:)"
)
LABELS = {"token": "[redacted token]", "email": "[redacted email]", "ip": "[redacted ip]",
          "card": "[redacted card]", "phone": "[redacted phone]"}
# Where a value ends inside free text: ids may hold ':' or '/', so only these separate.
_TOKEN_EDGE = re.compile(r"[\s\"'`,;=()\[\]{}<>|]")
_TRAILING = ".,:;!?"


def protected_values(table: pl.DataFrame | None, business_keys: Iterable[str] = (), texts: Texts | None = None) -> pl.Series:
    """The id values of a canonical table (PROTECTED_COLUMNS and business keys) that could look
    sensitive, distinct and sorted (`texts`: the dictionary of the table's coded columns)."""
    if table is None or table.height == 0:
        return pl.Series(dtype=pl.String)
    columns = [c for c in dict.fromkeys((*PROTECTED_COLUMNS, *business_keys)) if c in table.columns]
    if not columns:
        return pl.Series(dtype=pl.String)
    # Filtered column by column: the distinct ids of every column at once are a large transient.
    kept = []
    for column in columns:
        values = table.get_column(column).drop_nulls().unique()
        values = texts.as_text(values) if texts is not None else values.cast(pl.String)
        kept.append(values.filter(values.str.contains(_MAYBE_SENSITIVE)))
    return pl.concat(kept).unique().sort()


class Redactor:
    """Masks e-mail addresses, phone numbers, tokens and keys, IP addresses and card numbers.

    Values listed as protected (the correlation ids of the input) are left alone wherever
    they occur, so `order_id=4111111111111111` or a worker named after its IP stay readable.
    """

    def __init__(self, protected: Iterable[str] | Callable[[], Iterable[str]] = ()) -> None:
        """`protected` may be a function giving the ids: it is called when a text first needs them
        (a report whose rendering is cached never does)."""
        self._ids: set[str] | None = None
        self._ids_source = protected if callable(protected) else None
        if self._ids_source is None:
            self._ids = {p for p in protected if p}
        self.masked: dict[str, set[str]] = {}
        self._cache: dict[str, str] = {}

    @property
    def protected(self) -> set[str]:
        if self._ids is None:
            self._ids = {p for p in self._ids_source() if p}
        return self._ids

    def fresh(self) -> Redactor:
        """A redactor that protects the same ids and has masked nothing yet: what one part of a
        report masks, drawn apart to be kept (render.markdown.ticket_parts), is its own."""
        return Redactor(lambda: self.protected)  # the ids worked out once, for both

    def masked_lists(self) -> dict[str, list[str]]:
        """What this redactor masked, as plain data: kind -> the distinct values, sorted."""
        return {kind: sorted(values) for kind, values in self.masked.items()}

    def add_masked(self, masked: dict[str, list[str]]) -> None:
        """Count as masked what another redactor masked (its masked_lists): the part of a report it
        drew is shown by this one."""
        for kind, values in masked.items():
            self.masked.setdefault(kind, set()).update(values)

    @classmethod
    def for_table(cls, table: pl.DataFrame | None, business_keys: Iterable[str] = (), texts: Texts | None = None) -> Redactor:
        """A redactor that protects every id value of a canonical table that could look sensitive."""
        return cls(protected_values(table, business_keys, texts).to_list())

    def _protected(self, text: str, start: int, end: int, value: str) -> bool:
        if value in self.protected:
            return True
        left = start
        while left > 0 and not _TOKEN_EDGE.match(text[left - 1]):
            left -= 1
        right = end
        while right < len(text) and not _TOKEN_EDGE.match(text[right]):
            right += 1
        token = text[left:right]
        return token in self.protected or token.rstrip(_TRAILING) in self.protected

    def _apply(self, rule: _Rule, text: str) -> str:
        def replace(match: re.Match) -> str:
            value = match.group(rule.group)
            if rule.check is not None and not rule.check(value):
                return match.group(0)
            start, end = match.span(rule.group)
            if self._protected(text, start, end, value):
                return match.group(0)
            self.masked.setdefault(rule.kind, set()).add(value)
            whole_start = match.start(0)
            return text[whole_start:start] + LABELS[rule.kind] + text[end:match.end(0)]

        return rule.pattern.sub(replace, text)

    def text(self, value: str) -> str:
        """The text with every sensitive value replaced by a label such as `[redacted email]`."""
        if not value or len(value) < 7:
            return value
        cached = self._cache.get(value)
        if cached is not None:
            return cached
        result = value
        if _ANY.search(value):
            for rule in RULES:
                result = self._apply(rule, result)
        if len(self._cache) < 200_000:
            self._cache[value] = result
        return result

    __call__ = text

    def tree(self, value: Any) -> Any:
        """A JSON-like document with every string value redacted (keys are field names: kept)."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {k: self.tree(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self.tree(v) for v in value]
        if isinstance(value, JSONText):
            return self.tree(value.value())
        return value

    def summary(self) -> str | None:
        """One line for stderr: what was masked (None when nothing was)."""
        if not self.masked:
            return None
        names = {"token": ("token or key", "tokens or keys"), "email": ("e-mail address", "e-mail addresses"),
                 "ip": ("IP address", "IP addresses"), "card": ("card number", "card numbers"),
                 "phone": ("phone number", "phone numbers")}
        counts = sorted(((len(v), k) for k, v in self.masked.items()), reverse=True)
        parts = [f"{n} {names[k][n > 1]}" for n, k in counts]
        return "masked " + ", ".join(parts) + " (distinct values; --no-redact keeps them)"
