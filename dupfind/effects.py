"""Side effects: which provider requests really happened, and how sure we are of each."""

from __future__ import annotations

import polars as pl

from dupfind import schema
from dupfind.lineparse import LEVEL_WORDS, PAIR_PATTERN
from dupfind.textcodes import Texts

# How a provider request ended, from its own status or the response that followed it.
#   success  - the provider did it (counts, certain)
#   uncertain - timed out (incl. 504) or no answer logged (may have happened)
#   replay   - the provider recognised an idempotency key and did nothing (does not count)
#   rejected - the provider answered with an error (4xx/5xx other than 504): not done
# (An idempotency key named in the text is not the provider saying it knew it: `idempotent`, not
# `idempotency_key=...`.)
_REPLAY = r"replay|idempotent|idempotency[_ -]?(?:hit|match|conflict)|already[_ ]?(?:processed|sent|exists)|duplicate[_ ]?request|\b409\b"
_TIMEOUT = r"time[d_ ]?out|timeout|deadline|\b504\b|\b408\b|econnreset|connection reset"
# An error answer means the provider did not do it; only silence or a timeout is uncertain.
_REJECTED = r"reject|invalid|denied|bounce|unauthori[sz]ed|forbidden|unavailable|\b[45]\d\d\b|error|fail"
_SUCCESS = r"\bok\b|accept|sent|success|deliver|\b20\d\b|queued|done|complete|captured|created|deducted|charged"
# Names that say the side effect already happened (not merely "sending"): `email_sent`, and a
# text's first words (`email sent order_id=... status=202`, `Sent email to ...`), not `email not sent`.
_COMPLETED_NAME = (r"(?:sent|delivered|deducted|decremented|charged|captured|created|executed|published)$"
                   r"|^(?:[\w-]+ ){0,2}(?:sent|delivered|deducted|decremented|charged|captured)\b")
_NOT_COMPLETED = r"\bnot[ _](?:sent|delivered|deducted|decremented|charged|captured|created|executed|published)\b"

# A line's level word before its text (a free-text line's message keeps it).
_LEVEL_WORD = rf"^\s*\[?(?i:{LEVEL_WORDS})\]?(?:\s+|$)"
# A failure's status and error (lower-cased) that name the HTTP status a provider answered with: its
# status field (`status=503`), an HTTP client's error (`"statusCode":503`, `Request failed with status
# code 503`, `503 Server Error: ...`, httpx's `Server error '503 Service Unavailable'`, `Postmark
# responded 503`).
_HTTP_ERROR_ANSWERS = (
    r"^([45]\d\d)\b",
    r"(?:status|code|responded(?: with)?|returned|http(?:/[\d.]+)?)[\"':=\s]{0,3}([45]\d\d)\b",
    r"\b([45]\d\d) (?:server|client) error\b",
    r"\berror\W{1,3}([45]\d\d)\b",
    # Ruby's Net::SMTP errors name the SMTP reply (`Net::SMTPServerBusy (451 4.7.1 ...)`): 4xx and
    # 5xx replies refuse the message, as an HTTP error does.
    r"net::smtp\w+\W{1,3}([45]\d\d)\b",
)
_NO_ANSWER = r"\b(?:net::)?readtimeout\b|\bread timed? ?out\b|\bsocket timeout\b"

# Sends logged when they ended, whatever the outcome: ActionMailer's `Delivered mail <id>` also
# when the SMTP server refused the message (Net::SMTPServerBusy: not sent) or did not answer
# (Net::ReadTimeout: maybe sent), the error then raised in the job. For these the failure right
# after says how the send ended; for other completion names it is about what came after.
ENDED_EITHER_WAY = ("mail_delivered",)

COUNTED = ("success", "uncertain")
# The confidences of a duplicate that count as harmful (duplicate_effects' `confidence`).
HARMFUL = ("certain", "likely")
# The table's columns side_effect_requests reads.
EFFECT_RECORD_COLUMNS = ("rid", "ts", "source", "line", "kind", "name", "action", "status", "result", "error",
                         "provider_idempotency", "action_id", "exec_id", "idempotency_key")
# What readers of the requests use (the rest of the table's columns only made the frame, and its
# cached copy, several times larger); idempotency_key names the key a repeated request reused.
REQUEST_COLUMNS = ("rid", "ts", "source", "line", "action_id", "exec_id", "effect", "outcome", "provider_protected",
                   "result_rid", "result_ts", "idempotency_key")


