"""Producers: the API (and optionally a scheduler) publishing business events, sometimes twice."""

from __future__ import annotations

from typing import TYPE_CHECKING

from dupfind.synth.engine import Process, us
from dupfind.synth.model import Action, LogFile, Message
from dupfind.synth.params import ACTION_TYPES
from dupfind.synth.styles import STYLES

if TYPE_CHECKING:
    from dupfind.synth.world import World

_PATHS = {
    "email": "/v1/orders/{order}/confirm",
    "push": "/v1/orders/{order}/ship",
    "sms": "/v1/deliveries/{order}/window",
    "stock": "/v1/orders/{order}/pay",
}


class Producers:
    """Publishes one message per business action, plus the configured double publishes."""

    def __init__(self, w: "World"):
        self.w = w
        p = w.p
        styles = p.producer_styles
        name = "checkout" if any(n == "stock_deduction" for n, _ in p.mix) else "api"
        self.primary = w.new_log(f"producer-{name}-1.log", "producer", f"producer-{name}-1", STYLES[styles[0]])
        self.second: LogFile | None = None
        if any(v == "second_producer" for v, _ in p.double_publish_variants) and p.double_publish_rate > 0:
            style = STYLES[styles[1] if len(styles) > 1 else "camel"]
            self.second = w.new_log("producer-scheduler-1.log", "producer", "producer-scheduler-1", style)
        names = [n for n, _ in p.mix]
        weights = [x for _, x in p.mix]
        self._types = ([ACTION_TYPES[n] for n in names], weights)
        vnames = [n for n, _ in p.double_publish_variants]
        vweights = [x for _, x in p.double_publish_variants]
        self._variants = (vnames, vweights)

    def run(self) -> Process:
        w = self.w
        p = w.p
        rng = w.rng
        user_pool = max(5, p.jobs // 3)
        last: Action | None = None
        order_types: list[str] = []  # action types already published for the current order
        for i in range(p.jobs):
            yield us(rng.expovariate(p.publish_rate))
            atype = rng.choices(*self._types)[0]
            if last is not None and rng.random() < p.order_share and atype.name not in order_types:
                order, user = last.order, last.user  # another action for the same order
            else:
                order, user = w.ids.order(), w.ids.user(user_pool)
                order_types = []
            order_types.append(atype.name)
            idem = f"{order}:{atype.template}"
            action = Action(i, atype, order, user, idem)
            w.actions.append(action)
            last = action
            row = w.ids.row(atype.channel)
            event_id = w.ids.event()
            self.publish(self.primary, action, event_id, row, w.ids.request())
            if p.double_publish_rate and rng.random() < p.double_publish_rate:
                variant = rng.choices(*self._variants)[0]
                action.double_variant = variant
                gap = w.uniform_us(p.double_publish_gap_s)
                if variant == "api_retry":
                    w.engine.after(gap, self.publish, self.primary, action, event_id, row, w.ids.request())
                elif variant == "double_click":
                    w.engine.after(gap, self.publish, self.primary, action, w.ids.event(), w.ids.row(atype.channel), w.ids.request())
                else:
                    w.engine.after(gap, self.publish, self.second or self.primary, action, w.ids.event(), row, w.ids.request())

    def publish(self, log: LogFile, action: Action, event_id: str, row: str, request_id: str) -> None:
        w = self.w
        now = w.engine.now
        style = log.style
        K = style.keys
        atype = action.atype
        msg = Message(w.ids.job(), action, event_id, row, log.host, request_id)
        action.messages.append(msg)
        if event_id not in action.event_ids:
            action.event_ids.append(event_id)
        if row not in action.rows:
            action.rows.append(row)
        w.stores.status.setdefault(row, "pending")
        if log is self.primary:
            path = _PATHS[atype.channel].format(order=action.order)
            log.records.append((now, "info", "http_access", f"POST {path} 202", None,
                                {"req": request_id, "method": "POST", "path": path, "status": 202, "latency_ms": w.rng.randint(4, 60)}))
        base = {
            K["job"]: msg.job_id, K["evt"]: event_id, K["idem"]: action.idem, K["row"]: row, K["order"]: action.order,
            K["user"]: action.user, K["queue"]: w.p.queue, K["jtype"]: atype.job_type, K["req"]: request_id,
        }
        if K["worker"] == "hostname":
            base["hostname"] = log.host  # pino-style loggers add the host to every line
        text = f"published {atype.job_type} for {action.order}"
        log.records.append((now + int(w.rng.uniform(0.3, 1.0) * 1000), "info", style.event("publish"), text, base, None))
        w.engine.after(int(w.rng.uniform(1.0, 5.0) * 1000), w.broker.publish, msg)
