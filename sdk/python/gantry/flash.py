"""`python3 -m gantry.flash`: the command of Gantry's flash runtime image (sdk/python/Containerfile, MODULE=gantry.flash).

A build of the hosted service's `flash` tool is a gzip tar whose root holds the project's files,
its dependencies, flash's own package, `flash_manifest.json` and one generated `handler_<resource>.py`
per resource: a queue resource's defines `handler(job)` and starts the `runpod` worker SDK when run
as a script; a load-balanced resource's defines the ASGI `app` (with `GET /ping`). The endpoint's
environment names its resource (`FLASH_RESOURCE_NAME`, written by flash). The platform gives the
worker a signed URL of the environment's active build (`GANTRY_ARTIFACT_URL`), its sha256
(`GANTRY_ARTIFACT_SHA256`) and the account's cache on the host (`GANTRY_ARTIFACT_CACHE`).

At start: the artifact is fetched (or taken from the cache), checked, staged at
/root/.runpod/artifact.tar.gz (where flash's worker images keep it; a file already there, mounted
by hand, is used when no URL is given), unpacked, and the resource's handler is served from the
unpacked tree: a queue handler through the `runpod` worker SDK, a load-balanced app by uvicorn on
`PORT`.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import runpy
import sys
import tempfile

from ._runtime_artifact import _safe_extract, ensure_flash_build
from ._runtime_common import Fatal, log

STAGED = "/root/.runpod/artifact.tar.gz"
DEFAULT_CACHE = "/var/cache/gantry/artifacts"


def _stage(tarball):
    """Makes STAGED name the verified artifact (a link into the cache: no second copy)."""
    os.makedirs(os.path.dirname(STAGED), exist_ok=True)
    tmp = f"{STAGED}.{os.getpid()}"
    try:
        os.unlink(tmp)
    except FileNotFoundError:
        pass
    os.symlink(tarball, tmp)
    os.replace(tmp, STAGED)


def unpacked_tree(env):
    """The directory of the unpacked build."""
    url = env.get("GANTRY_ARTIFACT_URL")
    if url:
        tarball, tree = ensure_flash_build(url, env.get("GANTRY_ARTIFACT_SHA256"), env.get("GANTRY_ARTIFACT_CACHE") or DEFAULT_CACHE)
        _stage(tarball)
        return tree
    if os.path.isfile(STAGED):
        tree = tempfile.mkdtemp(prefix="flash-app-")
        _safe_extract(STAGED, tree)
        log(f"unpacked {STAGED}")
        return tree
    raise Fatal(
        "no build to run: GANTRY_ARTIFACT_URL is not set and there is no "
        f"{STAGED} (the platform sets the URL for endpoints of a flash environment with an active build)",
        2,
    )


_ABI_TAG = re.compile(r"\.cpython-(3)(\d{1,2})-[^/]*\.so$")


def foreign_extension(tree, version=sys.version_info):
    """An extension module of the build compiled for another CPython (`x.cpython-312-....so` on 3.11),
    as a path relative to the tree, or None. Such a module cannot be imported: flash installs the
    build's packages for the Python version it targets (3.12 unless told), and the runtime must be
    that version."""
    own = f"{version[0]}{version[1]}"
    for folder, _dirs, files in os.walk(tree):
        for name in files:
            m = _ABI_TAG.search(name)
            if m and m.group(1) + m.group(2) != own:
                return os.path.relpath(os.path.join(folder, name), tree), f"{m.group(1)}.{m.group(2)}"
    return None


def is_load_balanced(tree, resource, env):
    """Whether the resource is load-balanced: flash's manifest says so; else FLASH_ENDPOINT_TYPE."""
    try:
        with open(os.path.join(tree, "flash_manifest.json"), encoding="utf-8") as f:
            entry = (json.load(f).get("resources") or {}).get(resource)
        if isinstance(entry, dict) and "is_load_balanced" in entry:
            return bool(entry["is_load_balanced"])
    except (OSError, ValueError, AttributeError):
        pass
    return env.get("FLASH_ENDPOINT_TYPE", "").lower() == "lb"


def serve_lb(handler_file, port):
    """Imports the handler's ASGI app and serves it on every address at port."""
    spec = importlib.util.spec_from_file_location("flash_lb_handler", handler_file)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    app = getattr(module, "app", None)
    if app is None:
        raise Fatal(f"{os.path.basename(handler_file)} defines no `app`")
    import uvicorn

    log(f"serving {os.path.basename(handler_file)} on port {port}")
    uvicorn.run(app, host="0.0.0.0", port=port, log_level="info")


def main(env=None):
    env = os.environ if env is None else env
    resource = env.get("FLASH_RESOURCE_NAME", "").strip()
    if not resource or "/" in resource or resource.startswith("."):
        raise Fatal("FLASH_RESOURCE_NAME must name the endpoint's resource (flash writes it into the endpoint)", 2)
    tree = unpacked_tree(env)
    foreign = foreign_extension(tree)
    if foreign:
        path, wanted = foreign
        raise Fatal(
            f"the build's packages are compiled for Python {wanted} ({path}) and this runtime is Python "
            f"{sys.version_info[0]}.{sys.version_info[1]}: give the platform a Python {wanted} base for the flash "
            "runtime (GANTRY_FLASH_RUNTIME_BASE_IMAGE with {python}), or build for this one "
            f"(flash deploy --python-version {sys.version_info[0]}.{sys.version_info[1]})",
            2,
        )
    handler_file = os.path.join(tree, f"handler_{resource}.py")
    if not os.path.isfile(handler_file):
        raise Fatal(f"the build has no handler_{resource}.py: is {resource!r} a resource of this build?", 2)
    # The build's own files and packages come first (it carries its own runpod_flash), and flash
    # reads its manifest from the working directory.
    os.chdir(tree)
    sys.path.insert(0, tree)
    # The runpod worker SDK's start-up probe of a public DNS server would stop workers on hosts
    # without internet access.
    os.environ.setdefault("RUNPOD_SKIP_AUTO_SYSTEM_CHECKS", "true")
    if is_load_balanced(tree, resource, env):
        serve_lb(handler_file, int(env.get("PORT") or 80))
    else:
        log(f"serving {os.path.basename(handler_file)} through the runpod worker SDK")
        sys.argv = [handler_file]
        runpy.run_path(handler_file, run_name="__main__")


if __name__ == "__main__":
    try:
        main()
    except Fatal as e:
        print(f"gantry: {e}", file=sys.stderr, flush=True)
        sys.exit(e.code)
