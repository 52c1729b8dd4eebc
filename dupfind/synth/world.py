"""The simulated world: engine, random stream, queue, stores, logs, actions and counters."""

from __future__ import annotations

import random
from collections import Counter

from dupfind.synth.broker import Broker
from dupfind.synth.ids import Ids
from dupfind.synth.model import Action, LogFile, Message
from dupfind.synth.params import Params
from dupfind.synth.stores import Stores
from dupfind.synth.engine import Engine, us
from dupfind.synth.styles import DEPLOY, SQS, STYLES, Style


class World:
    """Everything one simulation run shares; subsystems get it as their only dependency."""

    def __init__(self, params: Params, seed: int, preset: str):
        params.validate()
        self.p = params
        self.seed = seed
        self.rng = random.Random(f"dupfind-synth:{preset}:{seed}")
        self.engine = Engine()
        self.worker_style: Style = STYLES[params.worker_style]
        self.ids = Ids(self.rng, uuid_jobs=params.worker_style in ("camel", "sqs"))
        self.stores = Stores()
        self.broker = Broker(self)
        self.logs: list[LogFile] = []
        self.actions: list[Action] = []
        self.counters: Counter[str] = Counter()
        self.exec_seq = 0
        self.deploy_history: list[dict] = []
        self.deploy_log = self.new_log("deploy.log", "deploy", "deploy-pipeline", DEPLOY)
        self.broker_log = self.new_log("queue-broker.log", "broker", f"sqs-{params.queue}", SQS) if params.broker_log else None
        # Imported here: these modules need World for type hints only.
        from dupfind.synth.workers import Workers

        self.workers = Workers(self)

    def new_log(self, name: str, kind: str, host: str, style: Style, meta: dict | None = None) -> LogFile:
        skew = int(self.rng.uniform(-1.0, 1.0) * self.p.clock_skew_ms * 1000)
        log = LogFile(name, kind, host, style, skew, meta)
        log.start = self.engine.now
        self.logs.append(log)
        return log

    def deploy_event(self, event: str, level: str, msg: str, **extra) -> None:
        self.deploy_log.records.append((self.engine.now, level, event, msg, None, extra))

    def broker_event(self, what: str, m: Message) -> None:
        if self.broker_log is None:
            return
        if what == "lease_expired":
            rec = ("warn", "visibility_timeout_expired", "message visible again: visibility timeout expired before delete",
                   {"job": m.job_id, "attempt": m.receive_count, "queue": self.p.queue, "vt": self.p.visibility_timeout_s})
        else:
            rec = ("error", SQS.event("dead_letter"), "max receive count exceeded, moved to dead-letter queue",
                   {"job": m.job_id, "attempt": m.receive_count, "queue": self.p.queue, "dead_letter_queue": f"{self.p.queue}-dlq"})
        self.broker_log.records.append((self.engine.now, rec[0], rec[1], rec[2], None, rec[3]))

    def uniform_us(self, bounds: tuple[float, float], scale: float = 1.0) -> int:
        return us(self.rng.uniform(bounds[0], bounds[1]) * scale)

    def db_time(self) -> int:
        return int(self.rng.uniform(1.0, 9.0) * 1000)
