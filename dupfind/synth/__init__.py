"""Ground-truth log simulator: deterministic incident scenarios with an answer key (`dupfind synth`)."""

from __future__ import annotations

from dupfind.synth.formats import FORMATS
from dupfind.synth.presets import PRESETS, Preset
from dupfind.synth.scenario import simulate, write_scenario


def list_presets() -> list[tuple[str, str]]:
    """(name, one-line description) for every preset, in display order."""
    return [(p.name, p.description) for p in PRESETS.values()]


__all__ = ["FORMATS", "PRESETS", "Preset", "list_presets", "simulate", "write_scenario"]
