"""Text lines read without a grammar (lineparse): a leading time and level, AWS Lambda's runtime prefixes."""

from __future__ import annotations

import pytest

from dupfind.lineparse import AWS_REQUEST_ID, PLAIN_NAME, parse_logfmt, parse_plain

RID = "6513270e-269e-4d37-b2a7-4de452e6b438"


@pytest.mark.parametrize(("line", "time", "level"), [
    ("2026-12-03 09:41:37,496 ERROR [mailer.tasks] event=db_update_failed job_id=e8b3", "2026-12-03 09:41:37,496", "ERROR"),
    ("2026-12-04T16:20:44.390Z  WARN 1 --- [billing-worker] : event=retry_scheduled job_id=inv-1", "2026-12-04T16:20:44.390Z", "WARN"),
    ("[2026-12-04 16:40:03 +0000] [INFO] event=worker_started worker=w-1", "2026-12-04 16:40:03 +0000", "INFO"),
    ("2026-12-04 16:40:05,204 event=job_received job_id=ntf-71c3", "2026-12-04 16:40:05,204", None),  # no level word
    ("2026-12-04 16:40:05,204 Errors=0 event=job_received", "2026-12-04 16:40:05,204", None),  # a key, not a level
])
def test_the_time_and_level_before_the_pairs(line, time, level):
    record = parse_logfmt(line)
    assert record["_leading_ts"] == time and record.get("_leading_level") == level


@pytest.mark.parametrize(("line", "level", "rest"), [
    (f"[INFO]\t2026-12-04T16:30:00.003Z\t{RID}\tevent=job_received job_id=x1 attempt=1", "INFO", {"event": "job_received", "job_id": "x1"}),
    (f"2026-12-04T16:30:00.003Z\t{RID}\tWARN\tevent=retry_scheduled job_id=x1", "WARN", {"event": "retry_scheduled"}),  # Node's
])
def test_a_lambda_runtime_prefix_gives_the_time_level_and_request_id(line, level, rest):
    record = parse_logfmt(line)
    assert record["_leading_ts"] == "2026-12-04T16:30:00.003Z" and record["_leading_level"] == level
    assert record[AWS_REQUEST_ID] == RID and rest.items() <= record.items()


def test_the_lambda_runtimes_timeout_line_is_a_record_named_by_its_text():
    record = parse_plain(f"2026-12-04T16:30:30.034Z {RID} Task timed out after 30.00 seconds")
    assert record == {"_leading_ts": "2026-12-04T16:30:30.034Z", AWS_REQUEST_ID: RID,
                      PLAIN_NAME: "Task timed out after 30.00 seconds", "_plain_message": "Task timed out after 30.00 seconds"}
    assert parse_plain("START RequestId: 6513270e-269e-4d37-b2a7-4de452e6b438 Version: $LATEST") is None  # its envelope's time


@pytest.mark.parametrize("line", [
    f"START RequestId: {RID} Version: $LATEST",
    f"END RequestId: {RID}",
    f"REPORT RequestId: {RID}\tDuration: 571.93 ms\tBilled Duration: 572 ms\tMemory Size: 256 MB\tMax Memory Used: 80 MB\t",
])
def test_the_lambda_runtimes_invocation_lines_name_their_request_id(line):
    """They bound the invocation on its log stream: an uncaught exception's event between them has no id."""
    record = parse_plain(line, envelope_time=True)
    assert record[AWS_REQUEST_ID] == RID and record["_plain_message"] == line.strip()
    assert AWS_REQUEST_ID not in parse_plain(f"STARTED RequestId: {RID}", envelope_time=True)
    assert AWS_REQUEST_ID not in parse_plain("[ERROR] KeyError: 'order_shipped_v2'", envelope_time=True)


@pytest.mark.parametrize(("line", "name"), [
    ("2026-07-21T10:07:07Z Shutting down gracefully, received SIGTERM", "Shutting down gracefully, received SIGTERM"),
    ("2026-07-21 10:08:00,250 WARN  [pool-1] connection pool exhausted, waiting", "connection pool exhausted, waiting"),
    ("2026-07-21 10:08:00,250 ERROR Job failed: provider timeout", "Job failed: provider timeout"),
    ("2026-12-07 10:00:01,120 INFO [ActiveJob] [OrderJob] [5d0e] Performing OrderJob", "Performing OrderJob"),
    ("2026-12-07 10:00:01,120 INFO [only brackets]", "[only brackets]"),  # no text after them: they are the text
])
def test_a_free_text_line_is_named_by_its_text_after_the_time_and_level(line, name):
    """As a JSON record's lone message is: the vocabulary's patterns read it, not its level word nor
    the bracketed context a logger puts first (its name, a thread, Rails' tags)."""
    record = parse_plain(line)
    assert record[PLAIN_NAME] == name and record["_plain_message"].endswith(name)


@pytest.mark.parametrize(("line", "name", "message", "fields"), [
    # Python logging's `%(asctime)s %(levelname)s [%(name)s] %(message)s`, the message's fields after it.
    ('2026-12-07 09:14:49,466 INFO [notifier.tasks] Email sent order_id=ord_88417 status=202 subject="Your order is confirmed"',
     "Email sent", '[notifier.tasks] Email sent order_id=ord_88417 status=202 subject="Your order is confirmed"',
     {"order_id": "ord_88417", "status": "202", "subject": "Your order is confirmed"}),
    # A field before the text, and text between fields.
    ("2026-12-07 09:14:49,466 INFO host=w-1 Sending email order_id=ord_1", "Sending email",
     "host=w-1 Sending email order_id=ord_1", {"host": "w-1"}),
    ("2026-07-21T10:00:01.120Z worker=A job_id=9381 started", "started", "worker=A job_id=9381 started",
     {"worker": "A", "job_id": "9381"}),
])
def test_the_text_beside_a_lines_fields_names_it(line, name, message, fields):
    """`2026-... INFO Email sent order_id=... status=202`: the words beside the pairs are the line's
    text, which names its kind (not `status=202`); the pairs are its fields; its message is the line
    after its time and level word."""
    record = parse_logfmt(line)
    assert record[PLAIN_NAME] == name and record["_plain_message"] == message and fields.items() <= record.items()


@pytest.mark.parametrize("line", [
    "time=2026-07-21T10:05:00.001+00:00 level=info msg=\"worker started\" event=worker_started",
    "2026-12-04 16:40:05,204 event=job_received job_id=ntf-71c3",
    "2026-12-04 16:40:05,204 INFO | event=job_received | job_id=ntf-71c3",  # separators are no text
])
def test_a_line_of_fields_only_has_no_text_of_its_own(line):
    record = parse_logfmt(line)
    assert record is not None and PLAIN_NAME not in record and "_plain_message" not in record


def test_a_line_an_envelope_times_is_named_without_its_bracketed_level():
    record = parse_plain("[ERROR] KeyError: 'order_shipped_v2'", envelope_time=True)
    assert record[PLAIN_NAME] == "KeyError: 'order_shipped_v2'" and record["_leading_level"] == "ERROR"
