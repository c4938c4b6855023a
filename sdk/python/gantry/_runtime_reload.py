"""Live reload (GANTRY_LIVE_RELOAD=1, docs/dev-loop.md): a thread polls the worker protocol's source
route for a version above the one running and swaps it in without a restart."""

from __future__ import annotations

import json
import threading
import time
import traceback
import urllib.parse

from ._runtime_app import swap_source
from ._runtime_artifact import ensure_source
from ._runtime_client import Client, RequestFailed
from ._runtime_common import Fatal, log, log_error, require_env

RELOAD_ENV = ("RUNPOD_AI_API_KEY", "RUNPOD_POD_ID", "RUNPOD_ENDPOINT_ID")
SOURCE_POLL_TIMEOUT_S = 10


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
