"""Entry point for `python -m dupfind`."""

from dupfind.cli import run

run()
