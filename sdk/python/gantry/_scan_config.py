"""The checks of the decorator arguments: ``endpoint(...)``, ``Endpoint(...)`` and its routes.

gantry's decorators (at import time) and the scanner (at build time) both use them, so they accept
and reject exactly the same things. Like scan.py, this module stays standard-library only and
imports nothing from the package: scan.py imports it as a bare file when the CLI runs it.
"""

from __future__ import annotations

import re

__all__ = [
    "NAME_RE", "CPU_RE", "ENV_NAME_RE", "RESERVED_ENV_RE", "ROUTE_PATH_RE", "PYTHON_VERSIONS", "SCALERS",
    "HTTP_METHODS", "DEFAULT_CPU", "DEFAULT_WORKERS", "DEFAULT_IDLE_TIMEOUT", "DEFAULT_SCALER_VALUE",
    "DEFAULT_TIMEOUT", "RESERVED_PATHS", "CONFIG_ARGS", "ConfigError", "resource_config", "check_route",
]

NAME_RE = re.compile(r"^[a-z][a-z0-9-]{0,39}$")
CPU_RE = re.compile(r"^[a-z][a-z0-9]*-[0-9]+-[0-9]+$")
ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# Set by Gantry on every worker; a resource cannot set them.
RESERVED_ENV_RE = re.compile(r"^(GANTRY_|RUNPOD_|PORT$|PORT_HEALTH$)")
ROUTE_PATH_RE = re.compile(r"^/[A-Za-z0-9._~!$&'()*+,;=:@/{}-]*$")
PYTHON_VERSIONS = ("3.10", "3.11", "3.12", "3.13")
SCALERS = ("QUEUE_DELAY", "REQUEST_COUNT")
HTTP_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")
DEFAULT_CPU = "cpu3c-2-4"
DEFAULT_WORKERS = (0, 3)
DEFAULT_IDLE_TIMEOUT = 5
DEFAULT_SCALER_VALUE = 4
DEFAULT_TIMEOUT = 600
# Answered by the runtime itself for the platform's health checks.
RESERVED_PATHS = ("/ping",)

# The keyword arguments of endpoint(...) and Endpoint(...), in the order the docs list them.
CONFIG_ARGS = (
    "name", "gpu", "gpu_count", "cpu", "workers", "idle_timeout", "dependencies", "env",
    "scaler", "scaler_value", "timeout", "python_version",
)


class ConfigError(ValueError):
    """A decorator argument that Gantry cannot deploy."""


def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v):
    return (isinstance(v, (int, float))) and not isinstance(v, bool)


