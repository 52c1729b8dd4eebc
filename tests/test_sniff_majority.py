"""Format sniffing: it stops counting a preset's matches once the majority is settled, with the same verdict; lines a text format knows are no JSON document; a preset reads with another's rules."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dupfind.config import load_config
from dupfind.formats import _majority, _majority_of, _passing, sniff_format


@given(st.lists(st.booleans(), max_size=60), st.integers(0, 20))
def test_majority_of_equals_counting_every_item(results, extra):
    total = len(results) + extra  # a total may count lines the items leave out (undecoded ones)
    calls: list[bool] = []

    def test(value: bool) -> bool:
        calls.append(value)
        return value

    assert _majority_of(test, results, total) == _majority(sum(results), total)
    assert len(calls) <= len(results)


@given(st.lists(st.booleans(), min_size=1, max_size=60))
def test_passing_is_exact_whenever_it_is_a_majority(results):
    total = len(results)
    hits = _passing(lambda value: value, results, total)
    if _majority(sum(results), total):
        assert hits == sum(results)
    else:
        assert hits == -1 or (hits == sum(results) and not _majority(hits, total))


def test_a_preset_that_fails_early_is_not_tried_on_every_line():
    tried: list[int] = []
    assert not _majority_of(lambda i: tried.append(i) or i == 0, list(range(50)), 50)
    assert len(tried) == 26  # one hit, then 25 misses: at most 25 of the 50 can pass, not more than half


PRESETS = load_config(None, None, None).presets
PRESET_PATHS = sorted({path for p in PRESETS for path in (*p.detect_all, *p.detect_any, *p.detect_text, *p.detect_numbers)})
# Keys as exports write them: a preset path's segments, joined (a literal dotted key) or not, and others.
KEYS = sorted({seg for p in PRESET_PATHS for seg in p.split(".")} | set(PRESET_PATHS) | {"msg", "ctx", "x.y"})
VALUES = st.one_of(st.none(), st.text(max_size=3), st.sampled_from(["12", "-3.5", "info"]), st.integers(), st.floats())
RECORDS = st.recursive(VALUES, lambda inner: st.dictionaries(st.sampled_from(KEYS), inner, max_size=6), max_leaves=12)


@settings(deadline=None)
@given(st.dictionaries(st.sampled_from(KEYS), RECORDS, max_size=8))
def test_a_preset_ruled_out_by_the_keys_present_matches_no_such_record(record):
    """Sniffing skips a preset whose paths no top-level key can lead to (Preset.may_match): never
    one that would have matched a record."""
    heads = {key.split(".", 1)[0] for key in record}
    for preset in PRESETS:
        if preset.matches(record):
            assert preset.may_match(heads), preset.name


def test_presets_are_ruled_out_by_the_keys_of_plain_worker_lines():
    presets = PRESETS
    worker = {"ts", "level", "event", "job_id", "worker_id", "msg"}
    ruled_out = [p.name for p in presets if (p.detect_all or p.detect_any) and not p.may_match(worker)]
    assert len(ruled_out) >= len([p for p in presets if p.detect_all or p.detect_any]) // 2, ruled_out


def _nested(path: str, value) -> dict:
    head, _, rest = path.partition(".")
    return {head: _nested(rest, value) if rest else value}


def _merged(a: dict, b: dict) -> dict:
    out = dict(a)
    for key, value in b.items():
        out[key] = _merged(out[key], value) if isinstance(out.get(key), dict) and isinstance(value, dict) else value
    return out


def test_every_json_preset_stays_in_the_running_for_records_it_matches():
    """Each preset's own record, its paths nested or as literal dotted keys, matches it and is
    not ruled out."""
    tried = 0
    for preset in PRESETS:
        paths = [(p, "x") for p in (*preset.detect_all, *preset.detect_text, *preset.detect_any[:1])]
        paths += [(p, 7) for p in preset.detect_numbers]
        if not paths:
            continue
        nested: dict = {}
        for path, value in paths:
            nested = _merged(nested, _nested(path, value))
        for record in (nested, dict(paths)):
            if preset.matches(record):
                tried += 1
                assert preset.may_match({key.split(".", 1)[0] for key in record}), preset.name
    assert tried >= 10


def test_a_frameworks_long_traceback_in_the_first_block_does_not_outvote_its_lines(tmp_path):
    """Celery's CRITICAL line and a 12-line traceback among 8 of its lines (RabbitMQ's consumer
    timeout, fixtures/real/celery_rabbitmq_consumer_timeout): still Celery's log, not text."""
    from pathlib import Path

    from dupfind.ingest import ingest

    celery = [f"[2026-12-06 21:54:{20 + i:02d},{100 + i:03d}: INFO/MainProcess] Task notify.send_email[{i:08x}-"
              f"c1de-4c8e-9c4f-1b2a3c4d5e6f] received" for i in range(7)]
    traceback = [
        "[2026-12-06 21:55:20,712: CRITICAL/MainProcess] Unrecoverable error: PreconditionFailed(406, "
        "'PRECONDITION_FAILED - delivery acknowledgement on channel 1 timed out.')",
        "Traceback (most recent call last):",
        *[f'  File "/usr/lib/python3/dist-packages/celery/worker/consumer/consumer.py", line {300 + i}, in start'
          f"\n    blueprint.start(self)" for i in range(5)],
        "amqp.exceptions.PreconditionFailed: (0, 0): (406) PRECONDITION_FAILED - delivery acknowledgement timed out",
    ]
    (tmp_path / "celery-worker1.log").write_text("\n".join([*celery, *traceback]) + "\n")
    result = ingest([str(tmp_path)], load_config(cwd=Path("/")))
    assert result.files[0].format == "celery"
    assert result.files[0].records == 8 and result.files[0].parsed == result.files[0].lines


