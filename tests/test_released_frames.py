"""An analysis that releases the detectors' shared frames before the details (analyze's
keep_frames=False, what `analyze --no-cache` asks for its JSON and terminal reports) reports the
same, byte for byte, and holds none of those frames after."""

from __future__ import annotations

import orjson
import pytest

from dupfind.analysis import DETECTOR_FRAMES
from dupfind.analyze import analyze
from dupfind.ingest import ingest
from dupfind.schema import as_strings

from conftest import FIXTURES
from truth_compare import CONFIG, RULES

SCENARIOS = sorted(p.name for p in (FIXTURES / "synth").iterdir() if (p / "logs").is_dir())


def _report(folder, keep_frames: bool):
    result = ingest([str(folder / "logs")], CONFIG)
    return analyze(result, CONFIG, RULES, keep_frames=keep_frames)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_released_frames_give_the_same_report(scenario):
    kept = _report(FIXTURES / "synth" / scenario, keep_frames=True)
    released = _report(FIXTURES / "synth" / scenario, keep_frames=False)
    assert orjson.dumps(released.to_dict()) == orjson.dumps(kept.to_dict())
    assert kept.findings  # every synth scenario has findings (its evidence, details and summary compared above)
    assert not set(DETECTOR_FRAMES) & set(vars(released.context))
    # The first detector derives them: a report that kept them has them.
    assert {"side_effects", "effect_counts"} <= set(vars(kept.context))


def test_a_released_frame_is_derived_again_when_read():
    released = _report(FIXTURES / "synth" / "deploy-overlap", keep_frames=False)
    kept = _report(FIXTURES / "synth" / "deploy-overlap", keep_frames=True)
    for name in DETECTOR_FRAMES:
        # As text: each read holds its labels in a pool of its own.
        again, first = as_strings(getattr(released.context, name)), as_strings(getattr(kept.context, name))
        assert again.height > 0 and again.equals(first), name
