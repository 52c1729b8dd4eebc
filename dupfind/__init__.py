"""dupfind: find background-job side effects that happened twice, and why."""

__version__ = "0.1.0"