def _classify(text: pl.Expr) -> pl.Expr:
    lowered = text.cast(pl.String).str.to_lowercase()
    return (
        pl.when(lowered.str.contains(_REPLAY)).then(pl.lit("replay"))
        .when(lowered.str.contains(_TIMEOUT)).then(pl.lit("uncertain"))
        .when(lowered.str.contains(_REJECTED)).then(pl.lit("rejected"))
        .when(lowered.str.contains(_SUCCESS)).then(pl.lit("success"))
    )


def _outcomes(frame: pl.DataFrame, text: pl.Expr) -> pl.Series:
    """_classify of `text` on each row of `frame`, its regexes run once per distinct text (a few
    dozen statuses and names, not a row each)."""
    texts = frame.select(text.alias("text")).to_series()
    distinct = texts.unique()
    return texts.replace_strict(distinct, pl.select(_classify(pl.lit(distinct))).to_series(), return_dtype=pl.String)


def side_effect_requests(table: pl.DataFrame, texts: Texts | None = None) -> pl.DataFrame:
    """One row per side-effect request, with `outcome` in success|uncertain|replay|rejected.

    A completion record ("email_sent") right after a request record ("provider_request") of the
    same execution and type is that request's result, not a second side effect.
    """
    # The columns read below, before the rows are taken: a fifth of the table's rows are side-effect
    # records, and all its ~45 columns filtered then sorted held 0.3 GB more at 5M lines.
    effects = table.select(c for c in EFFECT_RECORD_COLUMNS if c in table.columns).filter(
        pl.col("kind").is_in(["side_effect", "side_effect_result"]) & pl.col("action_id").is_not_null()
    ).sort("ts", "source", "line")
    if effects.height == 0:
        return _request_columns(effects.with_columns(
            outcome=pl.lit(None, dtype=pl.String), effect=pl.lit(None, dtype=pl.String),
            provider_protected=pl.lit(None, dtype=pl.Boolean),
            result_rid=pl.lit(None, dtype=effects.schema["rid"]), result_ts=pl.lit(None, dtype=effects.schema["ts"]),
        ))
    # The execution, else (records outside any execution) the action: one integer, negative for actions.
    scope = pl.coalesce(pl.col("exec_id").cast(pl.Int64), -1 - pl.col("action_id").cast(pl.Int64))
    effects = effects.with_columns(scope=scope, name=_name_or_text(table, effects, texts))
    name = pl.col("name").fill_null("").str.to_lowercase()
    effects = effects.with_columns(_effect_names(effects), completed_name=name.str.contains(_COMPLETED_NAME) & ~name.str.contains(_NOT_COMPLETED))
    effects = effects.with_columns(_sequence_columns(effects))
    own = pl.concat_str([pl.col("status").fill_null(""), pl.col("result").fill_null("")], separator=" ")
    # A name that is a line's text keeps its `key=value` fields, read already (`duration_ms=480` is
    # no HTTP 480, `idempotency_key=...` no replay).
    words = pl.col("name").fill_null("").str.replace_all(PAIR_PATTERN, "")
    result_text = pl.concat_str(
        [pl.col("status").fill_null(""), pl.col("result").fill_null(""), words, pl.col("error").fill_null("")],
        separator=" ",
    )
    results = effects.filter((pl.col("role") == "result") & (pl.col("request_seq") > 0))
    results = (
        results.with_columns(result_outcome=_outcomes(results, result_text).fill_null("success"))
        .group_by("scope", "effect", "request_seq")
        .agg(
            pl.col("result_outcome").first(),
            pl.col("rid").first().alias("result_rid"),
            pl.col("ts").first().alias("result_ts"),
        )
    )
    requests = effects.filter(pl.col("role") == "request")
    requests = requests.with_columns(own_outcome=_outcomes(requests, own))
    requests = requests.join(results, on=["scope", "effect", "request_seq"], how="left", maintain_order="left")
    requests = requests.join(_failed_answers(table, texts), on="rid", how="left", maintain_order="left")
    either_way = pl.col("name").is_in(ENDED_EITHER_WAY)
    outcome = pl.coalesce(
        pl.col("result_outcome"),
        pl.when(pl.col("own_outcome").is_not_null()).then(pl.col("own_outcome")),
        pl.when(either_way).then(pl.col("failed_answer")),
        pl.when(pl.col("completed_name")).then(pl.lit("success")),
        pl.col("failed_answer"),
        pl.lit("uncertain"),
    )
    protected = ~pl.col("provider_idempotency").cast(pl.String).fill_null("").str.to_lowercase().str.strip_chars().is_in(
        ["", "false", "0", "no", "none", "null", "off"]
    )
    return _request_columns(requests.with_columns(outcome=outcome, provider_protected=protected))


