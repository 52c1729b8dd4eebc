"""The rule registry: rule definitions are data (rules/checks/*.toml), detectors are code."""

from __future__ import annotations

import importlib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from dupfind import parse_memo
from dupfind.config import Config
from dupfind.errors import DupfindError
from dupfind.findings import CAUSES, SEVERITIES

DETECTORS: dict[str, Callable] = {}
RULE_CODE = re.compile(r"^DF\d{3}$")
REQUIRED = ("code", "name", "title", "severity", "detector", "detects", "harm", "fix")


def detector(name: str) -> Callable[[Callable], Callable]:
    """Register a detector function `fn(ctx, rule) -> list[Finding]` under a name."""

    def register(fn: Callable) -> Callable:
        DETECTORS[name] = fn
        return fn

    return register


def detector_named(name: str) -> Callable:
    """The detector a rule names (its module imported on first use)."""
    found = DETECTORS.get(name)
    if found is None:
        from dupfind.detectors import MODULES

        importlib.import_module(f"dupfind.detectors.{MODULES[name]}")
        found = DETECTORS[name]
    return found


@dataclass
class Rule:
    """One rule: identity, severity, parameters, documentation and remediation."""

    code: str
    name: str
    title: str
    severity: str
    detector: str
    detects: str
    harm: str
    fix: str
    remediation: list[str] = field(default_factory=list)
    # Steps for a root cause (findings.CAUSES), before the rule's own where a finding has it.
    cause_remediation: dict[str, list[str]] = field(default_factory=dict)
    params: dict[str, Any] = field(default_factory=dict)
    enabled: bool = True
    path: str = ""

    def param(self, key: str, default: Any = None) -> Any:
        return self.params.get(key, default)

    def steps_for(self, causes: list[str]) -> list[str]:
        """The remediation steps for findings of these root causes (most frequent first): each
        cause's own steps, then the rule's."""
        steps = [step for cause in causes for step in self.cause_remediation.get(cause, [])]
        return list(dict.fromkeys([*steps, *self.remediation]))


def _rule_from(data: dict[str, Any], origin: str) -> Rule:
    missing = [k for k in REQUIRED if k not in data]
    if missing:
        raise DupfindError(f"rule file {origin} lacks the key {missing[0]!r}.")
    if not RULE_CODE.match(str(data["code"])):
        raise DupfindError(f"rule file {origin}: code {data['code']!r} is not of the form DF123.")
    if data["severity"] not in SEVERITIES:
        raise DupfindError(f"rule file {origin}: severity {data['severity']!r} is not one of {', '.join(SEVERITIES)}.")
    by_cause = data.get("cause_remediation", {})
    unknown = [cause for cause in by_cause if cause not in CAUSES]
    if unknown:
        raise DupfindError(f"rule file {origin}: cause_remediation names {unknown[0]!r}, not one of {', '.join(CAUSES)}.")
    return Rule(
        code=data["code"], name=data["name"], title=data["title"], severity=data["severity"],
        detector=data["detector"], detects=data["detects"].strip(), harm=data["harm"].strip(),
        fix=data["fix"].strip(), remediation=list(data.get("remediation", [])),
        cause_remediation={cause: list(steps) for cause, steps in by_cause.items()},
        params=dict(data.get("params", {})), enabled=bool(data.get("enabled", True)), path=origin,
    )


def load_rules(config: Config, extra_dir: Path | None = None, disabled: tuple[str, ...] = (), overrides: dict[str, dict] | None = None) -> list[Rule]:
    """Shipped rules, then rules from `--rules DIR`, then config/CLI overrides and disables."""
    from dupfind.detectors import MODULES

    dirs = [Path(config.rules_dir or "") / "checks"]
    from dupfind.config import default_rules_dir

    base = default_rules_dir() / "checks"
    if dirs[0] != base:
        dirs.insert(0, base)
    if extra_dir is not None and (extra_dir / "checks") not in dirs:
        dirs.append(extra_dir / "checks")
    rules: dict[str, Rule] = {}
    for directory in dirs:
        if not directory.is_dir():
            continue
        for path in sorted(directory.glob("*.toml")):
            try:
                data = parse_memo.toml_text(path.read_text())
            except (parse_memo.TomlError, UnicodeDecodeError, OSError) as exc:
                raise DupfindError(f"rule file {path} cannot be read: {exc}.") from None
            rule = _rule_from(data, str(path))
            if rule.detector not in MODULES:
                raise DupfindError(f"rule file {path}: no detector named {rule.detector!r}.")
            rules[rule.code] = rule
    parse_memo.flush()
    settings = dict(config.rules)
    for code in settings.pop("disable", []):
        disabled = (*disabled, code)
    for code, values in {**settings, **(overrides or {})}.items():
        rule = rules.get(code) or next((r for r in rules.values() if r.name == code), None)
        if rule is None:
            raise DupfindError(f"config [rules.{code}] names no known rule.")
        if not isinstance(values, dict):
            raise DupfindError(f"config [rules.{code}] must be a table of settings.")
        for key, value in values.items():
            if key == "enabled":
                rule.enabled = bool(value)
            elif key == "severity":
                if value not in SEVERITIES:
                    raise DupfindError(f"config rules.{code}.severity {value!r} is not one of {', '.join(SEVERITIES)}.")
                rule.severity = value
            elif key in rule.params:
                rule.params[key] = value
            else:
                raise DupfindError(f"config rules.{code}.{key} is not a parameter of {rule.code} (known: {', '.join(sorted(rule.params)) or 'none'}).")
    for code in disabled:
        rule = rules.get(code) or next((r for r in rules.values() if r.name == code), None)
        if rule is None:
            raise DupfindError(f"--disable {code}: no such rule.")
        rule.enabled = False
    return [rules[c] for c in sorted(rules)]
