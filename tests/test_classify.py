"""Kinds and side-effect types remembered across blocks are the ones each block would compute."""

from __future__ import annotations

import copy
from pathlib import Path

import polars as pl

from dupfind.config import load_config
from dupfind.normalize import _classify

CONFIG = load_config(cwd=Path("/"))
KEYS = {"name": pl.String, "exit_code": pl.Int32, "action": pl.String, "provider": pl.String}


def _block(rows: list[tuple]) -> pl.DataFrame:
    return pl.DataFrame(rows, schema=KEYS, orient="row").with_row_index("line")


BLOCKS = [
    _block([("job_received", None, None, None), ("email_sent", None, None, "sendgrid"), ("worker_exit", 137, None, None)]),
    _block([("email_sent", None, None, "sendgrid"), ("provider_request", None, "SMS", "twilio"), ("job_received", None, None, None),
            ("worker_exit", 0, None, None), (None, None, None, None), ("Something Else", None, None, None)]),
    _block([("worker_exit", 137, None, None), ("provider_request", None, None, "stripe"), ("job_received", None, None, None)]),
]


def _fresh(frame: pl.DataFrame) -> pl.DataFrame:
    """_classify with a configuration that remembers nothing yet."""
    return _classify(frame, copy.deepcopy(CONFIG))


def test_later_blocks_get_what_a_fresh_classification_gives():
    config = copy.deepcopy(CONFIG)
    for block in BLOCKS:
        assert _classify(block, config).equals(_fresh(block))
    remembered = config.__dict__["_classified"][1]
    assert ("worker_exit", 137, None, None) in remembered and len(remembered) == 8
    kinds = dict(zip(BLOCKS[1]["name"], _classify(BLOCKS[1], config)["kind"]))
    assert kinds["job_received"] == "receive" and kinds["Something Else"] == "other"
    assert _classify(BLOCKS[0], config)["kind"].to_list()[2] == "worker_killed"


def test_a_changed_vocabulary_is_not_answered_from_memory():
    config = copy.deepcopy(CONFIG)
    before = _classify(BLOCKS[0], config)["kind"].to_list()
    config.kinds = {**config.kinds, "job_received": "start"}
    after = _classify(BLOCKS[0], config)["kind"].to_list()
    assert before[0] == "receive" and after[0] == "start" and after[1:] == before[1:]


def test_a_formats_configuration_is_derived_once_and_again_after_a_change():
    from dupfind.normalize import config_for_format

    config = copy.deepcopy(CONFIG)
    first = config_for_format(config, "cri+celery")
    assert config_for_format(config, "cri+celery") is first  # what it remembers of classified keys is kept
    assert config_for_format(config, "ndjson") is not first
    config.aliases = {**config.aliases, "job_id": ["job_ref", *config.aliases["job_id"]]}
    changed = config_for_format(config, "cri+celery")
    assert changed is not first and changed.aliases["job_id"][0] == "job_ref"