def test_a_document_preset_is_never_skipped_for_an_object_its_paths_lead_into():
    """find_document_preset skips a preset for an object holding none of the keys its record paths
    start with (presets._object_keys): every built-in path, nested or as a literal dotted key, keeps it."""
    from pathlib import Path

    from dupfind.presets import _object_keys, _segments

    presets = [p for p in load_config(cwd=Path("/")).presets if p.records]
    assert len(presets) >= 10
    for preset in presets:
        keys = _object_keys(preset.records)
        for path in preset.records:
            segments = _segments(path)
            first = segments[1] if path.startswith("[].") else segments[0]
            if not first:
                continue  # `[]`: a list at the root, never an object
            nested: dict = {}
            node = nested
            for part in first.split("."):
                node[part] = {}
                node = node[part]
            for document in (nested, {first: []}):
                assert not keys.isdisjoint(document.keys()), (preset.name, path, document)
        assert keys.isdisjoint({"ts", "level", "event", "job_id", "worker"}), preset.name


CONFIG = load_config()
_PREFIX = ("[pod/notifier-7b9c6d5f4-{pod}/notifier] 2026-12-06T10:14:0{s}.118Z  INFO 1 --- [notifier] "
           "[ntainer#0-0-C-1] c.e.n.OrderConfirmationListener          : Started job order_id=ord_{s} partition=0 offset={s}\n")
_CELERY = "[2026-11-29 07:16:0{s},412: INFO/MainProcess] Task notify.send_confirmation[5f0c2d1e-{s}] received\n"


@pytest.mark.parametrize(("text", "document"), [
    ("".join(_PREFIX.format(pod=("2kq8x", "xz4mp")[s % 2], s=s) for s in range(6)), False),  # kubectl logs --prefix
    ("".join(_CELERY.format(s=s) for s in range(6)), False),  # Celery's lines
    ('[\n  {"ts": "2026-12-06T10:14:02Z", "msg": "a"},\n  {"ts": "2026-12-06T10:14:03Z", "msg": "b"}\n]\n', True),
    ('[{"ts": "2026-12-06T10:14:02Z", "msg": "a"}, {"ts": "2026-12-06T10:14:03Z", "msg": "b"}]\n', True),
])
def test_lines_that_begin_with_a_bracket_are_a_document_only_when_no_text_format_knows_them(text, document):
    """A file of lines a text envelope or framework knows is read a block at a time; read whole as
    a JSON document first, a 72 MB `kubectl logs --prefix` export took 2.7 s more and its size in memory."""
    assert sniff_format(text.encode(), presets=CONFIG.presets).document is document


