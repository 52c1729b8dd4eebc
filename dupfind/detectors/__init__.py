"""Detectors: one module per failure mode, registered by name with @detector."""
