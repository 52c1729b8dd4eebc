"""Scenario parameters: workload, queue, workers, business design, deploys and faults."""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace

DESIGNS = ("naive", "claim", "idem_unique", "provider_idem", "lock")
LOCK_MODES = ("nonatomic", "atomic", "release_no_owner")
STOP_MODES = ("drain", "keep_polling")
DOUBLE_PUBLISH_VARIANTS = ("api_retry", "double_click", "second_producer")


@dataclass(frozen=True)
class ActionType:
    """A kind of business action: which job runs it and which side effect it has."""

    name: str
    job_type: str
    channel: str  # email | push | sms | stock
    provider: str
    template: str


ACTION_TYPES = {
    a.name: a
    for a in (
        ActionType("order_confirmation", "send_order_confirmation", "email", "sendgrid", "confirm"),
        ActionType("shipping_push", "send_push_notification", "push", "fcm", "shipped"),
        ActionType("delivery_sms", "send_delivery_sms", "sms", "twilio", "eta"),
        ActionType("stock_deduction", "deduct_stock", "stock", "inventory-api", "stock"),
    )
}


@dataclass(frozen=True)
class Params:
    """Everything a preset fixes; `jobs` is the number of business actions."""

    jobs: int = 80
    service: str = "notifier"
    queue: str = "notifications"
    mix: tuple[tuple[str, float], ...] = (("order_confirmation", 0.6), ("shipping_push", 0.3), ("delivery_sms", 0.1))
    publish_rate: float = 1.0  # business actions per second (Poisson)
    order_share: float = 0.3  # chance an action belongs to the previous order (same order_id)
    # Upstream double publishing.
    double_publish_rate: float = 0.0
    double_publish_variants: tuple[tuple[str, float], ...] = (("api_retry", 0.6), ("double_click", 0.4))
    double_publish_gap_s: tuple[float, float] = (0.05, 2.0)
    # Queue.
    visibility_timeout_s: float = 60.0
    heartbeat: bool = False  # extend the lease while the job runs
    max_attempts: int = 5
    backoff_base_s: float = 2.0
    backoff_cap_s: float = 60.0
    poll_delay_ms: tuple[float, float] = (3.0, 120.0)
    broker_log: bool = True
    # Workers and design.
    workers: int = 3
    concurrency: int = 4
    design: str = "naive"
    lock_mode: str = "atomic"
    lock_ttl_s: float = 120.0
    lock_get_set_gap_ms: tuple[float, float] = (5.0, 40.0)  # non-atomic lock: GET ... SET
    lock_retry_s: tuple[float, float] = (3.0, 8.0)
    claim_stale_s: float | None = None  # a `processing` claim older than this may be taken over
    pre_send_s: tuple[float, float] = (0.02, 0.3)  # handler work before the provider call
    post_send_s: tuple[float, float] = (0.01, 0.15)  # work between the provider reply and the status write
    # Provider.
    provider_median_s: float = 0.35
    provider_sigma: float = 0.5
    slow_rate: float = 0.0
    slow_s: tuple[float, float] = (20.0, 40.0)
    provider_timeout_s: float = 30.0
    accept_delay_s: tuple[float, float] = (0.02, 0.15)  # request arrives -> provider has done the side effect
    provider_error_rate: float = 0.03
    provider_timeout_rate: float = 0.0  # times out and did nothing
    provider_timeout_accepted_rate: float = 0.0  # times out after doing the side effect
    db_update_fail_rate: float = 0.0
    # Deploys.
    deploy_at: tuple[float, ...] = ()  # fractions of the publishing span
    deploy_every_s: float | None = None  # further deploys at this interval after the first, while publishing
    stop_mode: str = "drain"
    grace_s: float = 30.0
    # Log faults.
    clock_skew_ms: float = 150.0  # per host, uniform in [-x, x]
    reorder_rate: float = 0.002
    drop_rate: float = 0.0
    # Styles.
    worker_style: str = "snake"
    producer_styles: tuple[str, ...] = ("snake",)

    def with_jobs(self, jobs: int | None) -> "Params":
        return self if jobs is None else replace(self, jobs=jobs)

    def as_dict(self) -> dict:
        return asdict(self)

    def validate(self) -> None:
        if self.design not in DESIGNS:
            raise ValueError(f"Unknown design {self.design!r}; expected one of {', '.join(DESIGNS)}.")
        if self.lock_mode not in LOCK_MODES:
            raise ValueError(f"Unknown lock mode {self.lock_mode!r}; expected one of {', '.join(LOCK_MODES)}.")
        if self.stop_mode not in STOP_MODES:
            raise ValueError(f"Unknown stop mode {self.stop_mode!r}; expected one of {', '.join(STOP_MODES)}.")
        if self.jobs < 1:
            raise ValueError("The number of jobs must be at least 1.")
        for name, _ in self.mix:
            if name not in ACTION_TYPES:
                raise ValueError(f"Unknown action type {name!r} in the mix.")
        for name, _ in self.double_publish_variants:
            if name not in DOUBLE_PUBLISH_VARIANTS:
                raise ValueError(f"Unknown double-publish variant {name!r}.")

