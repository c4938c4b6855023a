"""Fetching a build's artifact or a source version: downloaded (transient failures retried),
checked against its sha256 and extracted into a cache directory that the workers on a host share."""

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

from ._runtime_common import USER_AGENT, Fatal, log, log_error

DOWNLOAD_TIMEOUT_S = 60


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


def _ensure_tree(url, sha256, cache, name, what, check=None, keep_archive=False):
    """<cache>/<name>: the extracted tree of the gzip tar at url, whose bytes must have sha256; from
    the cache when there. Workers on one host share the cache: an exclusive lock per tree makes the
    others wait for the first, and the tree appears by an atomic rename, never half-written. With
    keep_archive the verified bytes stay beside it too, as <cache>/<name>.tar.gz."""
    final = os.path.join(cache, name)
    kept = f"{final}.tar.gz" if keep_archive else None

    def cached():
        return os.path.isdir(final) and (kept is None or os.path.isfile(kept))

    if cached():
        log(f"{what} {sha256[:12]} found in the cache")
        return final
    os.makedirs(cache, exist_ok=True)
    started = time.monotonic()
    with open(os.path.join(cache, f"{name}.lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if cached():
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
            if not os.path.isdir(final):
                tmp = tempfile.mkdtemp(dir=cache, prefix=f".{name}.")
                try:
                    _safe_extract(archive, tmp, f"the {what}")
                    if check is not None:
                        check(tmp)
                    os.rename(tmp, final)
                except BaseException:
                    shutil.rmtree(tmp, ignore_errors=True)
                    raise
            if kept is not None:
                os.rename(archive, kept)
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


def ensure_flash_build(url, sha256, cache):
    """(archive, tree) of a build of the hosted flash tool: <cache>/flash-<sha256>.tar.gz, the
    verified bytes (flash's workers keep them at a path of their own), and <cache>/flash-<sha256>/,
    their extracted tree. Shared and made like artifacts."""
    sha256 = _check_sha256(sha256 or "", "GANTRY_ARTIFACT_SHA256")
    tree = _ensure_tree(url, sha256, cache, f"flash-{sha256}", "artifact", None, keep_archive=True)
    return f"{tree}.tar.gz", tree


def ensure_source(url, sha256, cache):
    """The directory of an extracted source version (<cache>/src-<sha256>): what an artifact's src/
    holds, uploaded by `gantry dev`. Shared and made like artifacts."""
    sha256 = _check_sha256(sha256, "the source's sha256")
    return _ensure_tree(url, sha256, cache, f"src-{sha256}", "source", None)
