"""The deploy pipeline: the initial rollout and rolling updates where two generations overlap."""

from __future__ import annotations

from typing import TYPE_CHECKING

from dupfind.synth.engine import Process, us

if TYPE_CHECKING:
    from dupfind.synth.world import World


def initial_rollout(w: "World") -> Process:
    gen = w.workers.new_generation()
    w.deploy_event("deploy_started", "info", f"rollout of {w.p.service} {gen.deployment_id} started", deploy=gen.deployment_id,
                   replicas=w.p.workers, strategy="RollingUpdate")
    record = {"deployment_id": gen.deployment_id, "previous": None, "started": w.engine.now, "finished": None}
    w.deploy_history.append(record)
    for _ in range(w.p.workers):
        yield us(w.rng.uniform(0.3, 1.5))
        w.workers.start_pod(gen)
    yield us(w.rng.uniform(0.5, 2.0))
    record["finished"] = w.engine.now
    w.deploy_event("deploy_finished", "info", f"rollout of {w.p.service} {gen.deployment_id} finished", deploy=gen.deployment_id,
                   replicas=w.p.workers)


def rolling_update(w: "World") -> Process:
    """New pods start one by one; each time one is ready, one old pod gets SIGTERM."""
    old_gen = w.workers.generations[-1]
    old = [pod for pod in old_gen.pods if pod.alive]
    gen = w.workers.new_generation()
    started = w.engine.now
    w.deploy_event("deploy_started", "info", f"rollout of {w.p.service} {gen.deployment_id} started", deploy=gen.deployment_id,
                   previous_deployment=old_gen.deployment_id, replicas=w.p.workers, strategy="RollingUpdate", max_surge=1)
    record = {"deployment_id": gen.deployment_id, "previous": old_gen.deployment_id, "started": started, "finished": None}
    w.deploy_history.append(record)
    for i in range(w.p.workers):
        yield us(w.rng.uniform(3.0, 8.0))  # image pull and container start
        w.workers.start_pod(gen)
        yield us(w.rng.uniform(0.5, 2.5))  # readiness probe
        if i < len(old):
            w.workers.sigterm(old[i])
    for pod in old[w.p.workers:]:
        w.workers.sigterm(pod)
    while any(pod.alive for pod in old):
        yield us(1.0)
    record["finished"] = w.engine.now
    w.deploy_event("deploy_finished", "info", f"rollout of {w.p.service} {gen.deployment_id} finished", deploy=gen.deployment_id,
                   previous_deployment=old_gen.deployment_id, duration_s=round((w.engine.now - started) / 1e6, 3))
