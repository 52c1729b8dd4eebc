"""User-facing errors: one clear sentence, exit code 2, never a traceback."""


class DupfindError(Exception):
    """An input or usage problem the user can fix; printed as one line, exit code 2."""

    exit_code = 2
