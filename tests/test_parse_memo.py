"""The parses of TOML files kept in the cache: the same data and checks as parsing, never a stale or damaged one."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from dupfind import parse_memo
from dupfind.config import load_config
from dupfind.errors import DupfindError
from dupfind.rules_registry import load_rules


@pytest.fixture
def memo(tmp_path, monkeypatch):
    """The memo on, in an empty cache directory, with no pattern known yet."""
    root = tmp_path / "cache"
    monkeypatch.setenv("DUPFIND_CACHE_DIR", str(root))
    monkeypatch.setattr(parse_memo, "_valid", set())
    monkeypatch.setattr(parse_memo, "_pending", [])
    parse_memo.use_cache(True)
    yield root
    parse_memo.use_cache(False)


def _entries(root: Path) -> list[Path]:
    return sorted(root.glob(f"*/*{parse_memo.MEMO_SUFFIX}"))


def _compiles_counted(monkeypatch) -> list[str]:
    compiled: list[str] = []
    real = re.compile

    def counting(pattern, flags=0):
        compiled.append(pattern)
        return real(pattern, flags)

    monkeypatch.setattr(parse_memo.re, "compile", counting)
    return compiled


def test_a_kept_parse_gives_the_same_configuration_and_rules(memo, monkeypatch):
    first = load_config(None, None, None, cwd=memo.parent)
    first_rules = load_rules(first, None, ())
    kept = _entries(memo)
    # fields.toml, vocabulary.toml, every preset and every rule file
    shipped = Path(parse_memo.__file__).resolve().parent.parent / "rules"
    assert len(kept) == len(list(shipped.rglob("*.toml")))
    monkeypatch.setattr(parse_memo, "_valid", set())
    compiled = _compiles_counted(monkeypatch)
    monkeypatch.setattr(parse_memo, "_parse", lambda text: pytest.fail("parsed again"))
    second = load_config(None, None, None, cwd=memo.parent)
    assert load_rules(second, None, ()) == first_rules
    assert second.digest() == first.digest() and second.presets == first.presets
    assert compiled == []  # every pattern was known to compile
    assert [r.regex.pattern for p in second.presets for r in p.rules] == [r.pattern for p in first.presets for r in p.rules]


def test_the_memo_is_off_unless_the_command_line_turns_it_on(memo, monkeypatch):
    parse_memo.use_cache(False)
    load_config(None, None, None, cwd=memo.parent)
    assert not memo.exists()


def test_a_damaged_entry_is_removed_and_parsed_again(memo):
    text = 'name = "x"\nvalues = [1, 2.5, true]\n[table]\nkey = "(a|b)+"\n'
    assert parse_memo.toml_text(text) == tomllib.loads(text)
    parse_memo.flush()
    (entry,) = _entries(memo)
    raw = entry.read_bytes()
    entry.write_bytes(raw.replace(b"2.5", b"3.5"))
    assert parse_memo.toml_text(text) == tomllib.loads(text)  # not the damaged 3.5
    assert not entry.exists()
    parse_memo.flush()
    assert entry.read_bytes() == raw


def test_data_that_json_cannot_give_back_exactly_is_not_kept(memo):
    text = 'when = 2026-07-21T10:00:00Z\nlimit = inf\n'
    assert parse_memo.toml_text(text) == tomllib.loads(text)
    parse_memo.flush()
    assert _entries(memo) == []


def test_a_caller_changing_the_data_does_not_change_what_is_kept(memo):
    text = '[rules]\nDF101 = { enabled = false }\n'
    parse_memo.toml_text(text)["rules"]["DF101"]["enabled"] = True
    parse_memo.flush()
    assert parse_memo.toml_text(text) == tomllib.loads(text)


def test_invalid_toml_is_one_error_with_tomllibs_message(memo):
    with pytest.raises(parse_memo.TomlError) as caught:
        parse_memo.toml_text("[unclosed\n")
    with pytest.raises(tomllib.TOMLDecodeError) as expected:
        tomllib.loads("[unclosed\n")
    assert str(caught.value) == str(expected.value)


def test_a_bad_pattern_is_still_an_error_when_its_file_was_kept(memo, tmp_path, monkeypatch):
    config = tmp_path / "dupfind.toml"
    config.write_text('[vocabulary.patterns]\nstart = ["job ok", "job (started"]\n')
    with pytest.raises(DupfindError, match="invalid regular expression"):
        load_config(config, None, None)
    parse_memo.flush()
    monkeypatch.setattr(parse_memo, "_valid", set())
    monkeypatch.setattr(parse_memo, "_parse", lambda text: pytest.fail("parsed again"))
    with pytest.raises(DupfindError, match=re.escape("invalid regular expression 'job (started'")):
        load_config(config, None, None)
    assert "job (started" not in parse_memo._valid and "job ok" in parse_memo._valid


def test_only_patterns_that_compiled_are_known_valid(memo):
    parse_memo.check_regex("a+b")
    with pytest.raises(re.error):
        parse_memo.check_regex("a(")
    assert "a+b" in parse_memo._valid and "a(" not in parse_memo._valid
