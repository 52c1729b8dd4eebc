"""Named scenarios: one per failure mode of DESIGN.md and a benign control for each."""

from __future__ import annotations

from dataclasses import dataclass, replace

from dupfind.synth.params import Params


@dataclass(frozen=True)
class Preset:
    """A named parameter set with a one-line description and the format its fixture uses."""

    name: str
    description: str
    params: Params
    fixture_format: str = "ndjson"
    fixture_jobs: int | None = None


_STOCK = dict(
    service="inventory", queue="stock-updates", mix=(("stock_deduction", 1.0),),
    double_publish_rate=0.35, double_publish_variants=(("second_producer", 1.0),), double_publish_gap_s=(0.0, 0.02),
    poll_delay_ms=(1.0, 8.0), design="lock", provider_median_s=0.3, slow_rate=0.4, slow_s=(15.0, 40.0),
    provider_timeout_s=60.0, max_attempts=12, worker_style="terse", producer_styles=("sqs", "terse"),
    publish_rate=0.5, jobs=70,
)
_DEPLOY = dict(
    jobs=70, publish_rate=1.0, workers=3, concurrency=6, visibility_timeout_s=45.0, pre_send_s=(0.05, 0.5),
    post_send_s=(5.0, 15.0), provider_median_s=0.6, deploy_at=(0.1,), deploy_every_s=300.0, grace_s=30.0, worker_style="snake",
    producer_styles=("camel",),
)
_VT90 = dict(
    jobs=80, publish_rate=0.5, workers=3, concurrency=4, visibility_timeout_s=30.0, slow_rate=0.2, slow_s=(85.0, 95.0),
    provider_timeout_s=120.0, worker_style="sqs", producer_styles=("snake",),
)
_VT45 = dict(
    jobs=30, publish_rate=1 / 70, workers=2, concurrency=1, visibility_timeout_s=30.0, pre_send_s=(43.0, 46.0),
    worker_style="sqs", producer_styles=("snake",),
)
_STATUS = dict(
    jobs=80, publish_rate=0.5, visibility_timeout_s=30.0, slow_rate=0.2, slow_s=(40.0, 70.0), accept_delay_s=(0.05, 0.3),
    provider_timeout_s=90.0, worker_style="camel", producer_styles=("sqs",),
)
_DOUBLE = dict(
    jobs=100, publish_rate=1.0, double_publish_rate=0.2, double_publish_variants=(("api_retry", 0.6), ("double_click", 0.4)),
    double_publish_gap_s=(0.05, 2.0), provider_error_rate=0.05, worker_style="snake", producer_styles=("snake",),
)
_TIMEOUT = dict(
    jobs=100, publish_rate=1.0, provider_timeout_s=10.0, provider_timeout_accepted_rate=0.15, provider_timeout_rate=0.04,
    worker_style="camel", producer_styles=("camel",),
)


def _p(*bases: dict, **kw) -> Params:
    """Params from shared groups of settings; later keyword arguments win."""
    merged: dict = {}
    for base in bases:
        merged.update(base)
    merged.update(kw)
    return replace(Params(), **merged)


