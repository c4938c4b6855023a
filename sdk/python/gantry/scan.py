"""Finds a project's Gantry resources by reading its source with ``ast`` (never importing it).

Run as a script with any Python >= 3.10 and nothing installed::

    python3 scan.py PROJECT_DIR            # {"resources": [...], "errors": [...]}
    python3 scan.py --files PROJECT_DIR    # {"files": [...]}: every file the ignore rules let through

The scanner checks decorator arguments with the code ``gantry.endpoint`` uses at import time
(_scan_config.py), so both accept and reject exactly the same things; the ignore rules are in
_scan_ignore.py. This module and those two must stay standard-library only and import nothing else
from the package: the CLI runs this file as a bare file.
"""

from __future__ import annotations

import ast
import json
import os
import sys

# The argument checks and the ignore rules, with their public names re-exported: gantry's
# decorators import the checks from here, as they did when this module held them.
if __package__:
    from ._scan_config import *  # noqa: F403
    from ._scan_ignore import *  # noqa: F403
else:
    # A bare file (python3 scan.py): there is no package to import from, and with -I or -P this
    # file's directory is not on sys.path. The siblings leave no bytecode beside it, as this file
    # alone never did.
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    sys.dont_write_bytecode = True
    from _scan_config import *  # noqa: F403
    from _scan_ignore import *  # noqa: F403


class _Fail(Exception):
    def __init__(self, line, message):
        super().__init__(message)
        self.line = line
        self.message = message


def _literal(node, what):
    """The value of a literal argument, as JSON data; _Fail naming the line otherwise."""
    try:
        value = ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        raise _Fail(node.lineno, f"{what} must be a literal (string, number, bool, None, or a list/tuple/dict of them), "
                                 f"got `{ast.unparse(node)}`: resources are read from the source without running it") from None
    if not _jsonable(value):
        raise _Fail(node.lineno, f"{what} must be a string, number, bool, None, or a list/tuple/dict of them, got `{ast.unparse(node)}`")
    return value


def _jsonable(v):
    if v is None or isinstance(v, (str, bool, int)):
        return True
    if isinstance(v, float):
        return v == v and v not in (float("inf"), float("-inf"))
    if isinstance(v, (list, tuple)):
        return all(_jsonable(x) for x in v)
    if isinstance(v, dict):
        return all(isinstance(k, str) and _jsonable(x) for k, x in v.items())
    return False


def _to_json(v):
    if isinstance(v, tuple):
        return [_to_json(x) for x in v]
    if isinstance(v, list):
        return [_to_json(x) for x in v]
    if isinstance(v, dict):
        return {k: _to_json(x) for k, x in v.items()}
    return v


def _call_args(call, what):
    """The literal arguments of an endpoint(...) / Endpoint(...) call; the name may be positional."""
    args = {}
    if len(call.args) > 1:
        raise _Fail(call.lineno, f"{what} takes the name as its only positional argument; pass the rest as keywords")
    if call.args:
        if isinstance(call.args[0], ast.Starred):
            raise _Fail(call.lineno, f"{what} cannot take *args: resources are read from the source without running it")
        args["name"] = _literal(call.args[0], f"{what} argument 'name'")
    for kw in call.keywords:
        if kw.arg is None:
            raise _Fail(call.lineno, f"{what} cannot take **kwargs: resources are read from the source without running it")
        if kw.arg in args:
            raise _Fail(kw.value.lineno, f"{what} got {kw.arg!r} twice")
        args[kw.arg] = _literal(kw.value, f"{what} argument {kw.arg!r}")
    return args


def _clip(text, limit):
    """The manifest bounds these lengths; a long docstring line or type hint is shortened, not an error."""
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _summary(fn):
    doc = ast.get_docstring(fn)
    if not doc:
        return None
    for line in doc.splitlines():
        if line.strip():
            return _clip(line.strip(), 1000)
    return None


