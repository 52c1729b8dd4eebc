"""The rule registry: every detector a rule may name is known without loading its module."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import ROOT

from dupfind.config import load_config
from dupfind.detectors import MODULES
from dupfind.errors import DupfindError
from dupfind.rules_registry import detector_named, load_rules


def test_every_detector_name_is_registered_by_the_module_named_for_it():
    # A fresh interpreter imports every detector module: each name, and the module defining its function.
    code = (
        "import importlib, json, pkgutil\n"
        "import dupfind.detectors as package\n"
        "from dupfind.rules_registry import DETECTORS\n"
        "for module in pkgutil.iter_modules(package.__path__):\n"
        "    importlib.import_module(f'dupfind.detectors.{module.name}')\n"
        "print(json.dumps({name: fn.__module__.rpartition('.')[2] for name, fn in DETECTORS.items()}))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert json.loads(proc.stdout) == MODULES
    assert all(callable(detector_named(name)) for name in MODULES)


def test_a_rule_naming_no_detector_is_an_error(tmp_path):
    checks = tmp_path / "checks"
    checks.mkdir()
    shipped = ROOT / "rules" / "checks" / "DF101.toml"
    (checks / "DF999.toml").write_text(
        shipped.read_text().replace('code = "DF101"', 'code = "DF999"').replace('"duplicate_side_effect"', '"no_such"'))
    with pytest.raises(DupfindError, match="no detector named 'no_such'"):
        load_rules(load_config(None, None, None), tmp_path, ())


def test_steps_for_a_root_cause_must_name_a_known_cause(tmp_path):
    checks = tmp_path / "checks"
    checks.mkdir()
    shipped = ROOT / "rules" / "checks" / "DF101.toml"
    text = shipped.read_text().replace('code = "DF101"', 'code = "DF998"').replace("[cause_remediation]", "[cause_remediation]\nbad_luck = [\"Try again.\"]")
    (checks / "DF998.toml").write_text(text)
    with pytest.raises(DupfindError, match="cause_remediation names 'bad_luck'"):
        load_rules(load_config(None, None, None), tmp_path, ())


def test_a_causes_steps_come_before_the_rules_own_once_each():
    [rule] = [r for r in load_rules(load_config(None, None, None), None, ()) if r.code == "DF101"]
    assert set(rule.cause_remediation) <= {"double_publish", "worker_killed", "deploy_overlap", "lease_expired",
                                           "partial_success_retry", "batch_retry", "lock_overlap", "two_consumer_groups"}
    steps = rule.steps_for(["lease_expired", "unknown", "lease_expired", "deploy_overlap"])
    assert steps == [*rule.cause_remediation["lease_expired"], *rule.cause_remediation["deploy_overlap"], *rule.remediation]
    assert rule.steps_for([]) == rule.remediation