def _name_or_text(table: pl.DataFrame, effects: pl.DataFrame, texts: Texts | None) -> pl.Series:
    """Each side-effect record's name, else its line's text without its level word and its
    `key=value` fields (a free-text or logfmt line's `INFO Email sent order_id=... status=200` has
    no name: `Email sent` says what it is)."""
    name = effects["name"].cast(pl.String)
    if not name.null_count() or "message" not in table.columns:
        return name
    missing = name.is_null()
    said = pl.DataFrame([table["message"].gather(effects["rid"].filter(missing))])  # a rid is its row's position
    if texts is not None:
        said = texts.decoded(said, "message")
    text = said["message"].cast(pl.String).str.replace(_LEVEL_WORD, "").str.replace_all(PAIR_PATTERN, "").str.strip_chars()
    return name.scatter(missing.arg_true(), text)


def _failed_answers(table: pl.DataFrame, texts: Texts | None = None) -> pl.DataFrame:
    """rid of each side-effect request the next record of its execution is a failure or a retry
    naming the HTTP status the provider answered with (a job framework's `job failed`, Laravel's
    `released_after_exception`, with its HTTP client's error, where the app logs no answer of its
    own), and the outcome that status says: a conflict a replay, a timeout uncertain, any other
    error rejected (not done). `texts`: the table's coded messages."""
    empty = pl.DataFrame(schema={"rid": table.schema["rid"], "failed_answer": pl.String})
    if "error" not in table.columns or "exec_id" not in table.columns:
        return empty
    fails = table.filter(pl.col("kind").is_in(["fail", "retry"]) & pl.col("exec_id").is_not_null())
    if not fails.height:
        return empty
    if texts is not None:
        fails = texts.decoded(fails, "message")
    said = [pl.col(c).cast(pl.String).fill_null("") for c in ("status", "error", "message") if c in fails.columns]
    text = pl.concat_str(said, separator=" ").str.to_lowercase()
    code = pl.coalesce(*[text.str.extract(pattern, 1) for pattern in _HTTP_ERROR_ANSWERS]).cast(pl.Int32)
    # An error without a status that says the answer never came (Ruby's Net::ReadTimeout): maybe done.
    code = pl.when(code.is_null() & text.str.contains(_NO_ANSWER)).then(pl.lit(504, dtype=pl.Int32)).otherwise(code)
    fails = fails.select("rid", "exec_id", code=code).filter(pl.col("code").is_not_null())
    if not fails.height:
        return empty
    runs = (
        table.filter(pl.col("exec_id").is_in(fails["exec_id"].unique().implode()))
        .select("rid", "exec_id", "ts", "source", "line", kind=pl.col("kind").cast(pl.String))
        .sort("exec_id", "ts", "source", "line")
        .with_columns(before=pl.col("rid").shift(1), before_kind=pl.col("kind").shift(1), same=pl.col("exec_id").shift(1) == pl.col("exec_id"))
    )
    answered = runs.join(fails.select("rid", "code"), on="rid").filter(pl.col("same") & (pl.col("before_kind") == "side_effect"))
    outcome = (pl.when(pl.col("code") == 409).then(pl.lit("replay"))
               .when(pl.col("code").is_in([408, 504])).then(pl.lit("uncertain")).otherwise(pl.lit("rejected")))
    return answered.select(rid=pl.col("before").cast(table.schema["rid"]), failed_answer=outcome).unique("rid", keep="first")


def _effect_names(effects: pl.DataFrame) -> pl.Series:
    """Each record's side effect (its `action`; `side_effect` where normalize found none). A result
    that names none (`provider_response status=200` after `provider_request channel=email`) is
    the result of the request before it in its scope, and takes that request's: named apart, the
    request would have no answer (uncertain) and the answer no request. `effects` in time order."""
    kinds = effects.select(
        action=pl.col("action").cast(pl.String), result=pl.col("kind").cast(pl.String) == "side_effect_result", scope=pl.col("scope"),
    )
    action, is_result = kinds["action"].fill_null("side_effect"), kinds["result"]
    unnamed = is_result & (action == "side_effect")  # normalize's name for a record that names none
    if not unnamed.any() or (action == "side_effect").all():
        return action.alias("effect")
    requested = kinds.select(
        pl.col("scope"),
        pl.when(~pl.col("result")).then(pl.col("action").fill_null("side_effect")).alias("requested"),
        pl.when(~pl.col("result")).then(pl.col("scope")).alias("request_scope"),
    ).with_row_index("_o").sort("scope", "_o", maintain_order=True)
    before = requested.with_columns(
        pl.when(pl.col("request_scope").forward_fill() == pl.col("scope")).then(pl.col("requested").forward_fill()).alias("before"),
    ).sort("_o")["before"]
    return pl.select(
        pl.when(unnamed).then(before).otherwise(action).fill_null("side_effect").alias("effect"),
    ).to_series()