def _params(fn):
    """A queue function's parameters: the members its job input may have."""
    a = fn.args
    positional = a.posonlyargs + a.args
    # a.defaults belongs to the last parameters of posonlyargs + args together.
    defaults = [None] * (len(positional) - len(a.defaults)) + list(a.defaults)
    if any(d is None for d in defaults[:len(a.posonlyargs)]):
        raise _Fail(fn.lineno, f"function {fn.name!r}: positional-only parameters cannot be filled from a job's input object")
    params = []
    pairs = list(zip(a.args, defaults[len(a.posonlyargs):])) + list(zip(a.kwonlyargs, a.kw_defaults))
    for arg, default in pairs:
        p = {"name": arg.arg, "annotation": _clip(ast.unparse(arg.annotation), 500) if arg.annotation is not None else None,
             "required": default is None}
        if default is not None:
            try:
                value = ast.literal_eval(default)
                if _jsonable(value):
                    p["default"] = _to_json(value)
            except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                pass  # computed defaults are fine at run time; there is just nothing to show
        params.append(p)
    return params


def _route_arity(fn):
    """A route function gets at most one argument: the JSON body (the query for GET/DELETE)."""
    a = fn.args
    required = len(a.posonlyargs + a.args) - len(a.defaults)
    if required > 1 or any(d is None for d in a.kw_defaults):
        raise _Fail(fn.lineno, f"route function {fn.name!r} takes at most one parameter (the JSON body, or the query for GET/DELETE)")


class _FileScanner:
    def __init__(self, rel, tree):
        self.rel = rel
        self.tree = tree
        self.resources = []
        self.errors = []
        self.names = {}     # local name -> "endpoint" | "Endpoint"
        self.modules = set()  # local names bound to the gantry module
        self.objects = {}   # module-level name -> the lb resource it holds
        self.imports = set()  # top-level packages the file imports (absolute imports only)

    def error(self, line, message):
        self.errors.append({"file": self.rel, "line": line, "message": message})

    def run(self):
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Import):
                self.imports.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                self.imports.add(node.module.split(".")[0])
            if isinstance(node, ast.ImportFrom) and node.module == "gantry" and node.level == 0:
                for alias in node.names:
                    if alias.name in ("endpoint", "Endpoint"):
                        self.names[alias.asname or alias.name] = alias.name
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name == "gantry":
                        self.modules.add(alias.asname or "gantry")
        if not self.names and not self.modules:
            return
        top = set(id(n) for n in self.tree.body)
        # Endpoint objects first, so that route decorators anywhere in the file find them.
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Call) and self._which(node.func) == "Endpoint":
                self._endpoint_object(node, top)
        for node in ast.walk(self.tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self._function(node, id(node) in top)
        for holder, resource in self.objects.items():
            if resource is not None and not resource["routes"]:
                self.error(resource["line"], f"Endpoint {resource['name']!r} has no routes: add one with @{holder}.post(\"/path\") "
                                             "(routes must be in the same file as the Endpoint)")
                self.resources.remove(resource)

    def _which(self, func):
        """"endpoint" / "Endpoint" when the expression names one of gantry's, else None."""
        if isinstance(func, ast.Name):
            return self.names.get(func.id)
        if (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in self.modules
                and func.attr in ("endpoint", "Endpoint")):
            return func.attr
        return None

    def _endpoint_object(self, call, top):
        holder = None
        for stmt in self.tree.body:
            if isinstance(stmt, ast.Assign) and stmt.value is call and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
                holder = stmt.targets[0].id
            elif isinstance(stmt, ast.AnnAssign) and stmt.value is call and isinstance(stmt.target, ast.Name):
                holder = stmt.target.id
        if holder is None:
            self.error(call.lineno, "Endpoint(...) must be assigned to a module-level name, e.g. api = Endpoint(name=\"api\")")
            return
        try:
            name, config = resource_config("lb", _call_args(call, "Endpoint()"))
        except _Fail as e:
            self.error(e.line, e.message)
            self.objects[holder] = None
            return
        except ConfigError as e:
            self.error(call.lineno, str(e))
            self.objects[holder] = None
            return
        resource = {"name": name, "kind": "lb", "file": self.rel, "line": call.lineno, "object": holder, "routes": []}
        resource.update(config)
        self.objects[holder] = resource
        self.resources.append(resource)

    def _function(self, fn, at_top):
        for deco in fn.decorator_list:
            target = deco.func if isinstance(deco, ast.Call) else deco
            kind = self._which(target)
            if kind == "endpoint":
                self._queue(fn, deco, at_top)
            elif kind == "Endpoint":
                self.error(deco.lineno, "Endpoint is not a decorator: create it with api = Endpoint(name=...) and decorate routes with @api.post(\"/path\")")
            elif (isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name)
                  and target.value.id in self.objects and target.attr.upper() in HTTP_METHODS):
                self._route(fn, deco, target)

    def _queue(self, fn, deco, at_top):
        if not isinstance(deco, ast.Call):
            self.error(deco.lineno, "@endpoint needs arguments, e.g. @endpoint(name=\"my-worker\")")
            return
        if not at_top:
            self.error(deco.lineno, f"@endpoint function {fn.name!r} must be defined at module level")
            return
        try:
            name, config = resource_config("queue", _call_args(deco, "endpoint()"))
            params = _params(fn)
        except _Fail as e:
            self.error(e.line, e.message)
            return
        except ConfigError as e:
            self.error(deco.lineno, str(e))
            return
        resource = {"name": name, "kind": "queue", "file": self.rel, "line": deco.lineno, "function": fn.name,
                    "summary": _summary(fn), "params": params}
        resource.update(config)
        self.resources.append(resource)

    def _route(self, fn, deco, target):
        resource = self.objects[target.value.id]
        if not isinstance(deco, ast.Call):
            self.error(deco.lineno, f"@{target.value.id}.{target.attr} needs the route path, e.g. @{target.value.id}.{target.attr}(\"/process\")")
            return
        if resource is None:
            return  # the Endpoint itself is already an error
        try:
            if len(deco.args) != 1 or deco.keywords:
                raise _Fail(deco.lineno, f"@{target.value.id}.{target.attr}(...) takes exactly one argument, the path")
            path = _literal(deco.args[0], "the route path")
            method = check_route(target.attr, path)
            _route_arity(fn)
        except _Fail as e:
            self.error(e.line, e.message)
            return
        except ConfigError as e:
            self.error(deco.lineno, str(e))
            return
        if any(r["method"] == method and r["path"] == path for r in resource["routes"]):
            self.error(deco.lineno, f"route {method} {path} of {resource['name']!r} is defined twice")
            return
        resource["routes"].append({"method": method, "path": path, "function": fn.name, "summary": _summary(fn)})


