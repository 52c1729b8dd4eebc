"""Background noise every service writes: health checks, heartbeats, config dumps, pool stats."""

from __future__ import annotations

import random

from dupfind.synth.engine import us
from dupfind.synth.model import LogFile, Record


def _ticks(rng: random.Random, start: int, end: int, every_s: float, jitter: float) -> list[int]:
    out = []
    t = start + us(rng.uniform(0.2, every_s))
    while t < end:
        out.append(t)
        t += us(every_s * rng.uniform(1 - jitter, 1 + jitter))
    return out


def _config(log: LogFile, params: dict) -> dict:
    meta = log.meta
    return {
        "config": {
            "queue_url": f"https://sqs.eu-west-1.amazonaws.com/481516234200/{meta['queue']}",
            "visibility_timeout": params["visibility_timeout_s"],
            "wait_time_seconds": 20,
            "max_number_of_messages": min(10, meta["concurrency"]),
            "concurrency": meta["concurrency"],
            "max_attempts": params["max_attempts"],
            "retry_backoff": {"base_s": params["backoff_base_s"], "cap_s": params["backoff_cap_s"], "jitter": 0.2},
            "provider_timeout_s": params["provider_timeout_s"],
            "database": {"host": "pg-primary.internal", "pool_size": 10, "statement_timeout_ms": 5000},
            "redis": {"url": "redis://redis-master.internal:6379/2", "socket_timeout_s": 2.0},
            "features": {"heartbeat": params["heartbeat"], "graceful_drain": params["stop_mode"] == "drain", "metrics": True},
            "log_level": "info",
            "region": "eu-west-1",
        }
    }


def noise_records(log: LogFile, rng: random.Random, end: int, params: dict) -> list[Record]:
    """Noise for one log file over its lifetime [log.start, end)."""
    out: list[Record] = []
    if log.kind == "worker":
        base = log.meta["base"]
        out.append((log.start + 1500, "info", "config_loaded", "effective configuration", base, _config(log, params)))
        for t in _ticks(rng, log.start, end, 30.0, 0.2):
            out.append((t, "debug", "heartbeat", "worker heartbeat", base, {"uptime_s": (t - log.start) // 1_000_000, "rss_mb": rng.randint(180, 320)}))
        for t in _ticks(rng, log.start, end, 20.0, 0.1):
            out.append((t, "debug", "healthcheck", "GET /healthz 200", base, {"path": "/healthz", "status_code": 200, "latency_ms": rng.randint(1, 6)}))
        for t in _ticks(rng, log.start, end, 120.0, 0.1):
            out.append((t, "debug", "db_pool_stats", "database pool stats", base, {"pool_size": 10, "idle": rng.randint(3, 10), "waiting": rng.randint(0, 2)}))
    elif log.kind == "producer":
        for t in _ticks(rng, log.start, end, 20.0, 0.1):
            out.append((t, "debug", "healthcheck", "GET /healthz 200", None, {"path": "/healthz", "status_code": 200, "latency_ms": rng.randint(1, 6)}))
    elif log.kind == "broker":
        for t in _ticks(rng, log.start, end, 60.0, 0.05):
            out.append((t, "info", "queue_stats", "queue attributes", None,
                        {"queue": params["queue"], "visible": rng.randint(0, 40), "in_flight": rng.randint(0, 20), "delayed": rng.randint(0, 5)}))
    elif log.kind == "deploy":
        for rec in log.records:
            if rec[2] == "worker_started":
                pod = rec[5]["worker"]
                out.append((rec[0] - us(rng.uniform(1.0, 4.0)), "info", "image_pulled", f"pulled image registry.internal/{params['service']}:{rec[5]['deploy']}",
                            None, {"image": f"registry.internal/{params['service']}:{rec[5]['deploy']}", "target": pod}))
            elif rec[2] == "deploy_started" and "previous_deployment" in rec[5]:
                out.append((rec[0] + us(rng.uniform(2.0, 5.0)), "info", "rollout_progress", f"waiting for {params['service']} replicas to update",
                            None, {"replicas": params["workers"]}))
    return out
