"""The queue: visibility timeout leases, redelivery on expiry, delayed retries and dead-lettering."""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING

from dupfind.synth.engine import us
from dupfind.synth.model import Message, Slot

if TYPE_CHECKING:
    from dupfind.synth.world import World


class Broker:
    """SQS-like: a received message is hidden for the visibility timeout and reappears unless acked."""

    def __init__(self, world: "World"):
        self.w = world
        self.vt = us(world.p.visibility_timeout_s)
        self.visible: deque[Message] = deque()
        self.free: list[Slot] = []

    def publish(self, msg: Message) -> None:
        msg.state = "visible"
        msg.published_at = self.w.engine.now
        self.visible.append(msg)
        self.dispatch()

    def add_slot(self, slot: Slot) -> None:
        self.free.append(slot)

    def remove_pod(self, pod) -> None:
        self.free = [s for s in self.free if s.pod is not pod]

    def dispatch(self) -> None:
        w = self.w
        rng = w.rng
        lo, hi = w.p.poll_delay_ms
        while self.visible and self.free:
            msg = self.visible.popleft()
            if msg.state != "visible":
                continue  # acked or dead-lettered while it waited
            if msg.receive_count >= w.p.max_attempts:
                self._dead_letter_on_receive(msg)
                continue
            i = rng.randrange(len(self.free))
            slot = self.free[i]
            self.free[i] = self.free[-1]
            self.free.pop()
            msg.state = "reserved"
            w.engine.after(int(rng.uniform(lo, hi) * 1000), self._deliver, msg, slot)

    def _deliver(self, msg: Message, slot: Slot) -> None:
        pod = slot.pod
        if msg.state != "reserved":
            return
        if not pod.alive or not pod.polling:
            # The poll was abandoned (the worker stopped): the message stays available.
            msg.state = "visible"
            self.visible.appendleft(msg)
            self.dispatch()
            return
        msg.state = "inflight"
        msg.receive_count += 1
        msg.lease += 1
        msg.expires_at = self.w.engine.now + self.vt
        reason = msg.next_reason
        msg.receive_reasons.append(reason)
        self.w.engine.at(msg.expires_at, self._expire, msg, msg.lease)
        self.w.workers.start_execution(slot, msg, reason)

    def _expire(self, msg: Message, lease: int) -> None:
        now = self.w.engine.now
        if msg.state != "inflight" or msg.lease != lease or now < msg.expires_at:
            return
        prev = msg.current
        msg.next_reason = "worker_killed" if prev is not None and prev.killed else "lease_expired"
        msg.state = "visible"
        self.w.counters["lease_expirations"] += 1
        self.w.broker_event("lease_expired", msg)
        self.visible.append(msg)
        self.dispatch()

    def extend(self, msg: Message, lease: int) -> bool:
        if msg.state != "inflight" or msg.lease != lease:
            return False
        msg.expires_at = self.w.engine.now + self.vt
        self.w.engine.at(msg.expires_at, self._expire, msg, lease)
        return True

    def ack(self, msg: Message) -> None:
        # Like SQS, a delete with an older receipt still removes the message.
        if msg.state not in ("deleted", "dead"):
            msg.state = "deleted"

    def nack(self, msg: Message, lease: int, delay: int, reason: str) -> None:
        if msg.state != "inflight" or msg.lease != lease:
            return  # the lease is gone: the message was already handed to someone else
        msg.state = "delayed"
        msg.next_reason = reason
        self.w.engine.after(delay, self._reappear, msg)

    def _reappear(self, msg: Message) -> None:
        if msg.state == "delayed":
            msg.state = "visible"
            self.visible.append(msg)
            self.dispatch()

    def dead_letter(self, msg: Message) -> None:
        if msg.state not in ("deleted", "dead"):
            msg.state = "dead"
            msg.action.dead_lettered = True
            self.w.counters["dead_lettered"] += 1

    def _dead_letter_on_receive(self, msg: Message) -> None:
        self.dead_letter(msg)
        self.w.broker_event("dead_letter", msg)

    def slot_free(self, slot: Slot) -> None:
        if slot.pod.alive and slot.pod.polling:
            self.free.append(slot)
            self.dispatch()
