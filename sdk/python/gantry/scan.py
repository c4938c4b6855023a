"""Finds a project's Gantry resources by reading its source with ``ast`` (never importing it).

Run as a script with any Python >= 3.10 and nothing installed::

    python3 scan.py PROJECT_DIR            # {"resources": [...], "errors": [...]}
    python3 scan.py --files PROJECT_DIR    # {"files": [...]}: every file the ignore rules let through

This module is also where the decorator arguments are checked, so that ``gantry.endpoint`` (at
import time) and the scanner (at build time) accept and reject exactly the same things. It must
stay standard-library only and import nothing from the package: the CLI runs it as a bare file.
"""

from __future__ import annotations

import ast
import json
import os
import re
import sys

IGNORE_FILE = ".gantryignore"
# Never part of a project, whatever the ignore file says (it cannot re-include them).
ALWAYS_IGNORED = frozenset({".git", ".gantry", ".venv", "venv", "__pycache__", "node_modules", ".env"})

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


# ---------------------------------------------------------------------------------------------
# Ignore rules (gitignore syntax)


def _glob_to_regex(pattern):
    """Translates one gitignore glob (already without leading '/', trailing '/' and '!') to a regex body."""
    out = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "*":
            if pattern.startswith("**", i):
                at_start = i == 0 or pattern[i - 1] == "/"
                after = i + 2
                if at_start and after == n:
                    out.append(".*")  # "dir/**": everything inside
                    i = after
                    continue
                if at_start and pattern.startswith("/", after):
                    out.append("(?:.*/)?")  # "**/x" and "a/**/b": any number of directories, none included
                    i = after + 1
                    continue
                # Any other "**" is an ordinary star.
                out.append("[^/]*")
                i = after
                continue
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            j = i + 1
            if j < n and pattern[j] in "!^":
                j += 1
            if j < n and pattern[j] == "]":
                j += 1
            while j < n and pattern[j] != "]":
                j += 1
            if j >= n:
                out.append(re.escape(c))  # no closing bracket: a literal '['
            else:
                body = pattern[i + 1:j]
                neg = body[:1] in ("!", "^")
                if neg:
                    body = body[1:]
                body = body.replace("\\", "\\\\")
                out.append(("[^/" if neg else "[") + body + "]")
                i = j + 1
                continue
        elif c == "\\" and i + 1 < n:
            i += 1
            out.append(re.escape(pattern[i]))
        else:
            out.append(re.escape(c))
        i += 1
    return "".join(out)


class IgnoreRules:
    """gitignore-style rules: the last rule that matches a path decides; '!' re-includes."""

    def __init__(self, lines=()):
        self.rules = []  # (regex, negated, dir_only)
        for raw in lines:
            self.add(raw)

    def add(self, raw):
        line = raw.rstrip("\n").rstrip("\r")
        # Trailing spaces are dropped unless escaped with a backslash.
        stripped = line.rstrip(" ")
        if stripped.endswith("\\") and len(stripped) < len(line):
            stripped += " "
        line = stripped
        if not line or line.startswith("#"):
            return
        negated = line.startswith("!")
        if negated:
            line = line[1:]
        elif line.startswith("\\!") or line.startswith("\\#"):
            line = line[1:]
        dir_only = line.endswith("/")
        line = line.rstrip("/")
        if not line:
            return
        # A slash anywhere but at the end ties the pattern to the project root.
        anchored = "/" in line
        line = line.lstrip("/")
        if not line:
            return
        body = _glob_to_regex(line)
        regex = re.compile(("^" if anchored else "^(?:.*/)?") + body + "$", re.DOTALL)
        self.rules.append((regex, negated, dir_only))

    def ignored(self, rel, is_dir):
        """Whether the path (relative, '/'-separated) is ignored; its parents are not considered."""
        if any(part in ALWAYS_IGNORED for part in rel.split("/")):
            return True
        result = False
        for regex, negated, dir_only in self.rules:
            if dir_only and not is_dir:
                continue
            if regex.match(rel):
                result = not negated
        return result


def load_ignore_rules(root):
    path = os.path.join(root, IGNORE_FILE)
    try:
        with open(path, encoding="utf-8") as f:
            return IgnoreRules(f.read().splitlines())
    except FileNotFoundError:
        return IgnoreRules()


def project_files(root, rules=None):
    """Every file under root that the ignore rules let through, relative and '/'-separated, sorted.

    As with git, a file inside an ignored directory cannot be re-included: ignored directories are
    not entered. Symbolic links are listed only when they point at a file inside the project, so a
    link cannot pull files from elsewhere on the machine into an artifact.
    """
    root = os.path.abspath(root)
    real_root = os.path.realpath(root)
    rules = rules if rules is not None else load_ignore_rules(root)
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = os.path.relpath(dirpath, root).replace(os.sep, "/")
        rel_dir = "" if rel_dir == "." else rel_dir + "/"
        keep = []
        for d in sorted(dirnames):
            full = os.path.join(dirpath, d)
            if os.path.islink(full):
                continue  # os.walk does not follow them either; say so by skipping explicitly
            if not rules.ignored(rel_dir + d, True):
                keep.append(d)
        dirnames[:] = keep
        for name in filenames:
            full = os.path.join(dirpath, name)
            rel = rel_dir + name
            if rules.ignored(rel, False):
                continue
            if os.path.islink(full):
                target = os.path.realpath(full)
                if not os.path.isfile(target) or os.path.commonpath([real_root, target]) != real_root:
                    continue
            elif not os.path.isfile(full):
                continue  # sockets, fifos
            found.append(rel)
    return sorted(found)


# ---------------------------------------------------------------------------------------------
# The scanner


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

    def error(self, line, message):
        self.errors.append({"file": self.rel, "line": line, "message": message})

    def run(self):
        for node in ast.walk(self.tree):
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
    try:
        tree = ast.parse(data, filename=rel)
    except SyntaxError as e:
        return [], [{"file": rel, "line": e.lineno or 1, "message": f"SyntaxError: {e.msg}"}]
    except (ValueError, UnicodeDecodeError) as e:  # null bytes, undecodable text
        return [], [{"file": rel, "line": 1, "message": f"cannot read as Python: {e}"}]
    except RecursionError:
        return [], [{"file": rel, "line": 1, "message": "too deeply nested to parse"}]
    s = _FileScanner(rel, tree)
    s.run()
    return s.resources, s.errors


def scan_project(root):
    """The scanner's whole answer for a project directory."""
    resources, errors = [], []
    for rel in project_files(root):
        if not rel.endswith(".py"):
            continue
        try:
            with open(os.path.join(root, rel), "rb") as f:
                data = f.read()
        except OSError as e:
            errors.append({"file": rel, "line": 1, "message": f"cannot read: {e.strerror}"})
            continue
        r, e = scan_source(rel, data)
        resources.extend(r)
        errors.extend(e)
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
    return {"resources": unique, "errors": errors}


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
