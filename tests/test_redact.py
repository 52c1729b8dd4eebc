"""Redaction: personal data and secrets are masked, correlation ids and ordinary log text are not."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta, timezone

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dupfind.redact import Redactor

# (log text, the sensitive value in it, the label it must become)
SENSITIVE = [
    ("sending confirmation to maria.gonzalez+orders@example.co.uk via sendgrid", "maria.gonzalez+orders@example.co.uk",
     "email"),
    ("rendered for John Smith <j.smith@example.org>", "j.smith@example.org", "email"),
    ("sms queued for +1 (415) 555-0134", "+1 (415) 555-0134", "phone"),
    ("sms queued for +4915112345678 (DE mobile)", "+4915112345678", "phone"),
    ("call back on +44 20 7946 0958 before 18:00", "+44 20 7946 0958", "phone"),
    ("customer phone (415) 555-0134 on file", "(415) 555-0134", "phone"),
    ("Festnetz 030 1234 5678", "030 1234 5678", "phone"),
    ("Authorization: Bearer eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiI0MTU1NTUwMTM0In0.kX9b2Qm7Zr1c4Tt8Vw3yLp0sHd6Fj5Gn",
     "eyJhbGciOiJSUzI1NiJ9", "token"),
    ("token eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0In0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U x",
     "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9", "token"),
    ("retrying with api_key=sk_live_51HxYzAbCdEfGhIjKlMnOpQr", "sk_live_51HxYzAbCdEfGhIjKlMnOpQr", "token"),
    ("aws key AKIAIOSFODNN7EXAMPLE rejected", "AKIAIOSFODNN7EXAMPLE", "token"),
    ("using 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 for sendgrid",
     "SG.ngeVfQFYQlKU0ufo8x5d1A", "token"),
    ("clone with ghp_16C7e42F292c6912E7710c838347Ae178B4a failed", "ghp_16C7e42F292c6912E7710c838347Ae178B4a", "token"),
    ('{"password": "hunter2-correct-horse"}', "hunter2-correct-horse", "token"),
    ("client 203.0.113.57 connected", "203.0.113.57", "ip"),
    ("relay 198.51.100.23:587 timed out", "198.51.100.23", "ip"),
    ("from 2001:db8:85a3::8a2e:370:7334 via proxy", "2001:db8:85a3::8a2e:370:7334", "ip"),
    ("paid with 4111 1111 1111 1111 exp 12/29", "4111 1111 1111 1111", "card"),
    ("card=4242-4242-4242-4242 declined", "4242-4242-4242-4242", "card"),
    ("amex 378282246310005 ok", "378282246310005", "card"),
]

# Ordinary log text and identifiers that merely look numeric or address-like: never touched.
ORDINARY = [
    "job 7c9e6679-7425-40de-944b-e07fc1f90ae7 attempt 2",
    "event 1791234567890123456 published",  # a snowflake id (19 digits, not a card prefix)
    "order 4514710497465076 confirmed",  # 16 digits that fail the Luhn check
    "epoch_ms=1784627207123 epoch_us=1784627207123456",
    "2026-03-14T09:12:03.118Z 2026-03-14 09:12:03,118 09:12:33.541",
    "rollout of notifier v3.10.7 finished, image registry.internal/notifier:v3.10.7",
    "duration_ms=87032 took 1.5 s, visibility timeout 30 s, 5 retries",
    "POST /v1/orders/ord_4835922/confirm 202 41ms",
    "sendgrid message 14c5d75ce93.dfd.64b469.filter0001.16648.5515E0B88 accepted",
    "celery task 063d702b-2419-4428-986c-b12208e49c45 succeeded in 0.31s",
    "trace 4bf92f3577b34da6a3ce929d0e0e4736 span 00f067aa0ba902b7",
    "Twilio SM6d68c59e71484ed9a1b2c3d4e5f6a7b8 queued",
    "Amazon order 112-4567890-1234567 shipped",
    "mac 00:1a:2b:3c:4d:5e, version 1.2.3, pid 4412",
]


@pytest.mark.parametrize("text,value,kind", SENSITIVE, ids=[s[2] + ":" + s[1][:18] for s in SENSITIVE])
def test_sensitive_values_are_masked(text, value, kind):
    redactor = Redactor()
    out = redactor.text(text)
    assert value not in out
    assert f"[redacted {kind}]" in out
    assert value in redactor.masked[kind] or any(value in v for v in redactor.masked[kind])


@pytest.mark.parametrize("text", ORDINARY)
def test_ordinary_text_and_ids_are_untouched(text):
    redactor = Redactor()
    assert redactor.text(text) == text
    assert redactor.summary() is None


def test_the_words_around_a_masked_value_stay():
    out = Redactor().text("Authorization: Bearer abcdefghijklmnop1234 for user 4155550134")
    assert out == "Authorization: [redacted token] for user 4155550134"
    out = Redactor().text("relay 198.51.100.23:587; api_key=sk_live_51HxYzAbCdEfGhIjKlMnOpQr still waiting")
    assert out == "relay [redacted ip]:587; api_key=[redacted token] still waiting"


def test_correlation_ids_that_look_like_personal_data_are_protected():
    table = pl.DataFrame({
        "order_id": ["4514710497465075", "4313721590109281"],  # Luhn-valid, card-like prefixes
        "worker_id": ["celery@ip-10-0-3-17.eu-west-1.compute.internal", "10.0.7.42"],
        "user_id": ["4155550134", None],
        "idempotency_key": ["order:4514710497465075:confirmation", None],
        "message": ["paid with 4111 1111 1111 1111", "x"],
    })
    redactor = Redactor.for_table(table)
    text = ("order 4514710497465075 by celery@ip-10-0-3-17.eu-west-1.compute.internal on 10.0.7.42, "
            "card 4111 1111 1111 1111, order_id=4313721590109281, key order:4514710497465075:confirmation.")
    out = redactor.text(text)
    assert "4514710497465075" in out and "4313721590109281" in out
    assert "order:4514710497465075:confirmation" in out
    assert "celery@ip-10-0-3-17.eu-west-1.compute.internal" in out and "10.0.7.42" in out
    assert "4111 1111 1111 1111" not in out and "[redacted card]" in out
    # Without the table's ids, the same text loses them: the protection is what keeps them.
    bare = Redactor().text(text)
    assert "4514710497465075" not in bare and "10.0.7.42" not in bare


def test_messages_are_not_protected_only_id_columns():
    table = pl.DataFrame({"order_id": ["ord_1"], "message": ["to maria@example.com"]})
    assert Redactor.for_table(table).text("to maria@example.com") == "to [redacted email]"


def test_tree_redacts_values_not_keys():
    doc = {"email": "maria@example.com", "nested": [{"ip": "203.0.113.9", "n": 3}], "ok": True}
    out = Redactor().tree(doc)
    assert out == {"email": "[redacted email]", "nested": [{"ip": "[redacted ip]", "n": 3}], "ok": True}


def test_summary_counts_distinct_values():
    redactor = Redactor()
    for _ in range(3):
        redactor.text("to maria@example.com and jo@example.org from 203.0.113.9")
    assert redactor.summary().startswith("masked 2 e-mail addresses, 1 IP address")


@settings(max_examples=200, deadline=None)
@given(st.uuids(), st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2060, 1, 1)),
       st.integers(min_value=1, max_value=10**9), st.integers(min_value=0, max_value=999_999))
def test_generated_ids_and_timestamps_survive(job: uuid.UUID, when: datetime, attempt: int, micros: int):
    ts = when.replace(tzinfo=timezone.utc) + timedelta(microseconds=micros)
    epoch_ms = int(ts.timestamp() * 1000)
    text = (f"{ts.isoformat()} job_id={job} hex={job.hex} attempt={attempt} ts_ms={epoch_ms} "
            f"at {ts.strftime('%Y-%m-%d %H:%M:%S,%f')[:-3]} took {attempt / 1000:.3f}s")
    assert Redactor().text(text) == text


def test_protected_ids_given_as_a_function_are_read_once_and_only_when_a_text_needs_them():
    calls = []

    def ids():
        calls.append(1)
        return ["+44 20 7946 0958"]

    redactor = Redactor(ids)
    assert redactor.text("job_started on worker-3, attempt 2") == "job_started on worker-3, attempt 2"
    assert calls == []  # nothing there could be masked: the ids were not needed
    assert redactor.text("call +44 20 7946 0958 or +44 20 7946 0959") == "call +44 20 7946 0958 or [redacted phone]"
    assert redactor.text("again +44 20 7946 0958") == "again +44 20 7946 0958"
    assert calls == [1]


def test_a_fresh_copy_masks_alike_and_its_masked_values_count_once_added():
    """A part of a report drawn apart (the ticket `analyze` keeps) is masked by a fresh copy of the
    redactor: the same protected ids, read once for both, and nothing masked yet; once its masked
    values are added, the note is what one redactor drawing everything would say."""
    calls = []

    def ids():
        calls.append(1)
        return ["+44 20 7946 0958"]

    texts = ["call +44 20 7946 0958 or +44 20 7946 0959", "to maria@example.com", "from 203.0.113.9 to maria@example.com"]
    whole = Redactor(ids)
    expected = [whole.text(t) for t in texts]
    calls.clear()
    live = Redactor(ids)
    part = live.fresh()
    assert [part.text(t) for t in texts[:2]] == expected[:2] and live.masked == {}
    assert live.text(texts[2]) == expected[2]
    assert calls == [1]  # the copy read the ids; the redactor it was made from uses them
    live.add_masked(part.masked_lists())
    assert part.masked_lists() == {"email": ["maria@example.com"], "phone": ["+44 20 7946 0959"]}
    assert live.summary() == whole.summary() == "masked 1 phone number, 1 IP address, 1 e-mail address " \
        "(distinct values; --no-redact keeps them)"