def resource_config(kind, args):
    """Checks the arguments of ``endpoint(...)`` (kind "queue") or ``Endpoint(...)`` (kind "lb").

    ``args`` holds only the arguments that were given. Returns the name and the manifest fields
    (compute, workers, idleTimeout, scaler, timeout, env, dependencies, pythonVersion); raises
    ConfigError with a message meant for the person who wrote the decorator.
    """
    what = "endpoint()" if kind == "queue" else "Endpoint()"
    unknown = [k for k in args if k not in CONFIG_ARGS]
    if unknown:
        raise ConfigError(f"{what} got unknown argument {unknown[0]!r}; it takes {', '.join(CONFIG_ARGS)}")

    name = args.get("name")
    if name is None:
        raise ConfigError(f"{what} needs name=..., e.g. name=\"my-worker\"")
    if not isinstance(name, str) or not NAME_RE.match(name):
        raise ConfigError(f"{what} name {name!r} must be 1-40 characters of a-z, 0-9 and '-', starting with a letter")

    gpu, cpu = args.get("gpu"), args.get("cpu")
    if gpu is not None and cpu is not None:
        raise ConfigError(f"{what} {name!r}: give either gpu=... or cpu=..., not both")
    if gpu is not None:
        pools = [gpu] if isinstance(gpu, str) else gpu
        if not isinstance(pools, (list, tuple)) or not pools or not all(isinstance(p, str) and p.strip() for p in pools):
            raise ConfigError(f"{what} {name!r}: gpu must be a GPU pool id or a non-empty list of them, e.g. gpu=[\"ADA_24\"]")
        if len(set(pools)) != len(pools):
            raise ConfigError(f"{what} {name!r}: gpu lists a pool twice")
        if len(pools) > 16:
            raise ConfigError(f"{what} {name!r}: gpu lists at most 16 pools")
        count = args.get("gpu_count", 1)
        if not _is_int(count) or not 1 <= count <= 8:
            raise ConfigError(f"{what} {name!r}: gpu_count must be a whole number from 1 to 8, got {count!r}")
        compute = {"gpu": {"pools": [p.strip() for p in pools], "count": count}}
    else:
        if args.get("gpu_count") is not None:
            raise ConfigError(f"{what} {name!r}: gpu_count needs gpu=...")
        cpu = DEFAULT_CPU if cpu is None else cpu
        if not isinstance(cpu, str) or not CPU_RE.match(cpu):
            raise ConfigError(f"{what} {name!r}: cpu must be a CPU instance id flavor-vcpus-memoryGb, e.g. \"cpu3c-2-4\", got {cpu!r}")
        compute = {"cpu": cpu}

    workers = args.get("workers", DEFAULT_WORKERS)
    if (not isinstance(workers, (list, tuple)) or len(workers) != 2 or not all(_is_int(w) for w in workers)
            or workers[0] < 0 or workers[1] < workers[0] or workers[1] > 1000):
        raise ConfigError(f"{what} {name!r}: workers must be (min, max) with 0 <= min <= max <= 1000, got {workers!r}")

    idle = args.get("idle_timeout", DEFAULT_IDLE_TIMEOUT)
    if not _is_int(idle) or not 1 <= idle <= 3600:
        raise ConfigError(f"{what} {name!r}: idle_timeout must be whole seconds from 1 to 3600, got {idle!r}")

    # Load-balanced endpoints can only scale on requests in flight.
    scaler = args.get("scaler", "QUEUE_DELAY" if kind == "queue" else "REQUEST_COUNT")
    if scaler not in SCALERS:
        raise ConfigError(f"{what} {name!r}: scaler must be one of {', '.join(SCALERS)}, got {scaler!r}")
    if kind == "lb" and scaler != "REQUEST_COUNT":
        raise ConfigError(f"{what} {name!r}: a load-balanced endpoint scales on REQUEST_COUNT only")
    value = args.get("scaler_value", DEFAULT_SCALER_VALUE)
    if scaler == "QUEUE_DELAY" and (not _is_number(value) or not 0.5 <= value <= 10000):
        raise ConfigError(f"{what} {name!r}: scaler_value for QUEUE_DELAY is the target queue wait in seconds (>= 0.5), got {value!r}")
    if scaler == "REQUEST_COUNT" and (not _is_int(value) or not 1 <= value <= 10000):
        raise ConfigError(f"{what} {name!r}: scaler_value for REQUEST_COUNT is requests per worker (a whole number >= 1), got {value!r}")

    timeout = args.get("timeout", DEFAULT_TIMEOUT)
    if not _is_int(timeout) or not 5 <= timeout <= 24 * 3600:
        raise ConfigError(f"{what} {name!r}: timeout must be whole seconds from 5 to 86400, got {timeout!r}")

    env = args.get("env")
    env = {} if env is None else env
    if not isinstance(env, dict) or not all(isinstance(k, str) and ENV_NAME_RE.match(k) and isinstance(v, str) for k, v in env.items()):
        raise ConfigError(f"{what} {name!r}: env must map variable names to strings, e.g. env={{\"MODEL\": \"tiny\"}}")
    reserved = sorted(k for k in env if RESERVED_ENV_RE.match(k))
    if reserved:
        raise ConfigError(f"{what} {name!r}: env cannot set {', '.join(reserved)}: GANTRY_*, RUNPOD_*, PORT and PORT_HEALTH are set by Gantry")
    if len(env) > 40 or any("\n" in v or "\r" in v or len(v) > 32 * 1024 for v in env.values()):
        raise ConfigError(f"{what} {name!r}: env holds at most 40 variables, each one line of at most 32 KiB")

    deps = args.get("dependencies")
    deps = [] if deps is None else deps
    if not isinstance(deps, (list, tuple)) or not all(isinstance(d, str) and d.strip() for d in deps):
        raise ConfigError(f"{what} {name!r}: dependencies must be a list of requirement strings, e.g. [\"pillow==11.3.0\"]")

    python_version = args.get("python_version")
    if python_version is not None and python_version not in PYTHON_VERSIONS:
        raise ConfigError(f"{what} {name!r}: python_version must be one of {', '.join(PYTHON_VERSIONS)} (a string), got {python_version!r}")

    return name, {
        "compute": compute,
        "workers": {"min": workers[0], "max": workers[1]},
        "idleTimeout": idle,
        "scaler": {"type": scaler, "value": value},
        "timeout": timeout,
        "env": dict(env),
        "dependencies": [d.strip() for d in deps],
        "pythonVersion": python_version,
    }


def check_route(method, path):
    """Checks one route of a load-balanced Endpoint; returns the method upper-cased."""
    method = method.upper()
    if method not in HTTP_METHODS:
        raise ConfigError(f"route method must be one of {', '.join(HTTP_METHODS)}, got {method!r}")
    if not isinstance(path, str) or not ROUTE_PATH_RE.match(path) or len(path) > 200:
        raise ConfigError(f"route path must start with '/' and hold only URL path characters (no query), e.g. \"/process\", got {path!r}")
    if path in RESERVED_PATHS:
        raise ConfigError(f"route path {path} is reserved for the platform's health check")
    return method
