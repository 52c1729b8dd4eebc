"""Deterministic, realistic-looking identifiers (job ids, event ids, pod names, provider ids)."""

from __future__ import annotations

import random

_K8S_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_PROVIDER_PREFIX = {"sendgrid": "sg_", "fcm": "fcm_", "twilio": "SM", "inventory-api": "mov_"}


class Ids:
    """Draws identifiers from one random stream; counters keep business ids unique."""

    def __init__(self, rng: random.Random, uuid_jobs: bool):
        self.rng = rng
        self.uuid_jobs = uuid_jobs
        self._order = rng.randrange(4_000_000, 6_000_000)
        self._user_base = rng.randrange(100_000, 400_000)
        self._seen: set[str] = set()

    def _unique(self, prefix: str, bits: int) -> str:
        while True:
            value = f"{prefix}{self.rng.getrandbits(bits):0{bits // 4}x}"
            if value not in self._seen:
                self._seen.add(value)
                return value

    def job(self) -> str:
        bits = self.rng.getrandbits(128)
        if self.uuid_jobs:
            h = f"{bits:032x}"
            return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{'89ab'[bits & 3]}{h[17:20]}-{h[20:]}"
        return f"{bits >> 32:024x}"  # a Sidekiq-style 24-hex jid

    def event(self) -> str:
        return self._unique("evt_", 48)

    def row(self, channel: str) -> str:
        return self._unique("stk_" if channel == "stock" else "ntf_", 48)

    def order(self) -> str:
        self._order += self.rng.randint(1, 9)
        return f"ord_{self._order}"

    def user(self, pool: int) -> str:
        return f"usr_{self._user_base + self.rng.randrange(pool)}"

    def request(self) -> str:
        return f"req_{self.rng.getrandbits(48):012x}"

    def provider_message(self, provider: str) -> str:
        return f"{_PROVIDER_PREFIX.get(provider, 'pm_')}{self.rng.getrandbits(64):016x}"

    def lock_token(self) -> str:
        return f"{self.rng.getrandbits(40):010x}"

    def k8s(self, n: int) -> str:
        return "".join(self.rng.choice(_K8S_ALPHABET) for _ in range(n))
