"""analyze against answer keys: synth fixtures, 20 fresh seeds per preset, and real-broker recordings.

The set of actions flagged as harmful duplicates must equal the truth exactly (no miss, no false
alarm), controls must produce no harmful finding at all, and the induced cause must be named first.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dupfind.synth import PRESETS, write_scenario

from conftest import FIXTURES
from truth_compare import compare

SYNTH = sorted(p for p in (FIXTURES / "synth").iterdir() if (p / "truth.json").is_file())
REAL = sorted(p for p in (FIXTURES / "real").iterdir() if (p / "truth.json").is_file())
SEEDS = range(2, 22)
SEED_JOBS = 24


def _check(folder: Path, primary_cause: bool = True) -> None:
    result = compare(folder, primary_cause)
    assert not result.missed and not result.false_alarms and not result.wrong_cause, result.describe()
    duplicated = sum(1 for a in result.truth["actions"] if a["duplicated"])
    if duplicated == 0:
        assert not result.report.harmful, "a control or baseline produced a harmful finding"
        assert result.report.verdict == "no_harmful_duplicates"
    else:
        assert result.report.verdict == "harmful_duplicates"


@pytest.mark.parametrize("folder", SYNTH, ids=[p.name for p in SYNTH])
def test_synth_fixture_matches_truth(folder: Path):
    _check(folder)


@pytest.mark.parametrize("folder", REAL, ids=[p.name for p in REAL])
def test_real_broker_recording_matches_truth(folder: Path):
    _check(folder, primary_cause=False)


def test_real_recordings_include_duplicates_and_controls():
    duplicated = [compare(f).flagged for f in REAL]
    assert any(duplicated) and not all(duplicated)


@pytest.mark.parametrize("preset", list(PRESETS))
def test_preset_over_seeds(preset: str, tmp_path_factory):
    """Every preset, 20 seeds: exact agreement with the simulator's truth every time."""
    controls_with_redeliveries = 0
    for seed in SEEDS:
        folder = tmp_path_factory.mktemp(f"{preset}-{seed}")
        truth = write_scenario(preset, folder, seed=seed, jobs=SEED_JOBS)
        _check(folder)
        if not truth["counters"]["duplicated_actions"] and truth["counters"]["redeliveries"]:
            controls_with_redeliveries += 1
    if "control" in preset:
        # A control must be a real test: redeliveries happened, yet nothing was duplicated.
        assert controls_with_redeliveries > 0
