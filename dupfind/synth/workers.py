"""Worker pods: start, poll, run executions, handle SIGTERM (drain or keep polling) and SIGKILL."""

from __future__ import annotations

from typing import TYPE_CHECKING

from dupfind.synth.engine import us
from dupfind.synth.handler import run_job
from dupfind.synth.model import Execution, Generation, Message, Pod, Slot

if TYPE_CHECKING:
    from dupfind.synth.world import World


class Workers:
    """Owns the pods of every generation and the lifecycle of their executions."""

    def __init__(self, world: "World"):
        self.w = world
        self.generations: list[Generation] = []
        self.pods: list[Pod] = []

    def new_generation(self) -> Generation:
        w = self.w
        if self.generations:
            prev = self.generations[-1].deployment_id
            major, minor, patch = (int(x) for x in prev[1:].split("."))
            bump_minor = w.rng.random() < 0.4
            version = f"v{major}.{minor + 1}.0" if bump_minor else f"v{major}.{minor}.{patch + 1}"
        else:
            version = f"v{w.rng.randint(1, 4)}.{w.rng.randint(8, 40)}.{w.rng.randint(0, 9)}"
        gen = Generation(len(self.generations), version, w.ids.k8s(w.rng.choice((9, 10))))
        self.generations.append(gen)
        return gen

    def start_pod(self, gen: Generation) -> Pod:
        w = self.w
        p = w.p
        style = w.worker_style
        name = f"worker-{p.service}-{gen.rs_hash}-{w.ids.k8s(5)}"
        while any(pod.name == name for pod in self.pods):
            name = f"worker-{p.service}-{gen.rs_hash}-{w.ids.k8s(5)}"  # one log file per pod
        meta = {"deployment": gen.deployment_id, "queue": p.queue, "concurrency": p.concurrency}
        log = w.new_log(f"{name}.log", "worker", name, style, meta)
        pod = Pod(name, gen, log)
        pod.started_at = w.engine.now
        gen.pods.append(pod)
        self.pods.append(pod)
        first_pid = w.rng.randint(7, 60)
        for i in range(p.concurrency):
            process = f"pool-1-thread-{i + 1}" if style.process_kind == "thread" else first_pid + i
            pod.slots.append(Slot(pod, i, process))
        K = style.keys
        log.meta["base"] = {K["worker"]: name, K["deploy"]: gen.deployment_id}
        w.deploy_event("worker_started", "info", f"started container worker in pod {name}", worker=name, deploy=gen.deployment_id)
        log.records.append((w.engine.now, "info", style.event("worker_started"), f"worker ready, consuming {p.queue}", log.meta["base"],
                            {"vt": p.visibility_timeout_s, "queue": p.queue, "concurrency": p.concurrency, "max_attempts": p.max_attempts}))
        pod.polling = True
        for slot in pod.slots:
            w.broker.add_slot(slot)
        w.broker.dispatch()
        return pod

    def start_execution(self, slot: Slot, msg: Message, reason: str) -> None:
        w = self.w
        pod = slot.pod
        style = pod.log.style
        K = style.keys
        a = msg.action
        w.exec_seq += 1
        ex = Execution(w.exec_seq, msg, pod, slot, w.engine.now, reason)
        slot.busy = ex
        msg.current = ex
        a.executions.append(ex)
        ex.base = {
            K["job"]: msg.job_id, K["evt"]: msg.event_id, K["idem"]: a.idem, K["row"]: msg.row,
            K["order"]: a.order, K["user"]: a.user, K["worker"]: pod.name, K["proc"]: slot.process,
            K["deploy"]: pod.gen.deployment_id, K["attempt"]: ex.attempt - 1 if style.attempt_zero_based else ex.attempt,
            K["queue"]: w.p.queue, K["jtype"]: a.atype.job_type,
        }
        ex.slim = {K[k]: ex.base[K[k]] for k in ("job", "evt", "idem", "row", "worker", "proc", "deploy", "attempt")}
        text = f"received {a.atype.job_type}" if ex.attempt == 1 else f"received {a.atype.job_type} (delivery {ex.attempt})"
        pod.log.records.append((w.engine.now, "info", style.event("receive"), text, ex.base, None))
        w.engine.spawn(run_job(w, ex), 0, owner=ex)

    def end_execution(self, ex: Execution, outcome: str) -> None:
        w = self.w
        ex.end = w.engine.now
        ex.outcome = outcome
        slot = ex.slot
        if slot.busy is ex:
            slot.busy = None
        pod = ex.pod
        if pod.alive and pod.polling:
            w.broker.slot_free(slot)
        elif pod.alive and pod.stopping and pod.in_flight() == 0:
            w.engine.after(int(w.rng.uniform(50, 400) * 1000), self.exit_pod, pod)

    def sigterm(self, pod: Pod) -> None:
        w = self.w
        p = w.p
        pod.stopping = True
        pod.sigterm_at = w.engine.now
        w.deploy_event("stop_signal", "info", f"sending SIGTERM to pod {pod.name}", worker=pod.name, deploy=pod.gen.deployment_id,
                       signal="SIGTERM", grace_period_s=p.grace_s)
        w.engine.after(int(w.rng.uniform(1, 30) * 1000), self._on_sigterm, pod)
        w.engine.after(us(p.grace_s), self.kill_pod, pod)

    def _on_sigterm(self, pod: Pod) -> None:
        w = self.w
        if not pod.alive:
            return
        style = pod.log.style
        base = pod.log.meta["base"]
        if w.p.stop_mode == "drain":
            pod.polling = False
            w.broker.remove_pod(pod)
            busy = pod.in_flight()
            pod.log.records.append((w.engine.now, "warn", style.event("sigterm"), f"received SIGTERM: stop consuming, draining {busy} in-flight jobs",
                                    base, {"signal": "SIGTERM", "in_flight": busy}))
            if busy == 0:
                w.engine.after(int(w.rng.uniform(50, 400) * 1000), self.exit_pod, pod)
        else:
            # The bug under test: the handler logs the signal but the consumer loop keeps polling.
            pod.log.records.append((w.engine.now, "warn", style.event("sigterm"), "received SIGTERM, shutdown hook registered",
                                    base, {"signal": "SIGTERM", "in_flight": pod.in_flight()}))

    def exit_pod(self, pod: Pod) -> None:
        w = self.w
        if not pod.alive:
            return
        self._gone(pod, "exited")
        style = pod.log.style
        pod.log.records.append((w.engine.now, "info", style.event("worker_exited"), "all jobs drained, exiting", pod.log.meta["base"], {"exit_code": 0}))
        w.deploy_event("worker_exited", "info", f"container worker in pod {pod.name} exited", worker=pod.name,
                       deploy=pod.gen.deployment_id, exit_code=0)

    def kill_pod(self, pod: Pod) -> None:
        w = self.w
        if not pod.alive:
            return
        for slot in pod.slots:
            ex = slot.busy
            if ex is not None:
                ex.alive = False
                ex.killed = True
                ex.end = w.engine.now
                ex.outcome = "killed"
                slot.busy = None
        self._gone(pod, "killed")
        w.deploy_event("worker_killed", "error", f"grace period of {w.p.grace_s:g}s exceeded, killed pod {pod.name} (SIGKILL)",
                       worker=pod.name, deploy=pod.gen.deployment_id, signal="SIGKILL", exit_code=137)

    def _gone(self, pod: Pod, end: str) -> None:
        w = self.w
        pod.alive = False
        pod.polling = False
        pod.end = end
        pod.stopped_at = w.engine.now
        pod.log.end = w.engine.now
        w.broker.remove_pod(pod)
