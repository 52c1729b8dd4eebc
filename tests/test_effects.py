"""Side-effect requests: which records are requests, which are their results, and each outcome."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from dupfind.effects import _sequence_columns, side_effect_requests

T0 = datetime(2026, 3, 2, 14, 0, tzinfo=UTC)
TEXT = ("name", "action", "status", "result", "error", "provider_idempotency", "idempotency_key", "source", "message")


def _table(rows: list[dict]) -> pl.DataFrame:
    """A correlated table of side-effect records, one a second, as dupfind holds it (text Categorical)."""
    full = [
        {"rid": i, "ts": T0 + timedelta(seconds=i), "line": i + 1, "kind": "side_effect", "action_id": 1,
         "exec_id": None, **{c: None for c in TEXT}, "source": "w.log", **row}
        for i, row in enumerate(rows)
    ]
    schema = {"rid": pl.UInt32, "ts": pl.Datetime("us", "UTC"), "line": pl.Int64, "kind": pl.String,
              "action_id": pl.Int64, "exec_id": pl.Int64, **{c: pl.String for c in TEXT}}
    frame = pl.DataFrame(full, schema=schema, orient="row")
    return frame.with_columns(pl.col("kind", *TEXT).cast(pl.Categorical))


def test_a_completion_record_after_an_open_request_is_its_result():
    table = _table([
        {"exec_id": 10, "name": "provider_request", "action": "email"},      # request 1 of exec 10
        {"exec_id": 11, "name": "provider_request", "action": "email"},      # exec 11, interleaved
        {"exec_id": 10, "name": "email_sent", "action": "email"},            # result of request 1
        {"exec_id": 10, "name": "email_sent", "action": "email"},            # a request of its own: nothing open
        {"exec_id": 11, "kind": "side_effect_result", "action": "email", "status": "504 timed out"},
        {"exec_id": 10, "name": "provider_request", "action": "sms"},        # another effect: its own run
        {"exec_id": None, "name": "provider_request", "action": "email", "status": "rejected"},  # no execution
    ])
    requests = side_effect_requests(table).sort("rid")
    assert requests.select("rid", "exec_id", "effect", "outcome", "result_rid").rows() == [
        (0, 10, "email", "success", 2),
        (1, 11, "email", "uncertain", 4),
        (3, 10, "email", "success", None),
        (5, 10, "sms", "uncertain", None),
        (6, None, "email", "rejected", None),
    ]


def test_a_result_that_names_no_side_effect_answers_the_request_before_it():
    # `provider_response status=200` logged without the request's `channel=email`: normalize names
    # its side effect `side_effect`. It answers the execution's last request, of whatever effect.
    table = _table([
        {"exec_id": 10, "name": "provider_request", "action": "email"},
        {"exec_id": 11, "name": "provider_request", "action": "push"},
        {"exec_id": 10, "kind": "side_effect_result", "name": "provider_response", "action": "side_effect", "status": "200"},
        {"exec_id": 11, "kind": "side_effect_result", "name": "provider_error", "action": "side_effect", "status": "503"},
        {"exec_id": 12, "kind": "side_effect_result", "name": "provider_response", "action": "side_effect", "status": "200"},
        {"exec_id": 12, "name": "provider_request", "action": "sms"},
    ])
    requests = side_effect_requests(table).sort("rid")
    assert requests.select("rid", "effect", "outcome", "result_rid").rows() == [
        (0, "email", "success", 2),
        (1, "push", "rejected", 3),
        (5, "sms", "uncertain", None),  # the answer before it answers no request of its own
    ]


def _reference(runs: pl.DataFrame) -> pl.DataFrame:
    """role and request_seq as a shift and a running count over each run (what _sequence_columns replaces)."""
    prev = runs.with_columns(
        prev_kind=pl.col("kind").shift(1).over("scope", "effect"),
        prev_completed=pl.col("completed_name").shift(1).over("scope", "effect"),
    )
    as_result = (
        (pl.col("kind") == "side_effect") & pl.col("completed_name")
        & (pl.col("prev_kind") == "side_effect") & ~pl.col("prev_completed").fill_null(False)
    )
    role = pl.when(as_result | (pl.col("kind") == "side_effect_result")).then(pl.lit("result")).otherwise(pl.lit("request"))
    return prev.with_columns(role=role).with_columns(
        request_seq=(pl.col("role") == "request").cast(pl.Int64).cum_sum().over("scope", "effect")
    ).select("role", "request_seq")


@settings(max_examples=200, deadline=None)
@given(st.lists(
    st.tuples(st.integers(-2, 3), st.sampled_from(["email", "sms"]), st.sampled_from(["side_effect", "side_effect_result"]),
              st.booleans()),
    max_size=40,
))
def test_sequence_columns_equal_the_per_run_shift_and_count(records):
    runs = pl.DataFrame(records, schema={"scope": pl.Int64, "effect": pl.String, "kind": pl.String, "completed_name": pl.Boolean},
                        orient="row")
    role, seq = _sequence_columns(runs)
    expected = _reference(runs)
    assert role.to_list() == expected["role"].to_list()
    assert seq.cast(pl.Int64).to_list() == expected["request_seq"].to_list()


def test_a_text_that_says_the_send_happened_answers_the_request_before_it():
    """Sidekiq's `logger.info "email sent order_id=... status=202 ..."` after `sending email via ...`:
    its first words say the send happened; its `key=value` fields are not its words."""
    table = _table([
        {"exec_id": 10, "name": "sending email via sink-mail order_id=ord_5104 to=u_2038", "action": "email"},
        {"exec_id": 10, "name": "email sent order_id=ord_5104 idempotency_key=order-shipped:ord_5104:email "
                                "status=202 duration_ms=480", "action": "email", "status": "202"},
        {"exec_id": 11, "name": "Sent email to u_2038 in 412 ms", "action": "email"},
        {"exec_id": 12, "name": "sending email via sink-mail order_id=ord_5105", "action": "email"},
        {"exec_id": 12, "name": "email not sent: recipient unsubscribed", "action": "email"},
    ])
    requests = side_effect_requests(table).sort("rid")
    assert requests.select("rid", "exec_id", "outcome", "result_rid").rows() == [
        (0, 10, "success", 1),      # not a replay (idempotency_key=), not an HTTP 480 (duration_ms=480)
        (2, 11, "success", None),   # a completion alone: the send happened
        (3, 12, "uncertain", None),  # no answer: the next line is another request, not its answer
        (4, 12, "uncertain", None),
    ]


def test_a_provider_saying_it_knew_the_key_is_still_a_replay():
    table = _table([
        {"exec_id": 10, "name": "provider_request", "action": "email"},
        {"exec_id": 10, "kind": "side_effect_result", "name": "provider_response", "action": "email",
         "status": "200", "result": "Idempotent-Replayed: true"},
        {"exec_id": 11, "name": "provider_request", "action": "email"},
        {"exec_id": 11, "kind": "side_effect_result", "name": "provider_response idempotency_key=k-1", "action": "email",
         "status": "200"},
    ])
    assert side_effect_requests(table).sort("rid")["outcome"].to_list() == ["replay", "success"]


def test_a_failure_right_after_a_request_naming_the_providers_http_error_is_its_answer():
    """BullMQ's `job failed` with the HTTP client's error, the app logging no answer of its own: the
    status the provider answered with decides (an error not done, a conflict a replay, a timeout
    uncertain); a failure after another record, or naming no status, leaves the request uncertain."""
    error = '{"type":"Error","message":"Postmark responded 503 Service Unavailable","statusCode":503}'
    table = _table([
        {"exec_id": 10, "name": "sending email", "action": "email"},
        {"exec_id": 10, "kind": "fail", "name": "job failed", "error": error},
        {"exec_id": 11, "name": "sending email", "action": "email"},
        {"exec_id": 11, "kind": "fail", "name": "job failed", "error": "AxiosError: Request failed with status code 409"},
        {"exec_id": 12, "name": "sending email", "action": "email"},
        {"exec_id": 12, "kind": "fail", "name": "job failed", "error": "httpx.HTTPStatusError: Server error '504 Gateway Timeout'"},
        {"exec_id": 13, "name": "sending email", "action": "email"},
        {"exec_id": 13, "kind": "commit", "name": "status updated"},
        {"exec_id": 13, "kind": "fail", "name": "job failed", "error": "requests.HTTPError: 500 Server Error: for url"},
        {"exec_id": 14, "name": "sending email", "action": "email"},
        {"exec_id": 14, "kind": "fail", "name": "job failed", "error": "error: relation \"notifications\" does not exist"},
        {"exec_id": 15, "name": "sending email", "action": "email"},
        {"exec_id": 15, "kind": "fail", "name": "job failed", "status": "503"},
        # Laravel's `queue:work --json`: the job released for a retry, its exception's message apart
        {"exec_id": 16, "name": "Sending email: order confirmation", "action": "email"},
        {"exec_id": 16, "kind": "retry", "name": "released_after_exception", "error": "Illuminate\\Http\\Client\\RequestException",
         "message": 'HTTP request returned status code 503:\n{"ErrorCode":701}'},
    ])
    requests = side_effect_requests(table).sort("rid")
    assert requests.select("exec_id", "outcome").rows() == [
        (10, "rejected"), (11, "replay"), (12, "uncertain"), (13, "uncertain"), (14, "uncertain"), (15, "rejected"),
        (16, "rejected"),
    ]
