"""`dupfind synth`: write a simulated incident with its answer key."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from dupfind.cli_common import app
from dupfind.errors import DupfindError


@app.command()
def synth(
    preset: Annotated[Optional[str], typer.Argument(help="The scenario to simulate (see --list).", show_default=False)] = None,
    out: Annotated[Optional[Path], typer.Option("--out", "-o", help="Folder to write: logs/ and truth.json.")] = None,
    seed: Annotated[int, typer.Option("--seed", help="Random seed: the same seed writes the same bytes.")] = 1,
    jobs: Annotated[Optional[int], typer.Option("--jobs", help="Business actions to simulate (default: the preset's).")] = None,
    fmt: Annotated[str, typer.Option("--format", "-f", help="Log format: ndjson, logfmt, docker or cri.")] = "ndjson",
    list_presets: Annotated[bool, typer.Option("--list", help="List the presets with a line of explanation each.")] = False,
) -> None:
    """Simulate producers, a queue with leases, workers, deploys, locks and guards, and write
    realistic logs of one failure mode (or its benign control) with the answer key (truth.json)."""
    from dupfind.synth import list_presets as presets

    if list_presets or preset is None:
        if preset is None and not list_presets:
            raise DupfindError("name a preset (dupfind synth --list shows them) and --out DIR.")
        width = max(len(name) for name, _ in presets())
        for name, description in presets():
            typer.echo(f"{name:<{width}}  {description}")
        return
    if out is None:
        raise DupfindError("--out DIR is required: where to write logs/ and truth.json.")
    if jobs is not None and jobs < 1:
        raise DupfindError("--jobs must be at least 1.")
    from dupfind.synth import write_scenario

    try:
        truth = write_scenario(preset, out, seed=seed, jobs=jobs, fmt=fmt)
    except ValueError as exc:
        raise DupfindError(str(exc).rstrip(".") + ".") from None
    except OSError as exc:
        raise DupfindError(f"cannot write to {out}: {exc.strerror or exc}.") from None
    counters = truth["counters"]
    sys.stderr.write(
        f"dupfind: wrote {len(truth['files'])} log files ({counters['lines']:,} lines) to {out / 'logs'} and the answer key "
        f"to {out / 'truth.json'}: {counters['actions']} actions, {counters['duplicated_actions']} duplicated, "
        f"{counters['redeliveries']} redeliveries\n"
    )
