"""The runtime's development-loop modes (docs/dev-loop.md): live reload of new source versions
(GANTRY_LIVE_RELOAD) against the fake worker protocol, an extracted artifact used in place
(GANTRY_ARTIFACT_DIR), and a queue function served locally (GANTRY_LOCAL_API)."""

import http.client
import io
import json
import os
import signal
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
import unittest

from support import FakeProtocol, free_port, runtime_env

from test_runtime import make_artifact

WORKER = '''
from gantry import endpoint
import helper

@endpoint(name="adder", cpu="cpu3c-2-4")
def add(a: int, b: int = 0) -> dict:
    return {"sum": a + b, "version": helper.VERSION}
'''
QUEUE_RESOURCE = {"name": "adder", "kind": "queue", "file": "worker.py", "line": 4, "function": "add", "env": {}}
LB = '''
from gantry import Endpoint
import helper

api = Endpoint(name="api")

@api.get("/version")
def version():
    return {"version": helper.VERSION}
'''
LB_RESOURCE = {"name": "api", "kind": "lb", "file": "lb.py", "line": 4, "object": "api",
               "routes": [{"method": "GET", "path": "/version", "function": "version"}], "env": {}}


def helper(version):
    return f"VERSION = {version}\n"


def artifact_dir(test, files, resources):
    """An extracted artifact (manifest.json, src/, deps/), as GANTRY_ARTIFACT_DIR names one."""
    data, _ = make_artifact(files, resources)
    root = tempfile.mkdtemp(prefix="gantry-artifact-")
    test.addCleanup(lambda: subprocess.run(["rm", "-rf", root]))
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tf:
        tf.extractall(root)
    return root


