"""What every part of the worker runtime (gantry.runtime) shares: its version, the Fatal error
that stops it with a message and an exit status, its log lines and the checks of its environment."""

from __future__ import annotations

import os
import sys

VERSION = "0.1.0"
USER_AGENT = f"gantry-runtime/{VERSION}"


class Fatal(Exception):
    """Stops the runtime with a message and an exit status (2: misconfigured, 1: anything else)."""

    def __init__(self, message, code=1):
        super().__init__(message)
        self.code = code


def log(message):
    print(f"gantry: {message}", flush=True)


def log_error(message):
    print(f"gantry: {message}", file=sys.stderr, flush=True)


def require_env(names, env=None):
    env = os.environ if env is None else env
    missing = [n for n in names if not env.get(n)]
    if missing:
        plural = "s" if len(missing) > 1 else ""
        raise Fatal(f"missing environment variable{plural} {', '.join(missing)} "
                    f"(the platform sets {'them' if plural else 'it'} when it starts a worker)", 2)


def _flag(value):
    return (value or "").strip().lower() in ("1", "true", "yes", "on")
