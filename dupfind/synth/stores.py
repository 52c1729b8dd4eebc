"""Shared state the workers touch: the status table, the deliveries table, the lock store, the provider."""

from __future__ import annotations


class Stores:
    """Database rows, Redis-style locks and the provider's idempotency memory."""

    def __init__(self) -> None:
        self.status: dict[str, str] = {}  # row id -> pending | processing | sent
        self.claimed_at: dict[str, int] = {}
        self.deliveries: dict[str, str] = {}  # idempotency key (unique) -> sending | sent
        self.locks: dict[str, tuple[str, int]] = {}  # key -> (owner token, expires at)
        self.provider_keys: dict[str, int] = {}  # idempotency keys the provider has accepted

    def lock_holder(self, key: str, now: int) -> str | None:
        entry = self.locks.get(key)
        if entry is None:
            return None
        if entry[1] <= now:
            del self.locks[key]  # the TTL ran out
            return None
        return entry[0]