class Runtime:
    """`python3 -m gantry.runtime` as a child, its output collected by a thread."""

    def __init__(self, test, env):
        self.lines = []
        self.proc = subprocess.Popen([sys.executable, "-m", "gantry.runtime"], env=runtime_env(**env),
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.reader = threading.Thread(target=lambda: self.lines.extend(self.proc.stdout), daemon=True)
        self.reader.start()
        test.addCleanup(self.stop)

    @property
    def output(self):
        return "".join(self.lines)

    def wait_for(self, text, timeout=15):
        deadline = time.monotonic() + timeout
        while text not in self.output:
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise AssertionError(f"no {text!r} in the runtime's output:\n{self.output}")
            time.sleep(0.02)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.reader.join(5)
        self.proc.stdout.close()
        return self.proc.returncode


def request(port, method, path, body=None):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request(method, path, body=body if body is None or isinstance(body, bytes) else json.dumps(body).encode())
        resp = conn.getresponse()
        data = resp.read()
        return resp.status, json.loads(data) if data else None
    finally:
        conn.close()


class LiveReload(unittest.TestCase):
    def setUp(self):
        self.fake = FakeProtocol(hold=0.1)
        self.addCleanup(self.fake.close)
        self.cache = tempfile.mkdtemp(prefix="gantry-cache-")
        self.addCleanup(lambda: subprocess.run(["rm", "-rf", self.cache]))
        self.jobs = 0

    def start(self, files, resources, resource, **env):
        root = artifact_dir(self, files, resources)
        return Runtime(self, {"GANTRY_ARTIFACT_DIR": root, "GANTRY_RESOURCE": resource, "GANTRY_LIVE_RELOAD": "1",
                              "GANTRY_SOURCE_POLL_MS": "100", "GANTRY_ARTIFACT_CACHE": self.cache, **self.fake.env(), **env})

    def job(self, a=1, b=2):
        self.jobs += 1
        job_id = f"j{self.jobs}"
        self.fake.add(job_id, {"a": a, "b": b})
        self.fake.wait_done(self.jobs, timeout=15)
        return self.fake.done[job_id]["body"]

    def until_version(self, version, call, timeout=5.0):
        """Seconds until call() answers `version`."""
        started = time.monotonic()
        while time.monotonic() - started < timeout:
            if call() == version:
                return time.monotonic() - started
            time.sleep(0.05)
        raise AssertionError(f"version {version} not served within {timeout} s")

    def test_queue_worker_takes_new_sources_between_jobs_and_keeps_the_old_code_when_a_version_is_broken(self):
        rt = self.start({"worker.py": WORKER, "helper.py": helper(0)}, [QUEUE_RESOURCE], "adder")
        self.assertEqual(self.job(), {"output": {"sum": 3, "version": 0}})

        # A helper module changed: it is imported again from the new directory, not kept from the old.
        self.fake.publish_source({"worker.py": WORKER, "helper.py": helper(1)})
        took = self.until_version(1, lambda: self.job()["output"]["version"])
        self.assertLess(took, 3)
        rt.wait_for("source version 1")

        # A version that does not import: logged with its traceback, the old code keeps answering.
        self.fake.publish_source({"worker.py": WORKER + "\ndef broken(:\n", "helper.py": helper(2)})
        rt.wait_for("source version 2 failed to import")
        self.assertIn("SyntaxError", rt.output)
        self.assertEqual(self.job(a=5, b=5), {"output": {"sum": 10, "version": 1}})
        # ... and it is downloaded once, not again at every poll.
        time.sleep(0.5)
        self.assertEqual(self.fake.source_gets.count(2), 1)

        # The poller lives on: the next good version serves, its function changed too.
        self.fake.publish_source({"worker.py": WORKER.replace("a + b", "a * b"), "helper.py": helper(3)})
        self.until_version(3, lambda: self.job()["output"]["version"])
        self.assertEqual(self.job(a=4, b=5), {"output": {"sum": 20, "version": 3}})
        # Polls say the newest version running; versions sit in the shared cache by digest.
        time.sleep(0.3)
        afters = {after for _, after in self.fake.source_polls}
        self.assertTrue({0, 1, 3} <= afters, afters)
        self.assertEqual(len([d for d in os.listdir(self.cache) if d.startswith("src-") and not d.endswith(".lock")]), 3)
        self.assertEqual(self.fake.bad_auth, [])
        self.assertEqual(rt.stop(), 0, rt.output)

    def test_a_worker_started_after_uploads_runs_the_newest_version_from_its_first_job(self):
        self.fake.publish_source({"worker.py": WORKER, "helper.py": helper(1)})
        self.fake.publish_source({"worker.py": WORKER, "helper.py": helper(2)})
        self.start({"worker.py": WORKER, "helper.py": helper(0)}, [QUEUE_RESOURCE], "adder", GANTRY_SOURCE_VERSION="1")
        self.assertEqual(self.job(), {"output": {"sum": 3, "version": 2}})
        self.assertEqual(self.fake.source_polls[0], ("w1", 1))

    def test_load_balanced_routes_swap_at_once(self):
        port = free_port()
        rt = self.start({"lb.py": LB, "helper.py": helper(0)}, [LB_RESOURCE], "api", PORT=port)
        rt.wait_for("serving")
        self.assertEqual(request(port, "GET", "/version"), (200, {"version": 0}))
        self.fake.publish_source({"lb.py": LB, "helper.py": helper(1)})
        took = self.until_version(1, lambda: request(port, "GET", "/version")[1]["version"])
        self.assertLess(took, 3)
        self.fake.publish_source({"lb.py": "raise RuntimeError('broken at import')\n", "helper.py": helper(2)})
        rt.wait_for("source version 2 failed to import")
        self.assertIn("broken at import", rt.output)
        self.assertEqual(request(port, "GET", "/version"), (200, {"version": 1}))
        self.assertEqual(request(port, "GET", "/ping")[0], 200)
        self.assertEqual(rt.stop(), 0, rt.output)


class LocalApi(unittest.TestCase):
    def start(self, **env):
        root = artifact_dir(self, {"worker.py": WORKER, "helper.py": helper(7)}, [QUEUE_RESOURCE])
        port = free_port()
        rt = Runtime(self, {"GANTRY_ARTIFACT_DIR": root, "GANTRY_RESOURCE": "adder", "GANTRY_LOCAL_API": "1", "PORT": port, **env})
        rt.wait_for("serving")
        return rt, port

    def test_runsync_run_status_health(self):
        rt, port = self.start()
        status, body = request(port, "POST", "/runsync", {"input": {"a": 2, "b": 3}})
        self.assertEqual(status, 200)
        self.assertEqual((body["status"], body["output"]), ("COMPLETED", {"sum": 5, "version": 7}))
        self.assertTrue(body["id"])

        status, queued = request(port, "POST", "/run", {"input": {"a": 40, "b": 2}})
        self.assertEqual((status, queued["status"]), (200, "IN_QUEUE"))
        deadline = time.monotonic() + 10
        while True:
            status, job = request(port, "GET", f"/status/{queued['id']}")
            if job["status"] == "COMPLETED" or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        self.assertEqual((status, job["id"], job["status"], job["output"]), (200, queued["id"], "COMPLETED", {"sum": 42, "version": 7}))

        status, health = request(port, "GET", "/health")
        self.assertEqual(status, 200)
        self.assertEqual(health["jobs"]["completed"], 2)
        self.assertEqual(request(port, "GET", "/ping"), (200, {"status": "healthy"}))
        self.assertEqual(rt.stop(), 0, rt.output)

    def test_input_errors(self):
        _, port = self.start()
        # Input that does not fit the function: the job's error, as on the platform.
        status, body = request(port, "POST", "/runsync", {"input": {"a": 1, "c": 2}})
        self.assertEqual((status, body["status"]), (200, "FAILED"))
        error = json.loads(body["error"])
        self.assertEqual(error["error_type"], "JobInputError")
        self.assertIn("unknown parameter c", error["error_message"])
        status, body = request(port, "POST", "/runsync", {"input": {"a": "text"}})
        self.assertEqual(json.loads(body["error"])["error_type"], "TypeError")
        # Requests that are no job at all: 400, nothing queued.
        status, body = request(port, "POST", "/runsync", {"a": 1})
        self.assertEqual(status, 400)
        self.assertIn('"input"', body["error"])
        self.assertEqual(request(port, "POST", "/run", b"{not json")[0], 400)
        self.assertEqual(request(port, "POST", "/run")[0], 400)
        self.assertEqual(request(port, "GET", "/status/nope")[0], 404)
        self.assertEqual(request(port, "GET", "/runsync")[0], 405)
        self.assertEqual(request(port, "POST", "/status/x")[0], 405)
        self.assertEqual(request(port, "GET", "/nothing")[0], 404)
        self.assertEqual(request(port, "GET", "/health")[1]["jobs"]["failed"], 2)

    def test_needs_a_port(self):
        root = artifact_dir(self, {"worker.py": WORKER, "helper.py": helper(7)}, [QUEUE_RESOURCE])
        r = subprocess.run([sys.executable, "-m", "gantry.runtime"], capture_output=True, text=True, timeout=20,
                           env=runtime_env(GANTRY_ARTIFACT_DIR=root, GANTRY_RESOURCE="adder", GANTRY_LOCAL_API="1"))
        self.assertEqual(r.returncode, 2)
        self.assertIn("missing environment variable PORT", r.stderr)
        r = subprocess.run([sys.executable, "-m", "gantry.runtime"], capture_output=True, text=True, timeout=20,
                           env=runtime_env(GANTRY_ARTIFACT_DIR=tempfile.gettempdir(), GANTRY_RESOURCE="adder"))
        self.assertEqual(r.returncode, 2)
        self.assertIn("no manifest.json", r.stderr)


if __name__ == "__main__":
    unittest.main()
