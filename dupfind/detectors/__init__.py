"""Detectors: one module per failure mode, registered by name with @detector."""

# Each detector name a rule file may give, and the module that registers it: a rule is checked
# against these names without importing a detector module, which only a run of the rule needs.
# (tests/test_rules_registry.py checks that the modules register exactly these.)
MODULES = {
    "duplicate_side_effect": "duplicate_side_effect",
    "concurrent_execution": "concurrent_execution",
    "lease_expiry": "lease_expiry",
    "status_ordering": "status_ordering",
    "double_publish": "double_publish",
    "two_schedulers": "two_schedulers",
    "guard_hit": "guard_hit",
    "lost_action": "lost_action",
    "cross_generation_overlap": "cross_generation",
    "work_after_stop_signal": "work_after_stop",
    "killed_in_flight": "killed_in_flight",
    "grace_period_short": "grace_period",
    "lock_concurrent_holders": "locks",
    "lock_release_not_holder": "locks",
    "lock_ttl_expired": "locks",
    "timeout_below_duration": "timeout_fit",
}