_ALL = (
    Preset("deploy-overlap", "Rolling deploy: old workers keep polling after SIGTERM, get SIGKILLed mid-job, the job comes back and sends again.",
           _p(_DEPLOY, design="naive", stop_mode="keep_polling"), "cri", fixture_jobs=50),
    Preset("deploy-drain-control", "Same deploys, but workers stop polling on SIGTERM and send with a provider idempotency key: kills and redeliveries, no repeat.",
           _p(_DEPLOY, design="provider_idem", stop_mode="drain", slow_rate=0.15, slow_s=(35.0, 60.0), provider_timeout_s=90.0), fixture_jobs=55),
    Preset("visibility-timeout", "A 90 s job (slow provider) under a 30 s visibility timeout: the queue hands the running job to another worker at 30 s and 60 s.",
           _p(_VT90, design="naive"), fixture_jobs=50),
    Preset("visibility-timeout-two-workers", "A 45 s handler, a 30 s visibility timeout and two single-threaded workers: the idle worker takes the job at second 30.",
           _p(_VT45, design="naive"), "logfmt"),
    Preset("visibility-timeout-control", "The 90 s job under a 30 s timeout again, with an atomic pending->processing claim: redeliveries lose the claim, no repeat.",
           _p(_VT90, design="claim"), fixture_jobs=55),
    Preset("lock-nonatomic", "Two triggers for one stock deduction race through a get-then-set lock: both see the key free and both deduct.",
           _p(_STOCK, lock_mode="nonatomic"), fixture_jobs=50),
    Preset("lock-ttl-short", "An atomic lock whose 10 s TTL is shorter than the slow inventory call: the retried trigger takes the expired lock and deducts again.",
           _p(_STOCK, lock_mode="atomic", lock_ttl_s=10.0), fixture_jobs=50),
    Preset("lock-release-no-owner", "A denied worker's finally-block deletes the lock it never held; its retry then takes the lock while the holder still works.",
           _p(_STOCK, lock_mode="release_no_owner"), "cri", fixture_jobs=45),
    Preset("lock-atomic-control", "Set-if-absent lock with a TTL longer than the work and owner-checked release: the second trigger is denied, retries, finds it done.",
           _p(_STOCK, lock_mode="atomic", lock_ttl_s=300.0, max_attempts=20), fixture_jobs=45),
    Preset("status-after-side-effect", "Provider accepts fast but answers slowly; the lease expires, attempt 2 reads status pending and sends again; both write sent.",
           _p(_STATUS, design="naive"), fixture_jobs=55),
    Preset("db-update-fails", "The provider call succeeds, the status update fails, and the retried job sends again.",
           _p(jobs=100, publish_rate=1.0, db_update_fail_rate=0.15, worker_style="camel", producer_styles=("camel",), design="naive"), fixture_jobs=50),
    Preset("status-control", "Slow responses, expired leases and failed status writes, but an idempotency key with a unique constraint catches every redelivery.",
           _p(_STATUS, slow_rate=0.15, design="idem_unique", db_update_fail_rate=0.1), "logfmt", fixture_jobs=55),
    Preset("double-publish", "The API publishes the same event twice (a retried call, or a double click with a new event id): two messages, two sends.",
           _p(_DOUBLE, design="naive"), "docker", fixture_jobs=45),
    Preset("double-publish-control", "Same double publishes; the consumer's idempotency key (unique constraint) turns the second into a no-op.",
           _p(_DOUBLE, design="idem_unique"), fixture_jobs=55),
    # Only accepted timeouts here: a timeout where the provider did nothing looks the same in the
    # logs, so a mix could not be told apart (dupfind rates timeout + success as a likely duplicate).
    Preset("provider-timeout-accepted", "The provider times out after it has accepted the request; the worker retries and the side effect really happens twice.",
           _p(_TIMEOUT, design="naive", provider_timeout_rate=0.0), fixture_jobs=55),
    Preset("provider-timeout-control", "Same timeouts after accept, but the request carries a provider idempotency key: the retry is answered as a replay.",
           _p(_TIMEOUT, design="provider_idem"), fixture_jobs=55),
    Preset("baseline", "A healthy system: provider errors, failed writes, retries, slow calls under heartbeat leases, a drained deploy, a few lost log lines, zero duplicates.",
           _p(jobs=120, publish_rate=1.0, design="idem_unique", heartbeat=True, visibility_timeout_s=30.0, slow_rate=0.05, slow_s=(35.0, 50.0),
              provider_error_rate=0.06, provider_timeout_s=60.0, db_update_fail_rate=0.03, deploy_at=(0.5,), deploy_every_s=1800.0,
              stop_mode="drain", grace_s=60.0, worker_style="snake", producer_styles=("sqs",), drop_rate=0.003), "docker", fixture_jobs=50),
)

PRESETS: dict[str, Preset] = {p.name: p for p in _ALL}
