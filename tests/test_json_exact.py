"""JSON numbers beyond 64 bits keep every digit (json_exact), where orjson alone makes them floats."""

from __future__ import annotations

import orjson
import pytest

from dupfind import json_exact

LONG = 190392076307650706019376100145318752112


@pytest.mark.parametrize("data", [
    b'{"job_id": 190392076307650706019376100145318752112, "attempt": 1}',
    '{"job_id":190392076307650706019376100145318752112,"attempt":1}',
    memoryview(b'[{"job_id":\n  190392076307650706019376100145318752112}]'),
])
def test_an_integer_beyond_64_bits_keeps_its_digits(data):
    value = json_exact.loads(data)
    record = value[0] if isinstance(value, list) else value
    assert record["job_id"] == LONG and isinstance(record["job_id"], int)
    assert isinstance(orjson.loads(data if not isinstance(data, memoryview) else bytes(data)), (dict, list))


@pytest.mark.parametrize(("text", "expected"), [
    (b'{"a": -99999999999999999999}', -99999999999999999999),  # below -2^63
    (b'{"a": 18446744073709551615}', 18446744073709551615),  # 2^64 - 1, which orjson reads itself
    (b'{"a": 1.5e300}', 1.5e300),
    (b'{"a": "190392076307650706019376100145318752112"}', "190392076307650706019376100145318752112"),
])
def test_other_values_are_what_orjson_reads(text, expected):
    assert json_exact.loads(text)["a"] == expected


def test_what_is_not_json_raises_as_orjson_does():
    with pytest.raises(orjson.JSONDecodeError):
        json_exact.loads(b'{"a": 190392076307650706019376100145318752112,}')


def test_a_number_beyond_a_double_is_rejected_as_orjson_rejects_it():
    assert json_exact.loads(b'{"a": ' + b"7" * 300 + b"}")["a"] == int("7" * 300)
    with pytest.raises(orjson.JSONDecodeError):  # infinity as a double: not JSON a log record holds
        json_exact.loads(b'{"a": ' + b"7" * 400 + b"}")


def test_writing_a_long_integer():
    assert json_exact.dumps({"job_id": LONG, "ok": True}) == b'{"job_id":190392076307650706019376100145318752112,"ok":true}'
    assert json_exact.dumps({"msg": "é", "n": 1}) == orjson.dumps({"msg": "é", "n": 1})


def test_a_block_is_checked_once():
    plain = b'[{"job_id": 1}, {"job_id": "190392076307650706019376100145318752112"}]'
    assert json_exact.loader(plain) is orjson.loads  # no number of 20 digits: orjson for each value
    load = json_exact.loader(b'[{"job_id": 1}, {"job_id": 190392076307650706019376100145318752112}]')
    assert load(b'{"job_id": 190392076307650706019376100145318752112}')["job_id"] == LONG