def scan_source(rel, data):
    """Scans one file's bytes; returns (resources, errors)."""
    resources, errors, _ = _scan_file(rel, data)
    return resources, errors


def _scan_file(rel, data):
    """(resources, errors, the top-level packages the file imports)."""
    try:
        tree = ast.parse(data, filename=rel)
    except SyntaxError as e:
        return [], [{"file": rel, "line": e.lineno or 1, "message": f"SyntaxError: {e.msg}"}], set()
    except (ValueError, UnicodeDecodeError) as e:  # null bytes, undecodable text
        return [], [{"file": rel, "line": 1, "message": f"cannot read as Python: {e}"}], set()
    except RecursionError:
        return [], [{"file": rel, "line": 1, "message": "too deeply nested to parse"}], set()
    s = _FileScanner(rel, tree)
    s.run()
    return s.resources, s.errors, s.imports


def scan_project(root):
    """The scanner's whole answer for a project directory."""
    resources, errors, imports = [], [], {}
    for rel in project_files(root):
        if not rel.endswith(".py"):
            continue
        try:
            with open(os.path.join(root, rel), "rb") as f:
                data = f.read()
        except OSError as e:
            errors.append({"file": rel, "line": 1, "message": f"cannot read: {e.strerror}"})
            continue
        r, e, i = _scan_file(rel, data)
        resources.extend(r)
        errors.extend(e)
        if r:
            imports[rel] = sorted(i)
    seen = {}
    unique = []
    for r in resources:
        first = seen.get(r["name"])
        if first is not None:
            errors.append({"file": r["file"], "line": r["line"],
                           "message": f"resource name {r['name']!r} is already used at {first['file']}:{first['line']}"})
            continue
        seen[r["name"]] = r
        unique.append(r)
    errors.sort(key=lambda e: (e["file"], e["line"]))
    # What each resource's file imports: the CLI checks it against what the runtime images have.
    return {"resources": unique, "errors": errors, "imports": imports}


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    files_only = "--files" in argv
    rest = [a for a in argv if a != "--files"]
    if len(rest) != 1 or rest[0].startswith("-"):
        print("usage: scan.py [--files] PROJECT_DIR", file=sys.stderr)
        return 2
    root = rest[0]
    if not os.path.isdir(root):
        print(f"scan.py: {root} is not a directory", file=sys.stderr)
        return 2
    answer = {"files": project_files(root)} if files_only else scan_project(root)
    sys.stdout.write(json.dumps(answer, indent=None, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
