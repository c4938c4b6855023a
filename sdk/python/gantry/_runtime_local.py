"""Local serving of a queue resource (GANTRY_LOCAL_API=1): the job API's shape (/runsync, /run,
/status/{id}, /health), no platform; served by the load-balanced server."""

from __future__ import annotations

import collections
import json
import queue
import threading
import time
import urllib.parse
import uuid

from ._runtime_lb import LbApp, serve_lb

LOCAL_JOBS_KEPT = 1000  # finished jobs the local API still answers /status for


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