def _sequence_columns(effects: pl.DataFrame) -> list[pl.Series]:
    """`role` (request or result) and `request_seq` (the requests so far) of each record, in its
    run of records with one scope and effect, in time order.

    Worked out over the records sorted by run: a shift or running count `over` the runs costs a
    group per execution (0.17 s for 97k records at 1M lines, against a few ms sorted).
    """
    runs = effects.select("scope", "effect", "kind", "completed_name").with_row_index("_o").sort("scope", "effect", "_o")
    same_run = (pl.col("scope") == pl.col("scope").shift(1)) & (pl.col("effect") == pl.col("effect").shift(1))
    # A completion-named side_effect right after an open request acts as that request's result.
    as_result = (
        (pl.col("kind") == "side_effect") & pl.col("completed_name")
        & same_run & (pl.col("kind").shift(1) == "side_effect") & ~pl.col("completed_name").shift(1)
    ).fill_null(False)
    role = pl.when(as_result | (pl.col("kind") == "side_effect_result")).then(pl.lit("result")).otherwise(pl.lit("request"))
    requests = (pl.col("role") == "request").cast(pl.Int32)
    before_run = pl.when(~same_run.fill_null(False)).then(requests.cum_sum() - requests).forward_fill()
    runs = runs.with_columns(role=role).with_columns(request_seq=requests.cum_sum() - before_run).sort("_o")
    return [runs["role"], runs["request_seq"]]


def _request_columns(requests: pl.DataFrame) -> pl.DataFrame:
    return requests.select(c for c in REQUEST_COLUMNS if c in requests.columns)


def repeated_requests(requests: pl.DataFrame, counts: pl.DataFrame) -> pl.DataFrame:
    """The counted requests after the first of each side effect `duplicate_effects` rates a certain
    or likely duplicate (its extra side effects): action_id, effect, exec_id, ts, in time order."""
    harmful = counts.filter(pl.col("confidence").is_in(HARMFUL)).select("action_id", "effect")
    return (
        requests.filter(pl.col("outcome").is_in(COUNTED)).join(harmful, on=["action_id", "effect"])
        .select("action_id", "effect", "exec_id", "ts").sort("ts")
        .filter(~pl.struct("action_id", "effect").is_first_distinct())
    )


def duplicated_actions(counts: pl.DataFrame) -> pl.Series:
    """The actions with a side effect `duplicate_effects` rates a certain or likely duplicate."""
    return counts.filter(pl.col("confidence").is_in(HARMFUL))["action_id"]


def duplicate_effects(requests: pl.DataFrame) -> pl.DataFrame:
    """Per action and side-effect type: counted requests and the duplicate's confidence."""
    if requests.height == 0:
        return pl.DataFrame(schema={"action_id": schema.ID_TYPE, "effect": pl.String, "success": pl.UInt32,
                                    "uncertain": pl.UInt32, "confidence": pl.String})
    counts = requests.group_by("action_id", "effect").agg(
        pl.col("provider_protected").filter(pl.col("outcome").is_in(COUNTED)).all().alias("protected"),
        (pl.col("outcome") == "success").sum().alias("success"),
        (pl.col("outcome") == "uncertain").sum().alias("uncertain"),
        (pl.col("outcome") == "replay").sum().alias("replayed"),
        (pl.col("outcome") == "rejected").sum().alias("rejected"),
        pl.len().alias("requests"),
    )
    # Every counted request carried the provider's idempotency key: the provider did it once.
    confidence = (
        pl.when(pl.col("protected") & (pl.col("success") + pl.col("uncertain") > 0)).then(None)
        .when(pl.col("success") >= 2).then(pl.lit("certain"))
        .when((pl.col("success") == 1) & (pl.col("uncertain") >= 1)).then(pl.lit("likely"))
        .when(pl.col("uncertain") >= 2).then(pl.lit("possible"))
    )
    return counts.with_columns(confidence=confidence).sort("action_id", "effect")
