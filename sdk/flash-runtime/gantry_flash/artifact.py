"""The build's artifact: downloaded by the signed URL the platform gives the worker, checked against
its sha256, and kept with its extracted tree in the host cache the account's workers share."""

from __future__ import annotations

import fcntl
import hashlib
import http.client
import os
import shutil
import tarfile
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
import zlib

USER_AGENT = "gantry-flash-runtime/1"
DOWNLOAD_TIMEOUT_S = 60


class Fatal(Exception):
    """Stops the runtime with a message and an exit status (2: misconfigured, 1: anything else)."""

    def __init__(self, message, code=1):
        super().__init__(message)
        self.code = code


def log(message):
    print(f"gantry-flash: {message}", flush=True)


def _download(url, dest):
    """Writes url's body into the open file dest, retrying transient failures; returns its sha256 hex."""
    host = urllib.parse.urlsplit(url).hostname  # the URL is signed: only its host is logged
    delay = 1.0
    for attempt in range(1, 6):
        dest.seek(0)
        dest.truncate()
        digest = hashlib.sha256()
        try:
            req = urllib.request.Request(url, headers={"User-Agent": USER_AGENT})
            with urllib.request.urlopen(req, timeout=DOWNLOAD_TIMEOUT_S) as resp:
                for chunk in iter(lambda: resp.read(1 << 20), b""):
                    digest.update(chunk)
                    dest.write(chunk)
            dest.flush()
            return digest.hexdigest()
        except urllib.error.HTTPError as e:
            if e.code < 500 and e.code != 429:
                raise Fatal(f"downloading the artifact from {host} failed: HTTP {e.code}") from None
            reason = f"HTTP {e.code}"
        except (OSError, http.client.HTTPException) as e:
            reason = str(e) or type(e).__name__
        if attempt == 5:
            raise Fatal(f"downloading the artifact from {host} failed: {reason}")
        log(f"downloading the artifact from {host} failed ({reason}); retrying in {delay:.0f} s")
        time.sleep(delay)
        delay *= 2
    raise AssertionError("unreachable")


def extract(archive, target):
    """Unpacks the gzip tar into target, refusing entries that would land outside it."""
    try:
        with tarfile.open(archive, "r:gz") as tf:
            if hasattr(tarfile, "data_filter"):
                tf.extractall(target, filter="data")
                return
            base = os.path.realpath(target)
            for m in tf.getmembers():
                dest = os.path.realpath(os.path.join(base, m.name))
                if os.path.commonpath([base, dest]) != base or m.isdev() or m.issym() or m.islnk():
                    raise Fatal(f"the artifact holds an entry it may not: {m.name!r}")
            tf.extractall(target)  # noqa: S202 (checked above)
    except (tarfile.TarError, EOFError, zlib.error) as e:
        raise Fatal(f"cannot extract the artifact: {type(e).__name__}: {e}") from None


def ensure_artifact(url, sha256, cache):
    """(tarball, tree): <cache>/flash-<sha256>.tar.gz, the verified artifact, and <cache>/flash-<sha256>/,
    its extracted tree; from the cache when there. An exclusive lock makes a host's other workers
    wait for the first, and both appear by an atomic rename, never half-written."""
    sha256 = (sha256 or "").strip().lower()
    if len(sha256) != 64 or any(c not in "0123456789abcdef" for c in sha256):
        raise Fatal(f"GANTRY_ARTIFACT_SHA256 must be 64 hex digits, got {sha256!r}", 2)
    name = f"flash-{sha256}"
    tarball = os.path.join(cache, f"{name}.tar.gz")
    tree = os.path.join(cache, name)
    if os.path.isdir(tree) and os.path.isfile(tarball):
        log(f"artifact {sha256[:12]} found in the cache")
        return tarball, tree
    os.makedirs(cache, exist_ok=True)
    started = time.monotonic()
    with open(os.path.join(cache, f"{name}.lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if os.path.isdir(tree) and os.path.isfile(tarball):
            log(f"artifact {sha256[:12]} fetched by another worker")
            return tarball, tree
        # Leftovers of a worker killed half-way; only the lock holder writes these.
        for entry in os.listdir(cache):
            if entry.startswith(f".{name}."):
                path = os.path.join(cache, entry)
                shutil.rmtree(path, ignore_errors=True) if os.path.isdir(path) else os.unlink(path)
        if not os.path.isfile(tarball):
            fd, part = tempfile.mkstemp(dir=cache, prefix=f".{name}.", suffix=".tar.gz")
            try:
                with os.fdopen(fd, "wb") as f:
                    got = _download(url, f)
                if got != sha256:
                    raise Fatal(f"the artifact's sha256 is {got}, expected {sha256}: refusing to run it")
                os.rename(part, tarball)
            finally:
                if os.path.exists(part):
                    os.unlink(part)
        if not os.path.isdir(tree):
            tmp = tempfile.mkdtemp(dir=cache, prefix=f".{name}.")
            try:
                extract(tarball, tmp)
                os.rename(tmp, tree)
            except BaseException:
                shutil.rmtree(tmp, ignore_errors=True)
                raise
    log(f"artifact {sha256[:12]} downloaded and extracted in {time.monotonic() - started:.1f} s")
    return tarball, tree
