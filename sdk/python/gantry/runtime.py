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
"""

from __future__ import annotations

import asyncio
import collections
import fcntl
import hashlib
import http.client
import http.server
import importlib
import importlib.util
import inspect
import json
import keyword
import os
import queue
import shutil
import signal
import socket
import sys
import tarfile
import tempfile
import threading
import time
import traceback
import urllib.error
import urllib.parse
import urllib.request
import uuid
import zlib

VERSION = "0.1.0"
USER_AGENT = f"gantry-runtime/{VERSION}"
TAKE_TIMEOUT_S = 120  # the server holds a take for up to ~90 s
REQUEST_TIMEOUT_S = 60
DOWNLOAD_TIMEOUT_S = 60
ARTIFACT_ENV = ("GANTRY_ARTIFACT_URL", "GANTRY_ARTIFACT_SHA256", "GANTRY_ARTIFACT_CACHE", "GANTRY_RESOURCE")
QUEUE_ENV = ("RUNPOD_WEBHOOK_GET_JOB", "RUNPOD_WEBHOOK_POST_OUTPUT", "RUNPOD_AI_API_KEY", "RUNPOD_POD_ID")
RELOAD_ENV = ("RUNPOD_AI_API_KEY", "RUNPOD_POD_ID", "RUNPOD_ENDPOINT_ID")
SOURCE_POLL_TIMEOUT_S = 10
LOCAL_JOBS_KEPT = 1000  # finished jobs the local API still answers /status for


class Fatal(Exception):
    """Stops the runtime with a message and an exit status (2: misconfigured, 1: anything else)."""

    def __init__(self, message, code=1):
        super().__init__(message)
        self.code = code


class JobInputError(Exception):
    """A job's input that does not fit the function: reported as the job's error."""


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


# ---------------------------------------------------------------------------------------------
# The artifact


def _flag(value):
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


def _download(url, dest, what="the artifact"):
    """Downloads url into the open file dest, retrying transient failures; returns the sha256 hex."""
    host = urllib.parse.urlsplit(url).hostname  # the URL is signed: log the host only
    delay = 1.0
    for attempt in range(1, 6):
        dest.seek(0)
        dest.truncate()
        digest = hashlib.sha256()
        try:
            req = urllib.request.Request(url, headers={"User-Agent": USER_AGENT})
            with urllib.request.urlopen(req, timeout=DOWNLOAD_TIMEOUT_S) as resp:
                while True:
                    chunk = resp.read(1 << 20)
                    if not chunk:
                        break
                    digest.update(chunk)
                    dest.write(chunk)
            dest.flush()
            return digest.hexdigest()
        except urllib.error.HTTPError as e:
            if e.code < 500 and e.code != 429:
                raise Fatal(f"downloading {what} from {host} failed: HTTP {e.code} "
                            "(the signed URL is minted at container start and valid for 1 h)") from None
            reason = f"HTTP {e.code}"
        except (OSError, http.client.HTTPException) as e:
            reason = str(e) or type(e).__name__
        if attempt == 5:
            raise Fatal(f"downloading {what} from {host} failed: {reason}")
        log_error(f"downloading {what} from {host} failed ({reason}); retrying in {delay:.0f} s")
        time.sleep(delay)
        delay *= 2
    raise AssertionError("unreachable")


def _safe_extract(archive, target, what="the artifact"):
    try:
        _extract(archive, target, what)
    except (tarfile.TarError, EOFError, zlib.error) as e:
        # tarfile's FilterErrors (absolute paths, '..', links leaving the tree) land here too.
        raise Fatal(f"cannot extract {what}: {type(e).__name__}: {e}") from None


def _extract(archive, target, what):
    with tarfile.open(archive, "r:gz") as tf:
        if hasattr(tarfile, "data_filter"):
            tf.extractall(target, filter="data")
            return
        # Older patch releases without extraction filters: refuse anything that leaves target.
        base = os.path.realpath(target)
        for m in tf.getmembers():
            dest = os.path.realpath(os.path.join(base, m.name))
            if os.path.commonpath([base, dest]) != base or m.isdev():
                raise Fatal(f"{what} holds an unsafe entry {m.name!r}")
            if m.issym() or m.islnk():
                link = os.path.realpath(os.path.join(os.path.dirname(dest), m.linkname)) if m.issym() \
                    else os.path.realpath(os.path.join(base, m.linkname))
                if os.path.commonpath([base, link]) != base:
                    raise Fatal(f"{what} holds a link leaving it: {m.name!r}")
        tf.extractall(target)  # noqa: S202 (checked above)


def _check_sha256(sha256, variable):
    sha256 = sha256.strip().lower()
    if len(sha256) != 64 or any(c not in "0123456789abcdef" for c in sha256):
        raise Fatal(f"{variable} must be 64 hex digits, got {sha256!r}", 2)
    return sha256


def _ensure_tree(url, sha256, cache, name, what, check=None):
    """<cache>/<name>: the extracted tree of the gzip tar at url, whose bytes must have sha256; from
    the cache when there. Workers on one host share the cache: an exclusive lock per tree makes the
    others wait for the first, and the tree appears by an atomic rename, never half-written."""
    final = os.path.join(cache, name)
    if os.path.isdir(final):
        log(f"{what} {sha256[:12]} found in the cache")
        return final
    os.makedirs(cache, exist_ok=True)
    started = time.monotonic()
    with open(os.path.join(cache, f"{name}.lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if os.path.isdir(final):
            log(f"{what} {sha256[:12]} extracted by another worker (waited {time.monotonic() - started:.1f} s)")
            return final
        # Leftovers of a worker killed half-way; only the lock holder writes these.
        for entry in os.listdir(cache):
            if entry.startswith(f".{name}."):
                path = os.path.join(cache, entry)
                shutil.rmtree(path, ignore_errors=True) if os.path.isdir(path) else os.unlink(path)
        fd, archive = tempfile.mkstemp(dir=cache, prefix=f".{name}.", suffix=".tar.gz")
        try:
            with os.fdopen(fd, "wb") as f:
                got = _download(url, f, f"the {what}")
            if got != sha256:
                raise Fatal(f"the {what}'s sha256 is {got}, expected {sha256}: refusing to run it")
            tmp = tempfile.mkdtemp(dir=cache, prefix=f".{name}.")
            try:
                _safe_extract(archive, tmp, f"the {what}")
                if check is not None:
                    check(tmp)
                os.rename(tmp, final)
            except BaseException:
                shutil.rmtree(tmp, ignore_errors=True)
                raise
        finally:
            try:
                os.unlink(archive)
            except FileNotFoundError:
                pass
    log(f"{what} {sha256[:12]} downloaded and extracted in {time.monotonic() - started:.1f} s")
    return final


def _has_manifest(tree):
    if not os.path.isfile(os.path.join(tree, "manifest.json")):
        raise Fatal("the artifact has no manifest.json at its root")


def ensure_artifact(url, sha256, cache):
    """The directory of the extracted artifact (<cache>/<sha256>): from the cache, else downloaded,
    verified and extracted into it."""
    sha256 = _check_sha256(sha256, "GANTRY_ARTIFACT_SHA256")
    return _ensure_tree(url, sha256, cache, sha256, "artifact", _has_manifest)


def ensure_source(url, sha256, cache):
    """The directory of an extracted source version (<cache>/src-<sha256>): what an artifact's src/
    holds, uploaded by `gantry dev`. Shared and made like artifacts."""
    sha256 = _check_sha256(sha256, "the source's sha256")
    return _ensure_tree(url, sha256, cache, f"src-{sha256}", "source", None)


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


def worker_base_url(env):
    """The platform's worker-facing base URL, as the protocol's URLs it was given start with it."""
    endpoint = env.get("RUNPOD_ENDPOINT_ID", "")
    marker = f"/v2/{endpoint}/"
    for name in ("RUNPOD_WEBHOOK_PING", "RUNPOD_WEBHOOK_GET_JOB", "RUNPOD_WEBHOOK_POST_OUTPUT"):
        url = env.get(name) or ""
        i = url.find(marker)
        if endpoint and i > 0:
            return url[:i]
    raise Fatal("GANTRY_LIVE_RELOAD needs the worker protocol's URLs (RUNPOD_WEBHOOK_PING or RUNPOD_WEBHOOK_GET_JOB "
                "under /v2/$RUNPOD_ENDPOINT_ID/) to find the source route", 2)


class SourceReloader:
    """Live reload: polls the worker protocol's source route for a version above the one running;
    a new one is downloaded (sha256 checked) into the shared cache, imported in place of the old
    code (swap_source) and handed to `apply` (the queue loop swaps its function between jobs; the
    HTTP server its routes at once). A version that does not import is logged and left: the old
    code keeps serving, and the same version is not tried again."""

    RETRY_DOWNLOAD_S = 5.0

    def __init__(self, env, resource, src, cache, target_of, apply, stopper):
        require_env(RELOAD_ENV, env)
        try:
            self.version = int(env.get("GANTRY_SOURCE_VERSION") or 0)
            self.interval = max(0.05, int(env.get("GANTRY_SOURCE_POLL_MS") or 500) / 1000)
        except ValueError:
            raise Fatal("GANTRY_SOURCE_VERSION and GANTRY_SOURCE_POLL_MS must be whole numbers, got "
                        f"{env.get('GANTRY_SOURCE_VERSION')!r} and {env.get('GANTRY_SOURCE_POLL_MS')!r}", 2) from None
        base = worker_base_url(env)
        self.url = f"{base}/v2/{env['RUNPOD_ENDPOINT_ID']}/source/{urllib.parse.quote(env['RUNPOD_POD_ID'], safe='')}?after="
        self.client = Client(env["RUNPOD_AI_API_KEY"])
        self.resource, self.src, self.cache = resource, src, cache
        self.target_of, self.apply, self.stopper = target_of, apply, stopper
        self.skip = {}  # (version, sha256) -> monotonic time until which it is not tried again
        self._failing = False

    def poll_once(self):
        """One poll; True when a new version now serves."""
        try:
            status, data = self.client.request("GET", self.url + str(self.version), timeout=SOURCE_POLL_TIMEOUT_S)
        except RequestFailed as e:
            if not self._failing:
                log_error(f"source poll failed ({e}); retrying every {self.interval:.1f} s")
            self._failing = True
            return False
        if status == 204:
            self._failing = False
            return False
        if status != 200:
            if not self._failing:
                log_error(f"source poll answered HTTP {status}: {data[:200]!r}; retrying every {self.interval:.1f} s")
            self._failing = True
            return False
        self._failing = False
        try:
            info = json.loads(data)
            version, sha256, url = int(info["version"]), str(info["sha256"]), str(info["url"])
        except (ValueError, KeyError, TypeError):
            log_error(f"source poll answered with something that is not a source version: {data[:200]!r}")
            return False
        key = (version, sha256)
        if version <= self.version or self.skip.get(key, 0) > time.monotonic():
            return False
        started = time.monotonic()
        try:
            new_src = ensure_source(url, sha256, self.cache)
        except (Fatal, OSError) as e:
            log_error(f"source version {version}: {e}; still running version {self.version}")
            self.skip[key] = time.monotonic() + self.RETRY_DOWNLOAD_S
            return False
        try:
            target = swap_source(self.resource, self.src, new_src, self.target_of)
        except (Exception, SystemExit):
            traceback.print_exc()
            log_error(f"source version {version} failed to import (traceback above); still running version {self.version}")
            self.skip[key] = float("inf")
            return False
        self.apply(target)
        self.src, self.version = new_src, version
        log(f"source version {version} ({sha256[:12]}) loaded in {time.monotonic() - started:.2f} s")
        return True

    def run(self):
        while not self.stopper.wait(self.interval):
            try:
                self.poll_once()
            except Exception:
                traceback.print_exc()  # the poller must outlive any surprise; the old code keeps serving

    def start(self):
        threading.Thread(target=self.run, name="gantry-source", daemon=True).start()


# ---------------------------------------------------------------------------------------------
# Stopping: SIGTERM / SIGINT


class Stopper:
    """Turns SIGTERM/SIGINT into a stop request that a blocked long-poll notices at once.

    A signal may be delivered to any thread, and a Python handler only runs once the main thread
    gets back to bytecode, which a socket read of a 90 s long-poll does not. So the C-level handler
    writes to a wakeup fd, and a thread waiting on it runs the callbacks (e.g. shutting down the
    long-poll's socket). A second SIGINT exits at once.
    """

    def __init__(self):
        self.event = threading.Event()
        self._callbacks = []
        self._lock = threading.Lock()

    def on_stop(self, callback):
        with self._lock:
            self._callbacks.append(callback)

    def is_set(self):
        return self.event.is_set()

    def wait(self, timeout=None):
        return self.event.wait(timeout)

    def stop(self, why="stop requested"):
        with self._lock:
            if self.event.is_set():
                return
            self.event.set()
            callbacks = list(self._callbacks)
        log(f"{why}: finishing what is running, then exiting")
        for cb in callbacks:
            try:
                cb()
            except Exception:
                traceback.print_exc()

    def install(self):
        r, w = socket.socketpair()
        w.setblocking(False)
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda signum, frame: None)
        signal.set_wakeup_fd(w.fileno(), warn_on_full_buffer=False)
        self._wakeup = (r, w)  # keep both ends alive

        def watch():
            while True:
                data = r.recv(64)
                if not data:
                    return
                for signum in data:
                    if signum not in (signal.SIGTERM, signal.SIGINT):
                        continue
                    # A second Ctrl-C is a person who does not want to wait. A repeated SIGTERM is
                    # not: wrappers (timeout, some inits) deliver it twice, and the platform's
                    # SIGKILL after its grace period is the hard stop.
                    if signum == signal.SIGINT and self.is_set():
                        log_error("second SIGINT: exiting now")
                        os._exit(130)
                    self.stop(f"got {signal.Signals(signum).name}")

        threading.Thread(target=watch, name="gantry-signals", daemon=True).start()


# ---------------------------------------------------------------------------------------------
# Queue: the worker protocol


class RequestFailed(Exception):
    """reused: it failed on a connection that had served before (likely closed while idle).
    status: the HTTP status when the server answered, None when the connection failed."""

    def __init__(self, message, reused, status=None):
        super().__init__(message)
        self.reused = reused
        self.status = status


class Client:
    """One persistent HTTP/1.1 connection (reconnected when it breaks or the origin changes)."""

    def __init__(self, key=None):
        self.key = key
        self.conn = None
        self.origin = None
        self.used = 0

    def close(self):
        if self.conn is not None:
            try:
                self.conn.close()
            except OSError:
                pass
        self.conn = None
        self.used = 0

    def connect(self, url):
        parts = urllib.parse.urlsplit(url)
        origin = (parts.scheme, parts.hostname, parts.port)
        if self.conn is not None and self.conn.sock is not None and origin == self.origin:
            return self.conn
        self.close()
        cls = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
        conn = cls(parts.hostname, parts.port, timeout=REQUEST_TIMEOUT_S)
        try:
            conn.connect()
        except OSError as e:
            raise RequestFailed(f"cannot connect to {parts.hostname}:{parts.port}: {e}", False) from None
        # Small requests answered at once: without this, Nagle plus delayed ACKs can add 40 ms.
        conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.conn, self.origin = conn, origin
        return conn

    @property
    def sock(self):
        return self.conn.sock if self.conn is not None else None

    def request(self, method, url, body=None, timeout=REQUEST_TIMEOUT_S):
        conn = self.connect(url)
        reused = self.used > 0
        parts = urllib.parse.urlsplit(url)
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        headers = {"User-Agent": USER_AGENT, "Accept": "application/json"}
        if self.key:
            headers["Authorization"] = self.key  # the worker protocol's key has no "Bearer"
        if body is not None:
            headers["Content-Type"] = "application/json"
        try:
            conn.sock.settimeout(timeout)
            conn.request(method, target, body=body, headers=headers)
            resp = conn.getresponse()
            data = resp.read()
        except (OSError, http.client.HTTPException) as e:
            self.close()
            raise RequestFailed(f"{method} {parts.path}: {type(e).__name__}: {e}", reused) from None
        self.used += 1
        if resp.will_close:
            self.close()
        return resp.status, data


class Backoff:
    def __init__(self, first, limit):
        self.first, self.limit, self.next = first, limit, first

    def delay(self):
        d = self.next
        self.next = min(self.limit, self.next * 2)
        return d

    def reset(self):
        self.next = self.first


def _with_param(url, param):
    # The platform's templates already hold a '?'; tolerate ones that do not.
    return url + ("&" if "?" in url else "?") + param


def _type_name(v):
    return {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}.get(type(v), type(v).__name__)


class FunctionRunner:
    """Runs jobs through a queue resource's function: the input checked against its signature, the
    result (awaited, generators collected) as a job-done body. A new function (live reload) is
    taken at the next job, never in the middle of one."""

    def __init__(self, fn, worker_id, hostname):
        self.fn = fn
        self._sig = inspect.signature(fn)
        self.worker_id = worker_id
        self.hostname = hostname
        self._loop = None
        self._next_fn = None
        self._next_lock = threading.Lock()

    def set_function(self, fn):
        with self._next_lock:
            self._next_fn = fn

    def take_new_function(self):
        """Called between jobs by the thread that runs them."""
        with self._next_lock:
            fn, self._next_fn = self._next_fn, None
        if fn is not None:
            self.fn, self._sig = fn, inspect.signature(fn)

    def check_input(self, job_input):
        name = getattr(self.fn, "__name__", "the function")
        if not isinstance(job_input, dict):
            raise JobInputError(f"the job's input must be a JSON object of {name}'s parameters, got {_type_name(job_input)}")
        params = self._sig.parameters.values()
        accepts_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params)
        named = {p.name for p in params if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)}
        unknown = sorted(k for k in job_input if k not in named) if not accepts_any else []
        missing = [p.name for p in params if p.name in named and p.default is inspect.Parameter.empty and p.name not in job_input]
        problems = []
        if missing:
            problems.append(f"missing required parameter{'s' if len(missing) > 1 else ''} {', '.join(missing)}")
        if unknown:
            problems.append(f"unknown parameter{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}")
        if problems:
            raise JobInputError(f"the job's input does not fit {name}{self._sig}: {'; '.join(problems)}")

    def _await(self, awaitable):
        if self._loop is None:
            # One loop for the worker's life, so clients an app caches on it keep working.
            self._loop = asyncio.new_event_loop()
            asyncio.set_event_loop(self._loop)
        return self._loop.run_until_complete(awaitable)

    def run_job(self, job):
        """Runs one job; returns the job-done body (bytes)."""
        started = time.monotonic()
        job_id = job["id"]
        try:
            job_input = job.get("input")
            self.check_input(job_input)
            result = self.fn(**job_input)
            if inspect.isawaitable(result):
                result = self._await(result)
            if inspect.isasyncgen(result):
                result = self._await(_collect_async(result))
            elif inspect.isgenerator(result):
                result = list(result)
            try:
                body = json.dumps({"output": result}, allow_nan=False)
            except (TypeError, ValueError) as e:
                raise TypeError(f"the function's return value cannot be sent as JSON: {e}") from None
            log(f"job {job_id} done in {time.monotonic() - started:.3f} s")
            return body.encode()
        except (Exception, SystemExit) as e:
            tb = "" if isinstance(e, JobInputError) else traceback.format_exc()
            log_error(f"job {job_id} failed: {type(e).__name__}: {e}\n{tb}".rstrip())
            error = {
                "error_type": type(e).__name__,
                "error_message": str(e),
                "error_traceback": tb,
                "hostname": self.hostname,
                "worker_id": self.worker_id,
            }
            return json.dumps({"error": json.dumps(error)}).encode()


class QueueWorker(FunctionRunner):
    def __init__(self, fn, env, stopper):
        super().__init__(fn, env["RUNPOD_POD_ID"], env.get("RUNPOD_POD_HOSTNAME") or socket.gethostname())
        self.stopper = stopper
        self.key = env["RUNPOD_AI_API_KEY"]
        take = env["RUNPOD_WEBHOOK_GET_JOB"].replace("$RUNPOD_POD_ID", self.worker_id).replace("$ID", self.worker_id)
        self.take_url = _with_param(take, "job_in_progress=0")
        self.done_template = env["RUNPOD_WEBHOOK_POST_OUTPUT"].replace("$RUNPOD_POD_ID", self.worker_id)
        ping = env.get("RUNPOD_WEBHOOK_PING")
        self.ping_url = ping.replace("$RUNPOD_POD_ID", self.worker_id) if ping else None
        try:
            self.ping_interval = max(0.1, int(env.get("RUNPOD_PING_INTERVAL") or 10000) / 1000)
        except ValueError:
            raise Fatal(f"RUNPOD_PING_INTERVAL must be milliseconds, got {env.get('RUNPOD_PING_INTERVAL')!r}", 2) from None
        self.client = Client(self.key)       # the taker's connection
        self.post_client = Client(self.key)  # the poster's
        self._take_url_idle = self.take_url
        self._take_url_busy = _with_param(take, "job_in_progress=1")
        self._ready = queue.Queue()
        self._results = queue.Queue()
        self._slot = threading.Semaphore(1)
        self._running = threading.Event()
        self._flight_lock = threading.Lock()
        self._flight = []  # taken, not yet posted: what pings report
        self.current_job = None
        self.jobs_done = 0
        self._poll_lock = threading.Lock()
        self._polling_sock = None
        stopper.on_stop(self._interrupt_poll)

    # A stop during a long-poll shuts its socket down, so the take returns at once. A job already
    # running is not touched: it finishes and its result is posted before the loop exits.
    def _interrupt_poll(self):
        with self._poll_lock:
            if self._polling_sock is not None:
                try:
                    self._polling_sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def take(self):
        """One take; returns the job, or None (no job, or a failure already waited out)."""
        if self.stopper.is_set():
            return None
        self.client.connect(self.take_url)  # outside the lock: a stop must never wait on a connect
        with self._poll_lock:
            if self.stopper.is_set():
                return None
            self._polling_sock = self.client.sock
        try:
            status, data = self.client.request("GET", self.take_url, timeout=TAKE_TIMEOUT_S)
        finally:
            with self._poll_lock:
                self._polling_sock = None
        if status == 204:
            return None
        if status == 200:
            try:
                job = json.loads(data) if data.strip() else None
            except ValueError:
                log_error(f"job-take answered 200 with a body that is not JSON: {data[:200]!r}")
                raise RequestFailed("bad job-take body", False, status) from None
            if isinstance(job, list):  # a batch answer; this worker takes one at a time
                job = job[0] if job else None
            if job is None:
                return None
            if not isinstance(job, dict) or not isinstance(job.get("id"), str):
                log_error(f"job-take answered with something that is not a job: {data[:200]!r}")
                return None
            return job
        if status == 429:
            raise RequestFailed("job-take: 429 too many requests", False, status)
        raise RequestFailed(f"job-take answered HTTP {status}: {data[:200]!r}", False, status)

    def post_done(self, job_id, body):
        url = _with_param(self.done_template.replace("$ID", urllib.parse.quote(job_id, safe="")), "isStream=false")
        backoff = Backoff(0.2, 5.0)
        for attempt in range(1, 11):
            try:
                status, data = self.post_client.request("POST", url, body=body)
                if 200 <= status < 300:
                    return True
                if status != 429 and status < 500:
                    log_error(f"job-done for {job_id} answered HTTP {status}: {data[:200]!r}; dropping the result")
                    return False
                reason = f"HTTP {status}"
                reused = False
            except RequestFailed as e:
                reason, reused = str(e), e.reused
            if reused:
                continue  # the server had closed an idle keep-alive connection: retry at once
            if attempt < 10:
                time.sleep(backoff.delay())
        log_error(f"job-done for {job_id} failed ({reason}); giving up on this result")
        return False

    def ping_forever(self):
        client = Client(self.key)
        failing = False
        while True:
            url = _with_param(self.ping_url, "job_id=" + urllib.parse.quote(self._in_flight(), safe=","))
            try:
                status, _ = client.request("GET", url, timeout=10)
                ok = status < 400
            except RequestFailed:
                ok = False
            if not ok and not failing:
                log_error("ping failed; retrying every interval")
            failing = not ok
            time.sleep(self.ping_interval)

    def _in_flight(self):
        with self._flight_lock:
            return ",".join(self._flight)

    def _take_ahead(self):
        """The taker: keeps one job waiting beside the one that runs (a take while a job runs says
        job_in_progress=1), so the next job's round trip overlaps this one's work."""
        unreachable = Backoff(0.5, 10.0)  # the platform cannot be reached
        refused = Backoff(0.5, 5.0)       # it answered, but not with a job (429, 5xx, ...)
        while not self.stopper.is_set():
            self._slot.acquire()  # released when the runner picks up the job waiting here
            while not self.stopper.is_set():
                self.take_url = self._take_url_busy if self._running.is_set() else self._take_url_idle
                try:
                    job = self.take()
                except RequestFailed as e:
                    if self.stopper.is_set():
                        break
                    if e.reused:
                        continue
                    if e.status is None:
                        delay = unreachable.delay()
                    else:
                        unreachable.reset()
                        delay = refused.delay()
                    if e.status != 429:  # 429 is routine back-pressure, not worth a log line
                        log_error(f"{e}; asking again in {delay:.1f} s")
                    self.stopper.wait(delay)
                    continue
                unreachable.reset()
                refused.reset()
                if job is not None:
                    with self._flight_lock:
                        self._flight.append(job["id"])
                    self._ready.put(job)
                    break
        self._ready.put(None)  # tells the runner no more jobs come

    def _post_behind(self):
        """The poster: sends results in order on a connection of its own, while the next job runs."""
        while True:
            item = self._results.get()
            if item is None:
                return
            job_id, body = item
            try:
                self.post_done(job_id, body)
            finally:
                with self._flight_lock:
                    if job_id in self._flight:
                        self._flight.remove(job_id)

    def run(self):
        if self.ping_url:
            threading.Thread(target=self.ping_forever, name="gantry-ping", daemon=True).start()
        log(f"worker {self.worker_id} serving {getattr(self.fn, '__name__', 'the function')} from the job queue")
        taker = threading.Thread(target=self._take_ahead, name="gantry-take", daemon=True)
        poster = threading.Thread(target=self._post_behind, name="gantry-post", daemon=True)
        taker.start()
        poster.start()
        # The function runs on this (the main) thread, as an app expects; the taker and the poster
        # do the network on theirs. Every job taken is run and its result posted, a stop included.
        while True:
            job = self._ready.get()
            if job is None:
                break
            self._running.set()
            self._slot.release()
            self.take_new_function()
            self.current_job = job["id"]
            try:
                body = self.run_job(job)
            finally:
                self.current_job = None
                self._running.clear()
            self._results.put((job["id"], body))
            self.jobs_done += 1
        taker.join()
        self._results.put(None)
        poster.join()
        log(f"stopped after {self.jobs_done} job{'s' if self.jobs_done != 1 else ''}")
        self.client.close()
        self.post_client.close()


async def _collect_async(gen):
    return [item async for item in gen]


# ---------------------------------------------------------------------------------------------
# Load-balanced: routes over HTTP


class _AsyncRunner:
    """One event loop on its own thread for async route functions (the server's threads submit)."""

    def __init__(self):
        self.loop = None
        self._lock = threading.Lock()

    def run(self, awaitable):
        with self._lock:
            if self.loop is None:
                self.loop = asyncio.new_event_loop()
                threading.Thread(target=self.loop.run_forever, name="gantry-asyncio", daemon=True).start()
        return asyncio.run_coroutine_threadsafe(_as_coroutine(awaitable), self.loop).result()


async def _as_coroutine(awaitable):
    return await awaitable


def _takes_argument(fn):
    for p in inspect.signature(fn).parameters.values():
        if p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.VAR_POSITIONAL):
            return True
    return False


class LbApp:
    """What the HTTP handlers share: the routes, the health flag and the count of requests in flight."""

    def __init__(self, routes):
        self.set_routes(routes)
        self.healthy = True
        self.draining = False
        self.in_flight = 0
        self.idle = threading.Condition()
        self.asyncio = _AsyncRunner()

    def set_routes(self, routes):
        """Replaces every route at once (live reload): a request reads the table once, so one under
        way finishes on the function it started with."""
        table = {k: (fn, _takes_argument(fn)) for k, fn in routes.items()}  # (METHOD, path) -> (function, takes an argument)
        paths = {}
        for method, path in table:
            paths.setdefault(path, []).append(method)
        self.table = (table, paths)

    @property
    def routes(self):
        return self.table[0]

    def lookup(self, method, path):
        """(function, takes an argument) for the request, or None; and the methods the path allows."""
        table, paths = self.table
        return table.get((method, path)), paths.get(path)

    def begin(self):
        with self.idle:
            self.in_flight += 1

    def end(self):
        with self.idle:
            self.in_flight -= 1
            self.idle.notify_all()

    def wait_idle(self):
        with self.idle:
            while self.in_flight:
                self.idle.wait()


class _BadRequest(Exception):
    pass


def make_handler(app, serve_routes, serve_health):
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "gantry"
        sys_version = ""
        disable_nagle_algorithm = True
        timeout = 300  # idle keep-alive connections are dropped eventually

        def log_request(self, code="-", size="-"):
            if self.path != "/ping":
                super().log_request(code, size)

        def send_json(self, status, value, extra_headers=()):
            self.send_body(status, json.dumps(value).encode(), extra_headers)

        def send_body(self, status, body, extra_headers=()):
            if status in (204, 304):
                body = b""
            self.send_response(status)
            if status not in (204, 304):
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
            for k, v in extra_headers:
                self.send_header(k, v)
            if app.draining:
                self.send_header("Connection", "close")
                self.close_connection = True
            self.end_headers()
            if body and self.command != "HEAD":
                self.wfile.write(body)

        def read_body(self):
            if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
                chunks = []
                while True:
                    line = self.rfile.readline(1024)
                    try:
                        size = int(line.split(b";")[0].strip(), 16)
                    except ValueError:
                        raise _BadRequest("malformed chunked body") from None
                    if size == 0:
                        while self.rfile.readline(1024) not in (b"\r\n", b"\n", b""):
                            pass  # trailers
                        return b"".join(chunks)
                    chunks.append(self.rfile.read(size))
                    self.rfile.readline(8)
            length = self.headers.get("Content-Length")
            if not length:
                return b""
            try:
                n = int(length)
            except ValueError:
                raise _BadRequest("bad Content-Length") from None
            if n < 0:
                raise _BadRequest("bad Content-Length")
            return self.rfile.read(n)

        def handle_any(self):
            app.begin()
            try:
                self._handle()
            finally:
                app.end()

        def _handle(self):
            method = self.command
            parts = urllib.parse.urlsplit(self.path)
            path = parts.path or "/"
            try:
                raw = self.read_body()
            except _BadRequest as e:
                self.close_connection = True
                return self.send_json(400, {"error": str(e)})
            if serve_health and path == "/ping":
                if method not in ("GET", "HEAD"):
                    return self.send_json(405, {"error": f"{method} not allowed on /ping"}, [("Allow", "GET")])
                return self.send_json(200, {"status": "healthy"})
            if app.draining:
                return self.send_json(503, {"error": "worker is shutting down"})
            route, allowed = app.lookup(method, path) if serve_routes else (None, None)
            if route is None:
                if allowed:
                    return self.send_json(405, {"error": f"{method} not allowed on {path}"}, [("Allow", ", ".join(allowed))])
                return self.send_json(404, {"error": f"no route {path}"})
            fn, takes_arg = route
            if method in ("POST", "PUT", "PATCH"):
                try:
                    arg = json.loads(raw) if raw.strip() else None
                except ValueError as e:
                    return self.send_json(400, {"error": f"the request body is not JSON: {e}"})
            else:
                arg = {k: v[0] if len(v) == 1 else v for k, v in urllib.parse.parse_qs(parts.query, keep_blank_values=True).items()}
            try:
                result = fn(arg) if takes_arg else fn()
                if inspect.isawaitable(result):
                    result = app.asyncio.run(result)
                status = 200
                if isinstance(result, tuple) and len(result) == 2 and isinstance(result[0], int) and not isinstance(result[0], bool):
                    status, result = result
                    if not 100 <= status <= 599:
                        raise ValueError(f"route returned status {status}")
                try:
                    body = json.dumps(result, allow_nan=False).encode()
                except (TypeError, ValueError) as e:
                    raise TypeError(f"the route's return value cannot be sent as JSON: {e}") from None
            except Exception as e:
                log_error(f"{method} {path} failed:\n{traceback.format_exc()}".rstrip())
                return self.send_json(500, {"error": f"{type(e).__name__}: {e}"})
            return self.send_body(status, body)

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = handle_any

        def do_HEAD(self):
            self.handle_any()

        def do_OPTIONS(self):
            self.handle_any()

    return Handler


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True  # keep-alive connections must not hold the exit; in-flight work is awaited separately
    request_queue_size = 128


def serve_lb(routes, port, health_port, stopper, host="0.0.0.0", ready=None, main=None, what=None):
    """Serves the routes (a dict, or an LbApp) until a stop; then stops accepting, finishes
    requests in flight, returns. `main`, when given, runs on this thread while serving (the local
    API's jobs) and returns once the stopper is set. The "serving" line is logged once the sockets
    are bound (callers wait for it): `what` says what is served, default the routes."""
    app = routes if isinstance(routes, LbApp) else LbApp(routes)
    servers = []
    if health_port == port:
        servers.append(_Server((host, port), make_handler(app, True, True)))
    else:
        servers.append(_Server((host, port), make_handler(app, True, False)))
        servers.append(_Server((host, health_port), make_handler(app, False, True)))
    threads = [threading.Thread(target=s.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True) for s in servers]
    for t in threads:
        t.start()
    listening = what or ", ".join(f"{m} {p}" for m, p in app.routes) or "no routes"
    log(f"serving {listening} on port {port}, health on port {health_port}")
    if ready is not None:
        ready(servers)
    if main is not None:
        main()
    stopper.wait()
    app.draining = True
    for s in servers:
        s.shutdown()
    app.wait_idle()
    for s in servers:
        s.server_close()
    log("stopped")


# ---------------------------------------------------------------------------------------------
# Local serving of a queue resource (GANTRY_LOCAL_API=1): the job API's shape, no platform


class LocalApi(LbApp):
    """/runsync, /run, /status/{id}, /health (and /ping) for one queue function. Jobs run one at a
    time on the main thread, in the order they came, as on a worker; the HTTP threads only queue
    them and wait or answer."""

    def __init__(self, runner):
        self.runner = runner
        self.jobs = {}  # id -> the job's status answer
        self.finished = collections.deque()
        self.pending = queue.Queue()
        self.lock = threading.Condition()
        self.counts = {"completed": 0, "failed": 0}
        super().__init__({("POST", "/runsync"): self.runsync, ("POST", "/run"): self.run, ("GET", "/health"): self.health})

    def lookup(self, method, path):
        if path.startswith("/status/") and len(path) > len("/status/"):
            job_id = urllib.parse.unquote(path[len("/status/"):])
            return ((lambda: self.status(job_id)), False) if method == "GET" else None, ["GET"]
        return super().lookup(method, path)

    def _submit(self, body):
        if not isinstance(body, dict) or "input" not in body:
            return None, (400, {"error": 'the body must be a JSON object with the job\'s "input": {"input": {...}}'})
        job = {"id": f"local-{uuid.uuid4()}", "input": body["input"], "status": "IN_QUEUE", "queuedAt": time.monotonic()}
        with self.lock:
            self.jobs[job["id"]] = {"id": job["id"], "status": "IN_QUEUE"}
        self.pending.put(job)
        return job, None

    def runsync(self, body):
        job, refused = self._submit(body)
        if refused:
            return refused
        with self.lock:
            while self.jobs[job["id"]]["status"] in ("IN_QUEUE", "IN_PROGRESS"):
                self.lock.wait()
            return dict(self.jobs[job["id"]])

    def run(self, body):
        job, refused = self._submit(body)
        return refused or {"id": job["id"], "status": "IN_QUEUE"}

    def status(self, job_id):
        with self.lock:
            answer = self.jobs.get(job_id)
            return dict(answer) if answer else (404, {"error": f"no job {job_id}"})

    def health(self):
        with self.lock:
            states = [j["status"] for j in self.jobs.values()]
        busy = states.count("IN_PROGRESS")
        return {"jobs": {**self.counts, "inProgress": busy, "inQueue": states.count("IN_QUEUE"), "retried": 0},
                "workers": {"idle": 1 - busy, "running": busy}}

    def work(self, stopper):
        """The job loop, on the main thread, until a stop."""
        while not stopper.is_set():
            try:
                job = self.pending.get(timeout=0.2)
            except queue.Empty:
                continue
            self.runner.take_new_function()
            with self.lock:
                self.jobs[job["id"]]["status"] = "IN_PROGRESS"
            started = time.monotonic()
            result = json.loads(self.runner.run_job(job))
            answer = {"id": job["id"], "delayTime": int((started - job["queuedAt"]) * 1000),
                      "executionTime": int((time.monotonic() - started) * 1000)}
            if "error" in result:
                answer.update(status="FAILED", error=result["error"])
            else:
                answer.update(status="COMPLETED", output=result["output"])
            with self.lock:
                self.jobs[job["id"]] = answer
                self.counts["failed" if "error" in result else "completed"] += 1
                self.finished.append(job["id"])
                while len(self.finished) > LOCAL_JOBS_KEPT:
                    self.jobs.pop(self.finished.popleft(), None)
                self.lock.notify_all()


def serve_local_api(runner, port, stopper, host="0.0.0.0", ready=None):
    app = LocalApi(runner)
    what = f"{getattr(runner.fn, '__name__', 'the function')} locally: POST /runsync, POST /run, GET /status/{{id}}, GET /health"
    serve_lb(app, port, port, stopper, host, ready, main=lambda: app.work(stopper), what=what)
    return app


# ---------------------------------------------------------------------------------------------


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