def test_a_preset_whose_rules_from_names_no_preset_with_rules_is_a_one_line_error(tmp_path):
    """A preset may read its records with another's rules (spring-boot-ecs with logstash-logback's):
    one that names a preset without rules of its own is refused in one sentence."""
    from dupfind.errors import DupfindError

    (tmp_path / "presets").mkdir()
    (tmp_path / "presets" / "mine.toml").write_text(
        'name = "mine"\ntitle = "mine"\nkind = "json"\nrules_from = "pino"\n[detect]\nall = ["ts", "msg", "who"]\n')
    with pytest.raises(DupfindError, match=r"mine\.toml: rules_from must name a preset with rules of its own\.$"):
        load_config(rules_dir=tmp_path, cwd=Path("/"))
    presets = {p.name: p for p in load_config(cwd=Path("/")).presets}
    ecs = presets["spring-boot-ecs"]
    assert ecs.rules == presets["logstash-logback"].rules and ecs.thread == ("process.thread.name",)


def test_no_grammar_is_tried_on_a_json_line(monkeypatch):
    """A grammar claims no line that begins as a JSON object (those are read as JSON): sniffing
    tries the grammars on the other lines only, and a few framework lines among JSON lines leave
    the file mostly NDJSON while a majority of them makes it the framework's log."""
    from dupfind import formats

    celery = "[2026-03-02 14:00:{:02d},120: INFO/MainProcess] Task mailer.send_email[5f1c{:04d}] received"
    json_lines = [f'{{"ts": "2026-03-02T14:00:{i:02d}Z", "event": "job_started", "job_id": "j{i}"}}' for i in range(30)]
    framework = [celery.format(i, i) for i in range(6)]
    tried: list[str] = []
    real = formats._grammar_test

    def counted(preset):
        test = real(preset)
        return lambda line: tried.append(line) or test(line)
    monkeypatch.setattr(formats, "_grammar_test", counted)
    monkeypatch.setattr(formats, "_GROUPS", {})  # the presets' tests built again, counted
    mostly_json = sniff_format(("\n".join(json_lines + framework) + "\n").encode(), presets=PRESETS)
    assert mostly_json.label.startswith("mixed (ndjson") and not mostly_json.document
    assert tried and not any(line.startswith("{") for line in tried)
    mostly_celery = sniff_format(("\n".join(framework + json_lines[:4]) + "\n").encode(), presets=PRESETS)
    assert mostly_celery.label == "celery"


def test_an_object_without_any_documents_key_asks_no_document_preset(monkeypatch):
    """A worker's JSON line holds none of the keys that lead into any preset's records (`events`,
    `hits`, `entries`...): no preset is walked for it (presets._document_keys); an export's page
    that holds one still finds its preset."""
    import dupfind.presets as presets_module
    from dupfind.presets import find_document_preset

    asked: list[str] = []
    real = presets_module.document_records
    monkeypatch.setattr(presets_module, "document_records",
                        lambda preset, document, known=False: asked.append(preset.name) or real(preset, document, known))
    line = {"ts": "2026-03-02T14:00:00Z", "level": "info", "event": "job_started", "job_id": "j1", "ctx": {"jid": "j1"}}
    assert find_document_preset(CONFIG.presets, line) is None and asked == []
    page = {"events": [{"logStreamName": "notifier/1", "timestamp": 1772460000000, "message": "job started",
                        "ingestionTime": 1772460000100}], "searchedLogStreams": []}
    found = find_document_preset(CONFIG.presets, page)
    assert found is not None and found[0].name == "cloudwatch-logs" and "cloudwatch-logs" in asked
