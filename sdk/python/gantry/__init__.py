"""Gantry: deploy plain Python functions as serverless endpoints.

    from gantry import endpoint, Endpoint

    @endpoint(name="gpu-worker", gpu=["ADA_24"])
    def generate(prompt: str, steps: int = 20) -> dict: ...

    api = Endpoint(name="api", cpu="cpu3c-2-4", workers=(1, 3))

    @api.post("/process")
    def process(body: dict) -> dict: ...

The decorators change nothing about the functions: they check their arguments (the same checks
`gantry build` applies, so a mistake shows up as soon as the file is imported) and record the
configuration on the function (``fn.__gantry__``) or the Endpoint object. Deploying reads the
source with ``ast`` (gantry/scan.py), so every argument must be a literal.
"""

from __future__ import annotations

import inspect

from .scan import ConfigError, check_route, resource_config

__version__ = "0.1.0"
__all__ = ["endpoint", "Endpoint", "ConfigError", "__version__"]


def _given(**kwargs):
    return {k: v for k, v in kwargs.items() if v is not None}


def _check_queue_function(fn):
    if not callable(fn) or inspect.isclass(fn):
        raise ConfigError(f"@endpoint decorates a function, not {fn!r}")
    for p in inspect.signature(fn).parameters.values():
        if p.kind is inspect.Parameter.POSITIONAL_ONLY and p.default is inspect.Parameter.empty:
            raise ConfigError(f"@endpoint function {fn.__name__!r}: positional-only parameter {p.name!r} "
                              "cannot be filled from a job's input object")


def _check_route_function(fn, method, path):
    if not callable(fn) or inspect.isclass(fn):
        raise ConfigError(f"route {method} {path} decorates a function, not {fn!r}")
    params = inspect.signature(fn).parameters.values()
    required = [p for p in params if p.default is inspect.Parameter.empty
                and p.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)]
    if len(required) > 1 or any(p.kind is inspect.Parameter.KEYWORD_ONLY for p in required):
        raise ConfigError(f"route function {fn.__name__!r} takes at most one parameter "
                          "(the JSON body, or the query for GET/DELETE)")


def endpoint(name=None, *, gpu=None, gpu_count=None, cpu=None, workers=None, idle_timeout=None,
             dependencies=None, env=None, scaler=None, scaler_value=None, timeout=None, python_version=None):
    """Makes a queue-based endpoint of a function: each job's ``input`` object becomes its keyword
    arguments and its return value (JSON) the job's output.

    name: 1-40 of a-z, 0-9, '-', starting with a letter, unique in the project.
    gpu: GPU pool ids (e.g. ["ADA_24"]) with gpu_count GPUs per worker; or cpu: a CPU instance id
    "flavor-vcpus-memoryGb" (default "cpu3c-2-4"). workers: (min, max), default (0, 3).
    idle_timeout: seconds (default 5). scaler: "QUEUE_DELAY" (default) or "REQUEST_COUNT", with
    scaler_value (default 4). timeout: seconds per job (default 600). dependencies: pip requirement
    strings. env: environment variables. python_version: "3.10" .. "3.13".
    """
    if callable(name):
        raise ConfigError("@endpoint needs arguments, e.g. @endpoint(name=\"my-worker\")")
    resource_name, config = resource_config("queue", _given(
        name=name, gpu=gpu, gpu_count=gpu_count, cpu=cpu, workers=workers, idle_timeout=idle_timeout,
        dependencies=dependencies, env=env, scaler=scaler, scaler_value=scaler_value, timeout=timeout,
        python_version=python_version))

    def decorate(fn):
        _check_queue_function(fn)
        fn.__gantry__ = {"name": resource_name, "kind": "queue", "function": fn.__name__, **config}
        return fn

    return decorate


class Endpoint:
    """A load-balanced endpoint: HTTP routes served by every worker, requests spread over them.

    Takes the same arguments as ``endpoint`` (its scaler is always "REQUEST_COUNT"). Routes:
    ``@api.post("/path")`` and .get/.put/.patch/.delete; the route function's one parameter (if
    any) gets the parsed JSON body, or for GET and DELETE the query parameters as a dict. It may
    return a value (sent as JSON with status 200) or a (status, value) tuple.
    """

    def __init__(self, name=None, *, gpu=None, gpu_count=None, cpu=None, workers=None, idle_timeout=None,
                 dependencies=None, env=None, scaler=None, scaler_value=None, timeout=None, python_version=None):
        self.name, self.config = resource_config("lb", _given(
            name=name, gpu=gpu, gpu_count=gpu_count, cpu=cpu, workers=workers, idle_timeout=idle_timeout,
            dependencies=dependencies, env=env, scaler=scaler, scaler_value=scaler_value, timeout=timeout,
            python_version=python_version))
        # (METHOD, path) -> function, in the order they were declared.
        self.routes = {}

    def route(self, method, path):
        method = check_route(method, path)
        if (method, path) in self.routes:
            raise ConfigError(f"route {method} {path} of {self.name!r} is defined twice")

        def decorate(fn):
            _check_route_function(fn, method, path)
            self.routes[(method, path)] = fn
            return fn

        return decorate

    def get(self, path):
        return self.route("GET", path)

    def post(self, path):
        return self.route("POST", path)

    def put(self, path):
        return self.route("PUT", path)

    def patch(self, path):
        return self.route("PATCH", path)

    def delete(self, path):
        return self.route("DELETE", path)

    def __repr__(self):
        return f"Endpoint(name={self.name!r}, routes={[f'{m} {p}' for m, p in self.routes]})"
