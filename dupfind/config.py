"""Effective configuration: the shipped rules/ data merged with the user's dupfind.toml."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import orjson

from dupfind import parse_memo
from dupfind.errors import DupfindError
from dupfind.presets import Preset, checked_regex, load_presets, named_groups
from dupfind.schema import KINDS, TEXT_COLUMNS, alias_targets

USER_CONFIG_NAME = "dupfind.toml"
TOP_LEVEL_SECTIONS = {"aliases", "keys", "vocabulary", "ingest", "rules", "timeouts", "values"}


def default_rules_dir() -> Path:
    """The rules/ folder shipped with the package (installed) or beside it (checkout)."""
    here = Path(__file__).resolve().parent
    for candidate in (here / "_rules", here.parent / "rules"):
        if (candidate / "fields.toml").is_file():
            return candidate
    raise DupfindError("the rules/ data folder is missing from this installation of dupfind.")


# How event names are folded before vocabulary lookup (also applied, vectorised, in normalize).
EVENT_NAME_SEPARATORS = r"[\s.\-/:]+"


def normalize_event_name(text: str) -> str:
    """Fold an event name the way the vocabulary is matched: lower case, separators to `_`."""
    return re.sub(EVENT_NAME_SEPARATORS, "_", text.strip().lower()).strip("_")


@dataclass
class Config:
    """Everything that shapes ingestion and detection; hashed into cache keys."""

    aliases: dict[str, list[str]]
    kinds: dict[str, str]  # normalized exact name -> kind
    patterns: list[tuple[str, str]]  # (kind, regex), in match order
    action_patterns: list[tuple[str, str]]  # (action, regex)
    link_keys: tuple[str, ...]
    business_keys: tuple[str, ...]
    assume_tz: str = "UTC"
    max_line_bytes: int = 1 << 20
    rules: dict[str, Any] = field(default_factory=dict)
    rules_dir: Path | None = None
    sources: tuple[str, ...] = ()
    subject_kinds: dict[str, dict[str, str]] = field(default_factory=dict)  # object kind -> name -> kind
    # Kinds a record's status decides along with its name: folded name -> lower-cased status -> kind.
    status_kinds: dict[str, dict[str, str]] = field(default_factory=dict)
    presets: tuple[Preset, ...] = ()  # rules/presets/*.toml: export and log shapes recognised without configuration
    value_maps: dict[str, dict[str, str]] = field(default_factory=dict)  # column -> raw value -> value (per format)
    timeouts: dict[str, float] = field(default_factory=dict)  # queue ('' = every queue) -> visibility timeout (s)
    # A library's own lines inside any log (vocabulary.library_lines): (text it contains, regex
    # whose named groups fill canonical columns, event name), in match order.
    library_lines: tuple[tuple[str, str, str], ...] = ()

    def digest(self) -> str:
        """A stable hash of the effective configuration (for caches)."""
        payload = {
            "aliases": self.aliases, "kinds": self.kinds, "patterns": self.patterns,
            "action_patterns": self.action_patterns, "link": self.link_keys,
            "business": self.business_keys, "tz": self.assume_tz, "max": self.max_line_bytes,
            "rules": self.rules, "subjects": self.subject_kinds,
            "statuses": self.status_kinds, "presets": [repr(p) for p in self.presets], "values": self.value_maps,
            "library_lines": self.library_lines,
        }
        return hashlib.sha256(orjson.dumps(payload, option=orjson.OPT_SORT_KEYS)).hexdigest()[:16]


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as fh:
            text = fh.read().decode()
        return parse_memo.toml_text(text)
    except FileNotFoundError:
        raise DupfindError(f"config file {path} does not exist.") from None
    except (parse_memo.TomlError, UnicodeDecodeError) as exc:
        raise DupfindError(f"config file {path} is not valid TOML: {exc}.") from None
    except OSError as exc:
        raise DupfindError(f"config file {path} cannot be read: {exc.strerror}.") from None


def _string_list(value: Any, where: str) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return list(value)
    raise DupfindError(f"{where} must be a string or a list of strings.")


def _add_kind_tables(
    vocab: dict[str, Any], section: str, what: str, origin: str, into: dict[str, dict[str, str]],
    fold_key: Callable[[str], str], fold_value: Callable[[str], str],
) -> None:
    """A vocabulary section of one table per `what`, then kind = [values] (`[subjects.pod]`,
    `[statuses.platform_report]`), added to `into`: folded key -> folded value -> kind."""
    tables = vocab.get(section, {})
    if not isinstance(tables, dict) or not all(isinstance(v, dict) for v in tables.values()):
        raise DupfindError(f"{origin}: vocabulary.{section} must hold one table per {what}.")
    for key, by_kind in tables.items():
        values_of = into.setdefault(fold_key(key), {})
        for kind, values in by_kind.items():
            if kind not in KINDS:
                raise DupfindError(f"{origin}: vocabulary.{section}.{key}.{kind} is not a canonical kind.")
            for value in _string_list(values, f"{origin}: vocabulary.{section}.{key}.{kind}"):
                values_of[fold_value(value)] = kind


class _Builder:
    """Accumulates config layers; later layers extend or override earlier ones."""

    def __init__(self) -> None:
        self.aliases: dict[str, list[str]] = {}
        self.kinds: dict[str, str] = {}
        self.patterns: dict[str, list[str]] = {}
        self.action_patterns: dict[str, list[str]] = {}
        self.subject_kinds: dict[str, dict[str, str]] = {}
        self.status_kinds: dict[str, dict[str, str]] = {}
        self.value_maps: dict[str, dict[str, str]] = {}
        self.library_lines: list[tuple[str, str, str]] = []
        self.timeouts: dict[str, float] = {}
        self.link_keys: list[str] = []
        self.business_keys: list[str] = []
        self.ingest: dict[str, Any] = {}
        self.rules: dict[str, Any] = {}
        self.sources: list[str] = []

    def add_layer(self, data: dict[str, Any], origin: str, user: bool) -> None:
        self.sources.append(origin)
        unknown = set(data) - TOP_LEVEL_SECTIONS
        if unknown:
            key = sorted(unknown)[0]
            raise DupfindError(
                f"{origin}: unknown section [{key}] (expected one of {', '.join(sorted(TOP_LEVEL_SECTIONS))})."
            )
        keys = data.get("keys", {})
        if not isinstance(keys, dict):
            raise DupfindError(f"{origin}: [keys] must be a table.")
        for name in ("link", "business"):
            if name in keys:
                values = _string_list(keys[name], f"{origin}: keys.{name}")
                setattr(self, f"{name}_keys", values)
        for key in set(keys) - {"link", "business"}:
            raise DupfindError(f"{origin}: unknown key keys.{key} (expected link or business).")
        self._add_aliases(data.get("aliases", {}), origin, user)
        self._add_vocabulary(data.get("vocabulary", {}), origin)
        self._add_values(data.get("values", {}), origin)
        # The shipped vocabulary.toml has its sections at top level; user files nest them.
        ingest = data.get("ingest", {})
        for key, value in ingest.items():
            if key == "assume_tz":
                if not isinstance(value, str):
                    raise DupfindError(f"{origin}: ingest.assume_tz must be a time zone name.")
            elif key == "max_line_bytes":
                if not isinstance(value, int) or value < 64:
                    raise DupfindError(f"{origin}: ingest.max_line_bytes must be an integer >= 64.")
            else:
                raise DupfindError(f"{origin}: unknown key ingest.{key}.")
            self.ingest[key] = value
        self._add_timeouts(data.get("timeouts", {}), origin)
        rules = data.get("rules", {})
        if not isinstance(rules, dict):
            raise DupfindError(f"{origin}: [rules] must be a table.")
        for key, value in rules.items():
            if isinstance(value, dict) and isinstance(self.rules.get(key), dict):
                self.rules[key] = {**self.rules[key], **value}
            else:
                self.rules[key] = value

    def _add_timeouts(self, timeouts: Any, origin: str) -> None:
        """[timeouts] queue = seconds ("*" = every queue): known visibility timeouts."""
        if not isinstance(timeouts, dict):
            raise DupfindError(f"{origin}: [timeouts] must be a table of queue = seconds.")
        for queue, seconds in timeouts.items():
            if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or seconds <= 0:
                raise DupfindError(f"{origin}: timeouts.{queue} must be a positive number of seconds.")
            self.timeouts["" if queue == "*" else queue] = float(seconds)

    def _add_aliases(self, aliases: Any, origin: str, user: bool) -> None:
        if not isinstance(aliases, dict):
            raise DupfindError(f"{origin}: [aliases] must be a table.")
        targets = alias_targets(tuple(self.business_keys))
        for column, paths in aliases.items():
            if column not in targets:
                raise DupfindError(
                    f"{origin}: aliases.{column} is not a canonical column "
                    f"(add it to keys.business to make it a business key)."
                )
            values = _string_list(paths, f"{origin}: aliases.{column}")
            existing = self.aliases.get(column, [])
            # User aliases take priority over the shipped ones.
            merged = values + [p for p in existing if p not in values] if user else existing + values
            self.aliases[column] = merged

    def _add_values(self, values: Any, origin: str) -> None:
        """[values.<column>]: raw values renamed (pino's numeric levels: 30 = "info")."""
        if not isinstance(values, dict) or not all(isinstance(v, dict) for v in values.values()):
            raise DupfindError(f"{origin}: [values] must hold one table per column, e.g. [values.level].")
        targets = alias_targets(tuple(self.business_keys))
        for column, mapping in values.items():
            if column not in targets:
                raise DupfindError(f"{origin}: values.{column} is not a canonical column.")
            self.value_maps.setdefault(column, {}).update({str(k): str(v) for k, v in mapping.items()})

    def _add_vocabulary(self, vocab: Any, origin: str) -> None:
        if not isinstance(vocab, dict):
            raise DupfindError(f"{origin}: [vocabulary] must be a table.")
        for key in set(vocab) - {"kinds", "patterns", "side_effect_actions", "subjects", "statuses", "library_lines"}:
            raise DupfindError(f"{origin}: unknown key vocabulary.{key}.")
        self._add_library_lines(vocab.get("library_lines", []), origin)
        for kind, names in vocab.get("kinds", {}).items():
            if kind not in KINDS:
                raise DupfindError(f"{origin}: vocabulary.kinds.{kind} is not a canonical kind.")
            for name in _string_list(names, f"{origin}: vocabulary.kinds.{kind}"):
                self.kinds[normalize_event_name(name)] = kind
        for kind, regexes in vocab.get("patterns", {}).items():
            if kind not in KINDS:
                raise DupfindError(f"{origin}: vocabulary.patterns.{kind} is not a canonical kind.")
            where = f"{origin}: vocabulary.patterns.{kind}"
            added = [checked_regex(r, where) for r in _string_list(regexes, where)]
            self.patterns[kind] = added + [r for r in self.patterns.get(kind, []) if r not in added]
        for action, regexes in vocab.get("side_effect_actions", {}).items():
            where = f"{origin}: vocabulary.side_effect_actions.{action}"
            added = [checked_regex(r, where) for r in _string_list(regexes, where)]
            self.action_patterns[action] = added + self.action_patterns.get(action, [])
        _add_kind_tables(vocab, "subjects", "object kind", origin, self.subject_kinds, str.lower, normalize_event_name)
        _add_kind_tables(
            vocab, "statuses", "event name", origin, self.status_kinds, normalize_event_name, lambda s: s.strip().lower(),
        )

    def _add_library_lines(self, items: Any, origin: str) -> None:
        """`[[library_lines]]`: contains = text, match = regex (named groups: canonical text
        columns), event = the name the line is classified by; a layer's lines before earlier ones."""
        where = f"{origin}: vocabulary.library_lines"
        if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
            raise DupfindError(f"{where} must be a list of tables.")
        added = []
        for item in items:
            unknown = set(item) - {"contains", "match", "event"}
            if unknown:
                raise DupfindError(f"{where}: unknown key {min(unknown)!r}.")
            contains, event = item.get("contains"), item.get("event")
            if not isinstance(contains, str) or not contains or not isinstance(event, str) or not event.strip():
                raise DupfindError(f"{where}: each needs a non-empty contains and event.")
            regex = checked_regex(item.get("match"), where)
            for group in named_groups(regex):
                if group not in TEXT_COLUMNS:
                    raise DupfindError(f"{where}: group {group!r} is not a canonical text column.")
            added.append((contains, regex, event))
        self.library_lines = added + [line for line in self.library_lines if line not in added]

    def build(self, rules_dir: Path, presets: tuple[Preset, ...] = ()) -> Config:
        tz = self.ingest.get("assume_tz", "UTC")
        try:
            ZoneInfo(tz)
        except (ZoneInfoNotFoundError, ValueError):
            raise DupfindError(f"unknown time zone {tz!r} for --assume-tz / ingest.assume_tz.") from None
        unknown_links = set(self.link_keys) - set(alias_targets(tuple(self.business_keys)))
        if unknown_links:
            raise DupfindError(f"keys.link names an unknown column {sorted(unknown_links)[0]!r}.")
        return Config(
            aliases=self.aliases,
            kinds=self.kinds,
            patterns=[(k, r) for k, rs in self.patterns.items() for r in rs],
            action_patterns=[(a, r) for a, rs in self.action_patterns.items() for r in rs],
            link_keys=tuple(self.link_keys),
            business_keys=tuple(self.business_keys),
            assume_tz=tz,
            max_line_bytes=self.ingest.get("max_line_bytes", 1 << 20),
            rules=self.rules,
            rules_dir=rules_dir,
            sources=tuple(self.sources),
            subject_kinds=self.subject_kinds,
            status_kinds=self.status_kinds,
            presets=presets,
            value_maps=self.value_maps,
            timeouts=self.timeouts,
            library_lines=tuple(self.library_lines),
        )


def load_config(
    config_file: Path | None = None,
    rules_dir: Path | None = None,
    assume_tz: str | None = None,
    cwd: Path | None = None,
) -> Config:
    """Shipped rules, then `--rules DIR`, then `--config FILE` or ./dupfind.toml, then flags."""
    base = default_rules_dir()
    builder = _Builder()
    for directory in ([base] if rules_dir is None else [base, rules_dir]):
        if not directory.is_dir():
            raise DupfindError(f"rules folder {directory} does not exist.")
        fields = directory / "fields.toml"
        if fields.is_file():
            builder.add_layer(_read_toml(fields), str(fields), user=directory != base)
        vocab = directory / "vocabulary.toml"
        if vocab.is_file():
            data = _read_toml(vocab)
            builder.add_layer({"vocabulary": data}, str(vocab), user=directory != base)
    if config_file is None:
        found = (cwd or Path.cwd()) / USER_CONFIG_NAME
        config_file = found if found.is_file() else None
    if config_file is not None:
        builder.add_layer(_read_toml(config_file), str(config_file), user=True)
    if assume_tz is not None:
        builder.ingest["assume_tz"] = assume_tz
    folders = [base] if rules_dir is None else [base, rules_dir]
    presets = load_presets(folders, alias_targets(tuple(builder.business_keys)))
    config = builder.build(rules_dir or base, presets)
    parse_memo.flush()  # after every pattern of these files was checked
    return config
