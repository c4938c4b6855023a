"""Loading the app: the resource to serve (from a build's manifest or a scanned project), its file
imported with the source and dependencies on sys.path, and imported again from a new source
directory in place of the old one (live reload); what is served is the function or the routes."""

from __future__ import annotations

import importlib
import importlib.util
import json
import keyword
import os
import sys
import time
import traceback

from ._runtime_common import Fatal, log, log_error


def load_manifest_resource(root, name):
    try:
        with open(os.path.join(root, "manifest.json"), encoding="utf-8") as f:
            manifest = json.load(f)
    except (OSError, ValueError) as e:
        raise Fatal(f"cannot read the artifact's manifest.json: {e}") from None
    resources = manifest.get("resources") or []
    for r in resources:
        if r.get("name") == name:
            want = manifest.get("pythonVersion")
            have = f"{sys.version_info.major}.{sys.version_info.minor}"
            if want and want != have:
                log_error(f"warning: the artifact was built for Python {want}, this is Python {have}")
            return r
    names = ", ".join(r.get("name", "?") for r in resources) or "none"
    raise Fatal(f"GANTRY_RESOURCE={name!r} is not in this build (its resources: {names})", 2)


def project_resource(root, name):
    """A resource found by scanning a project directory (GANTRY_PROJECT_DIR)."""
    from gantry.scan import scan_project

    result = scan_project(root)
    for r in result["resources"]:
        if r["name"] == name:
            return r
    problems = "; ".join(f"{e['file']}:{e['line']}: {e['message']}" for e in result["errors"])
    names = ", ".join(r["name"] for r in result["resources"]) or "none"
    raise Fatal(f"no resource {name!r} in {root} (found: {names}){'; ' + problems if problems else ''}", 2)


def import_resource_module(src, rel):
    """Imports the resource's file the way `python -c 'import pkg.mod'` would from src."""
    path = os.path.join(src, rel)
    parts = rel[:-3].split("/") if rel.endswith(".py") else []
    if parts and parts[-1] == "__init__":
        parts = parts[:-1]
    if parts and all(p.isidentifier() and not keyword.iskeyword(p) for p in parts):
        name = ".".join(parts)
        loaded = sys.modules.get(name)
        # A file named like a module that is already loaded (queue.py, signal.py, ...) would get
        # that module back; such a file is loaded from its path below instead.
        if loaded is None or os.path.realpath(getattr(loaded, "__file__", "") or "") == os.path.realpath(path):
            return importlib.import_module(name)
    # Not importable by name (e.g. a directory with a '-'): load the file itself.
    module_name = "gantry_app_" + "".join(c if c.isalnum() else "_" for c in rel)
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise Fatal(f"cannot load {rel} as Python")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module


def _source_paths(src, rel):
    """What sys.path gets for a source directory: the directory, and the resource file's own one."""
    paths = [src]
    here = os.path.dirname(os.path.join(src, rel))
    if os.path.abspath(here) != os.path.abspath(src):
        paths.append(here)  # a worker file next to its helpers, written to run as a script
    return paths


def load_app(resource, src, deps):
    """Puts the app on sys.path and imports the resource's file; returns the module."""
    for k, v in (resource.get("env") or {}).items():
        os.environ.setdefault(k, str(v))
    rel = resource["file"]
    paths = _source_paths(src, rel)
    if deps and os.path.isdir(deps):
        paths.append(deps)
    sys.path[0:0] = paths
    os.chdir(src)
    started = time.monotonic()
    try:
        module = import_resource_module(src, rel)
    except Exception:
        traceback.print_exc()
        raise Fatal(f"importing {rel} failed (traceback above)") from None
    log(f"imported {rel} in {time.monotonic() - started:.2f} s")
    return module


def _modules_from(src):
    """The loaded modules whose file (or package directory) lies under src."""
    base = os.path.realpath(src)

    def under(path):
        try:
            return os.path.commonpath([base, os.path.realpath(path)]) == base
        except ValueError:
            return False

    found = {}
    for name, module in list(sys.modules.items()):
        if name == "__main__" or name == "gantry" or name.startswith("gantry."):
            continue  # the runtime itself, even when a project directory holds its package
        file = getattr(module, "__file__", None)
        paths = list(getattr(module, "__path__", None) or [])
        if (file and under(file)) or any(isinstance(p, str) and under(p) for p in paths):
            found[name] = module
    return found


def swap_source(resource, old_src, new_src, target_of):
    """Imports the resource's file again from new_src in place of old_src and returns
    target_of(module) (the function or the routes to serve). The modules of the old source
    directory are dropped first, so the app's own helpers are imported anew too; the
    dependencies (deps/, the standard library) stay loaded. Any failure, in the import or in
    target_of, puts the old modules, sys.path and working directory back and raises."""
    rel = resource["file"]
    old_paths, new_paths = _source_paths(old_src, rel), _source_paths(new_src, rel)
    saved_modules = _modules_from(old_src)
    saved_path, saved_cwd = list(sys.path), os.getcwd()
    for name in saved_modules:
        sys.modules.pop(name, None)
    kept = [p for p in sys.path if p not in old_paths]
    sys.path[:] = new_paths + kept
    importlib.invalidate_caches()
    try:
        os.chdir(new_src)
        return target_of(import_resource_module(new_src, rel))
    except BaseException:
        for name in _modules_from(new_src):
            sys.modules.pop(name, None)
        sys.modules.update(saved_modules)
        sys.path[:] = saved_path
        os.chdir(saved_cwd)
        raise


def queue_target(resource):
    def target_of(module):
        fn = getattr(module, resource["function"], None)
        if not callable(fn):
            raise Fatal(f"{resource['file']} has no function {resource['function']!r}")
        return fn
    return target_of


def lb_target(resource):
    def target_of(module):
        routes = getattr(getattr(module, resource["object"], None), "routes", None)
        if not isinstance(routes, dict):
            raise Fatal(f"{resource['file']}: {resource['object']!r} is not a gantry.Endpoint")
        return routes
    return target_of
