"""The worker runtime: ``python3 -m gantry.runtime``, the command of Gantry's runtime images.

It fetches the build's artifact (through a cache directory shared by the workers on a host),
imports the resource's file and then either serves queue jobs over the worker protocol or serves
a load-balanced endpoint's routes over HTTP. Standard library only: it runs before any of the
app's dependencies are on sys.path.

Environment (set by the platform):
  GANTRY_ARTIFACT_URL, GANTRY_ARTIFACT_SHA256, GANTRY_ARTIFACT_CACHE, GANTRY_RESOURCE
  queue: RUNPOD_WEBHOOK_GET_JOB, RUNPOD_WEBHOOK_POST_OUTPUT, RUNPOD_AI_API_KEY, RUNPOD_POD_ID,
         RUNPOD_WEBHOOK_PING and RUNPOD_PING_INTERVAL (optional)
  load-balanced: PORT, PORT_HEALTH (optional; defaults to PORT)
For local runs, GANTRY_PROJECT_DIR=<project> serves a resource straight from a project directory
instead of an artifact (no download, no cache; its resources are found with the scanner), and
GANTRY_ARTIFACT_DIR=<dir> an extracted artifact (manifest.json, src/, deps/) without downloading it.
GANTRY_LOCAL_API=1 serves a queue resource over HTTP on PORT without a platform (/runsync, /run,
/status/{id}, /health, /ping).

Live endpoints (docs/dev-loop.md): with GANTRY_LIVE_RELOAD=1 a thread polls the worker protocol's
source route every GANTRY_SOURCE_POLL_MS (default 500) for a version above the one running
(GANTRY_SOURCE_VERSION at start) and swaps the new code in without a restart.

This module is the entry: it reads the environment and starts the parts, which live in
gantry/_runtime_*.py (artifact, app, reload, stop, client, queue, lb, local, common).
"""

from __future__ import annotations

import inspect  # noqa: F401 (tests reach it as gantry.runtime.inspect)
import os
import socket
import sys
import tempfile

# The runtime's parts, one module each. Their public names are this module's too, as they were
# when it held them all: gantry.runtime.QueueWorker, gantry.runtime.ensure_artifact, ...
from ._runtime_app import (  # noqa: F401
    import_resource_module,
    lb_target,
    load_app,
    load_manifest_resource,
    project_resource,
    queue_target,
    swap_source,
)
from ._runtime_artifact import DOWNLOAD_TIMEOUT_S, ensure_artifact, ensure_source  # noqa: F401
from ._runtime_client import REQUEST_TIMEOUT_S, Backoff, Client, RequestFailed  # noqa: F401
from ._runtime_common import USER_AGENT, VERSION, Fatal, _flag, log, log_error, require_env  # noqa: F401
from ._runtime_lb import LbApp, make_handler, serve_lb  # noqa: F401
from ._runtime_local import LOCAL_JOBS_KEPT, LocalApi, serve_local_api  # noqa: F401
from ._runtime_queue import QUEUE_ENV, TAKE_TIMEOUT_S, FunctionRunner, JobInputError, QueueWorker  # noqa: F401
from ._runtime_reload import RELOAD_ENV, SOURCE_POLL_TIMEOUT_S, SourceReloader, worker_base_url  # noqa: F401
from ._runtime_stop import Stopper  # noqa: F401

ARTIFACT_ENV = ("GANTRY_ARTIFACT_URL", "GANTRY_ARTIFACT_SHA256", "GANTRY_ARTIFACT_CACHE", "GANTRY_RESOURCE")


def main(env=None):
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.reconfigure(line_buffering=True)
        except (AttributeError, ValueError):
            pass
    env = os.environ if env is None else env
    try:
        return _main(env)
    except Fatal as e:
        log_error(str(e))
        return e.code


def _main(env):
    project = env.get("GANTRY_PROJECT_DIR")
    artifact_dir = env.get("GANTRY_ARTIFACT_DIR")
    cache = env.get("GANTRY_ARTIFACT_CACHE")
    if project:
        require_env(("GANTRY_RESOURCE",), env)
        src = os.path.abspath(project)
        resource = project_resource(src, env["GANTRY_RESOURCE"])
        deps = None
    elif artifact_dir:
        # An artifact already extracted (`gantry deploy --preview`, tests): no download, no cache.
        require_env(("GANTRY_RESOURCE",), env)
        root = os.path.abspath(artifact_dir)
        if not os.path.isfile(os.path.join(root, "manifest.json")):
            raise Fatal(f"GANTRY_ARTIFACT_DIR={artifact_dir!r} is not an extracted artifact (no manifest.json there)", 2)
        resource = load_manifest_resource(root, env["GANTRY_RESOURCE"])
        src, deps = os.path.join(root, "src"), os.path.join(root, "deps")
    else:
        require_env(ARTIFACT_ENV, env)
        try:
            root = ensure_artifact(env["GANTRY_ARTIFACT_URL"], env["GANTRY_ARTIFACT_SHA256"], cache)
        except OSError as e:
            raise Fatal(f"artifact cache {cache}: {e}") from None
        resource = load_manifest_resource(root, env["GANTRY_RESOURCE"])
        src, deps = os.path.join(root, "src"), os.path.join(root, "deps")

    kind = resource.get("kind")
    local_api = kind == "queue" and _flag(env.get("GANTRY_LOCAL_API"))
    live = _flag(env.get("GANTRY_LIVE_RELOAD"))
    # Check the rest of the environment before importing the app, which may take minutes.
    if kind == "queue" and not local_api:
        require_env(QUEUE_ENV, env)
    elif kind in ("queue", "lb"):
        require_env(("PORT",), env)
    else:
        raise Fatal(f"resource {resource.get('name')!r} has unknown kind {kind!r}")
    if live:
        require_env(RELOAD_ENV, env)
        worker_base_url(env)
    try:
        port = int(env.get("PORT") or 0)
        health_port = int(env.get("PORT_HEALTH") or port)
    except ValueError:
        raise Fatal(f"PORT and PORT_HEALTH must be port numbers, got {env.get('PORT')!r} and {env.get('PORT_HEALTH')!r}", 2) from None

    module = load_app(resource, src, deps)
    stopper = Stopper()
    stopper.install()
    target_of = queue_target(resource) if kind == "queue" else lb_target(resource)
    target = target_of(module)

    def live_reload(apply):
        if not live:
            return
        # Without a shared cache (local runs) the versions go to a directory of this process.
        reloader = SourceReloader(env, resource, src, cache or tempfile.mkdtemp(prefix="gantry-sources-"), target_of, apply, stopper)
        # A worker started after uploads runs the newest version from its first job or request on.
        reloader.poll_once()
        reloader.start()

    if kind == "queue" and not local_api:
        worker = QueueWorker(target, env, stopper)
        live_reload(worker.set_function)
        worker.run()
        return 0
    if local_api:
        runner = FunctionRunner(target, "local", socket.gethostname())
        live_reload(runner.set_function)
        try:
            serve_local_api(runner, port, stopper)
        except OSError as e:
            raise Fatal(f"cannot listen: {e}") from None
        return 0

    for r in resource.get("routes") or []:
        if (r["method"], r["path"]) not in target:
            log_error(f"warning: route {r['method']} {r['path']} is in the manifest but was not registered on import")
    app = LbApp(target)
    live_reload(app.set_routes)
    try:
        serve_lb(app, port, health_port, stopper)
    except OSError as e:
        raise Fatal(f"cannot listen: {e}") from None
    return 0


if __name__ == "__main__":
    sys.exit(main())
