"""Queue resources: a job run through the resource's function (FunctionRunner, which the local API
uses too) and the worker-protocol loop that takes jobs, runs them and posts their results
(QueueWorker)."""

from __future__ import annotations

import asyncio
import inspect
import json
import queue
import socket
import threading
import time
import traceback
import urllib.parse

from ._runtime_client import Backoff, Client, RequestFailed
from ._runtime_common import Fatal, log, log_error

TAKE_TIMEOUT_S = 120  # the server holds a take for up to ~90 s


# What the platform sets for a queue worker (the worker protocol, docs/jobs.md).
QUEUE_ENV = ("RUNPOD_WEBHOOK_GET_JOB", "RUNPOD_WEBHOOK_POST_OUTPUT", "RUNPOD_AI_API_KEY", "RUNPOD_POD_ID")


class JobInputError(Exception):
    """A job's input that does not fit the function: reported as the job's error."""


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
