"""The runtime (gantry/runtime.py): artifact cache, the queue loop against a fake of the worker
protocol, the load-balanced HTTP server, and the process's own behaviour (env, SIGTERM)."""

import hashlib
import http.client
import http.server
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

from support import SDK_DIR, FakeProtocol, free_port, protocol_env, runtime_env, temp_project

from gantry import Endpoint, runtime


def make_artifact(files, resources):
    """The bytes of an artifact (gzip tar: manifest.json, src/...) and their sha256."""
    buf = io.BytesIO()
    manifest = {"format": 1, "pythonVersion": f"{sys.version_info.major}.{sys.version_info.minor}",
                "fingerprint": "0" * 64, "resources": resources, "excluded": [], "createdAt": "2026-01-01T00:00:00Z"}
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        entries = {"manifest.json": json.dumps(manifest)}
        entries.update({f"src/{k}": v for k, v in files.items()})
        entries["deps/depmod.py"] = "VALUE = 'from deps'\n"
        for name, text in entries.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    data = buf.getvalue()
    return data, hashlib.sha256(data).hexdigest()


class BlobServer:
    """Serves one artifact over HTTP, counting the downloads; `delay` holds each answer."""

    def __init__(self, data, delay=0.0):
        self.data, self.delay, self.gets = data, delay, 0
        blob = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                blob.gets += 1
                time.sleep(blob.delay)
                self.send_response(200)
                self.send_header("Content-Length", str(len(blob.data)))
                self.end_headers()
                self.wfile.write(blob.data)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/artifact.tar.gz?sig=secret"
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


QUEUE_SRC = '''
from gantry import endpoint
import depmod

@endpoint(name="adder", cpu="cpu3c-2-4")
def add(a: int, b: int = 0) -> dict:
    return {"sum": a + b, "dep": depmod.VALUE}
'''
QUEUE_RESOURCE = {"name": "adder", "kind": "queue", "file": "worker.py", "line": 4, "function": "add",
                  "env": {"FROM_MANIFEST": "yes"}}


class ArtifactCache(unittest.TestCase):
    def setUp(self):
        self.data, self.sha = make_artifact({"worker.py": QUEUE_SRC}, [QUEUE_RESOURCE])
        self.blob = BlobServer(self.data)
        self.addCleanup(self.blob.close)
        self.cache = tempfile.mkdtemp(prefix="gantry-cache-")
        self.addCleanup(lambda: subprocess.run(["rm", "-rf", self.cache]))

    def test_downloads_once_then_uses_the_cache(self):
        first = runtime.ensure_artifact(self.blob.url, self.sha, self.cache)
        second = runtime.ensure_artifact(self.blob.url, self.sha.upper(), self.cache)
        self.assertEqual(first, os.path.join(self.cache, self.sha))
        self.assertEqual(second, first)
        self.assertEqual(self.blob.gets, 1)
        with open(os.path.join(first, "src", "worker.py")) as f:
            self.assertIn("def add", f.read())
        # Nothing half-done is left beside it: only the tree and its lock file.
        self.assertEqual(sorted(os.listdir(self.cache)), [self.sha, f"{self.sha}.lock"])

    def test_refuses_a_sha256_mismatch(self):
        wrong = hashlib.sha256(b"something else").hexdigest()
        with self.assertRaises(runtime.Fatal) as ctx:
            runtime.ensure_artifact(self.blob.url, wrong, self.cache)
        self.assertIn("refusing", str(ctx.exception))
        self.assertNotIn("secret", str(ctx.exception))  # the signed URL is never printed
        self.assertEqual(os.listdir(self.cache), [f"{wrong}.lock"])

    def test_concurrent_starters_share_one_download(self):
        self.blob.delay = 0.5  # keeps the first download going while the others arrive
        code = "import sys; from gantry.runtime import ensure_artifact; print(ensure_artifact(*sys.argv[1:4]))"
        procs = [subprocess.Popen([sys.executable, "-c", code, self.blob.url, self.sha, self.cache],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=runtime_env())
                 for _ in range(4)]
        outs = [p.communicate(timeout=60) for p in procs]
        for p, (out, err) in zip(procs, outs):
            self.assertEqual(p.returncode, 0, err)
            self.assertEqual(out.strip().splitlines()[-1], os.path.join(self.cache, self.sha))
        self.assertEqual(self.blob.gets, 1)
        self.assertTrue(os.path.isfile(os.path.join(self.cache, self.sha, "manifest.json")))

    def test_refuses_entries_that_leave_the_tree(self):
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w:gz") as tf:
            for name in ("manifest.json", "../escaped.txt"):
                info = tarfile.TarInfo(name)
                info.size = 2
                tf.addfile(info, io.BytesIO(b"{}"))
        self.blob.data = buf.getvalue()
        sha = hashlib.sha256(self.blob.data).hexdigest()
        filters = [True, False] if hasattr(tarfile, "data_filter") else [False]
        for with_filter in filters:
            with self.subTest(with_filter=with_filter):
                saved = getattr(tarfile, "data_filter", None)
                if not with_filter and saved is not None:
                    del tarfile.data_filter  # the path taken on Pythons without extraction filters
                try:
                    with self.assertRaises(runtime.Fatal):
                        runtime.ensure_artifact(self.blob.url, sha, self.cache)
                finally:
                    if saved is not None:
                        tarfile.data_filter = saved
                self.assertFalse(os.path.exists(os.path.join(os.path.dirname(self.cache), "escaped.txt")))
                self.assertFalse(os.path.exists(os.path.join(self.cache, sha)))

    def test_leftovers_of_a_killed_worker_are_cleared(self):
        junk = os.path.join(self.cache, f".{self.sha}.abc")
        os.makedirs(junk)
        runtime.ensure_artifact(self.blob.url, self.sha, self.cache)
        self.assertFalse(os.path.exists(junk))

    def test_full_runtime_from_an_artifact(self):
        # The whole start: env -> download -> import (src and deps on sys.path) -> queue loop.
        fake = FakeProtocol()
        self.addCleanup(fake.close)
        fake.add("j1", {"a": 2, "b": 3})
        env = runtime_env(GANTRY_ARTIFACT_URL=self.blob.url, GANTRY_ARTIFACT_SHA256=self.sha,
                          GANTRY_ARTIFACT_CACHE=self.cache, GANTRY_RESOURCE="adder", **fake.env())
        proc = subprocess.Popen([sys.executable, "-m", "gantry.runtime"], env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
        try:
            fake.wait_done(1, timeout=20)
        finally:
            proc.send_signal(signal.SIGTERM)
            out, _ = proc.communicate(timeout=20)
        self.assertEqual(proc.returncode, 0, out)
        self.assertEqual(fake.done["j1"]["body"], {"output": {"sum": 5, "dep": "from deps"}})
        self.assertNotIn("secret", out)


def no_op():
    return None


class QueueLoop(unittest.TestCase):
    def start(self, fn, **env):
        fake = FakeProtocol(hold=env.pop("hold", 0.2))
        self.addCleanup(fake.close)
        stopper = runtime.Stopper()
        worker = runtime.QueueWorker(fn, fake.env(**env), stopper)
        thread = threading.Thread(target=worker.run, daemon=True)

        def stop():
            stopper.stop("test over")
            thread.join(10)
            self.assertFalse(thread.is_alive(), "the loop did not stop")

        self.addCleanup(stop)
        return fake, worker, thread, stopper

    def test_no_pause_between_jobs(self):
        fake = FakeProtocol(hold=0.2)
        self.addCleanup(fake.close)
        for i in range(50):
            fake.add(f"job-{i}", {})
        stopper = runtime.Stopper()
        worker = runtime.QueueWorker(no_op, fake.env(), stopper)
        thread = threading.Thread(target=worker.run, daemon=True)
        thread.start()
        fake.wait_done(50)
        stopper.stop("test over")
        thread.join(10)
        elapsed = fake.done_times[-1] - fake.take_times[0]
        self.assertLess(elapsed, 1.0, f"50 no-op jobs took {elapsed:.3f} s of protocol time")
        self.assertEqual(fake.done["job-7"]["body"], {"output": None})
        self.assertEqual(fake.done["job-7"]["query"], "gpu=CPU&isStream=false")
        self.assertEqual(fake.done["job-7"]["worker"], "w1")
        self.assertEqual(fake.done["job-7"]["contentType"], "application/json")
        self.assertEqual(fake.takes[0], ("w1", "gpu=CPU&job_in_progress=0"))
        self.assertEqual(fake.bad_auth, [])
        # One persistent connection for takes and one for results, whatever the number of jobs.
        self.assertEqual(len(fake.connections), 2)

    def test_next_job_is_asked_for_while_one_runs(self):
        fake = FakeProtocol(hold=0.2)
        self.addCleanup(fake.close)
        for i in range(3):
            fake.add(f"job-{i}", {})
        stopper = runtime.Stopper()
        worker = runtime.QueueWorker(lambda: time.sleep(0.1), fake.env(), stopper)
        thread = threading.Thread(target=worker.run, daemon=True)
        thread.start()
        fake.wait_done(3)
        stopper.stop("test over")
        thread.join(10)
        # Its round trip overlaps the work; it says a job is in progress, as the worker protocol asks.
        self.assertIn(("w1", "gpu=CPU&job_in_progress=1"), fake.takes)
        # Every job was run once and its result posted, in order.
        self.assertEqual(list(fake.done), ["job-0", "job-1", "job-2"])

    def test_results_and_errors(self):
        def add(a: int, b: int = 1):
            return {"sum": a + b}

        fake, worker, thread, _ = self.start(add)
        thread.start()
        fake.add("ok", {"a": 2})
        fake.add("not-object", [1, 2])
        fake.add("null", None)
        fake.add("missing", {"b": 2})
        fake.add("unknown", {"a": 1, "c": 3})
        fake.add("raises", {"a": "text"})
        fake.wait_done(6)
        self.assertEqual(fake.done["ok"]["body"], {"output": {"sum": 3}})
        self.assertIn("must be a JSON object", fake.error_of("not-object")["error_message"])
        self.assertIn("got array", fake.error_of("not-object")["error_message"])
        self.assertIn("got null", fake.error_of("null")["error_message"])
        self.assertIn("missing required parameter a", fake.error_of("missing")["error_message"])
        self.assertIn("unknown parameter c", fake.error_of("unknown")["error_message"])
        self.assertEqual(fake.error_of("unknown")["error_type"], "JobInputError")
        err = fake.error_of("raises")
        self.assertEqual(set(err), {"error_type", "error_message", "error_traceback", "hostname", "worker_id"})
        self.assertEqual(err["error_type"], "TypeError")
        self.assertIn("in add", err["error_traceback"])
        self.assertEqual(err["worker_id"], "w1")
        self.assertTrue(err["hostname"])
        self.assertTrue(thread.is_alive())  # errors are the job's, never the worker's

    def test_async_generators_and_bad_output(self):
        import asyncio

        async def slow_double(x):
            await asyncio.sleep(0.01)
            return x * 2

        def gen(n):
            yield from range(n)

        fake, worker, thread, _ = self.start(lambda **kw: kw)
        thread.start()
        worker.fn = slow_double
        worker._sig = runtime.inspect.signature(slow_double)
        fake.add("a1", {"x": 21})
        fake.add("a2", {"x": 1})
        fake.wait_done(2)
        self.assertEqual(fake.done["a1"]["body"], {"output": 42})
        self.assertEqual(fake.done["a2"]["body"], {"output": 2})
        worker.fn, worker._sig = gen, runtime.inspect.signature(gen)
        fake.add("g", {"n": 3})
        fake.wait_done(3)
        self.assertEqual(fake.done["g"]["body"], {"output": [0, 1, 2]})
        worker.fn, worker._sig = (lambda: {1, 2}), runtime.inspect.signature(lambda: None)
        fake.add("set", {})
        fake.wait_done(4)
        self.assertIn("cannot be sent as JSON", fake.error_of("set")["error_message"])

    def test_backs_off_on_429_and_retries_connection_errors(self):
        # Point the worker at a port nobody listens on yet; the server comes up later.
        port = free_port()
        env = protocol_env(port)
        stopper = runtime.Stopper()
        worker = runtime.QueueWorker(no_op, env, stopper)
        thread = threading.Thread(target=worker.run, daemon=True)
        thread.start()
        self.addCleanup(lambda: (stopper.stop("test over"), thread.join(10)))
        time.sleep(0.7)
        fake = FakeProtocol(port=port)
        self.addCleanup(fake.close)
        fake.answers.extend([429, 429])
        fake.add("late", {})
        fake.wait_done(1, timeout=15)
        self.assertEqual(fake.done["late"]["body"], {"output": None})
        self.assertTrue(thread.is_alive())

    def test_pings_carry_the_running_job(self):
        started = threading.Event()

        def slow():
            started.set()
            time.sleep(0.5)
            return "done"

        fake, worker, thread, _ = self.start(slow, ping_interval=100)
        thread.start()
        fake.add("long-one", {})
        fake.wait_done(1)
        time.sleep(0.25)
        ids = [job for worker_id, job in fake.pings]
        self.assertTrue(all(w == "w1" for w, _ in fake.pings))
        self.assertIn("long-one", ids)
        self.assertEqual(ids[-1], "")  # idle again afterwards
        self.assertGreaterEqual(len(ids), 5)

    def test_stop_interrupts_a_long_poll(self):
        fake, worker, thread, stopper = self.start(no_op, hold=30)
        thread.start()
        time.sleep(0.3)  # now inside a 30 s long-poll
        t0 = time.monotonic()
        stopper.stop("test")
        thread.join(5)
        self.assertFalse(thread.is_alive())
        self.assertLess(time.monotonic() - t0, 2)


class LoadBalanced(unittest.TestCase):
    def serve(self, routes, port=0, health_port=0):
        stopper = runtime.Stopper()
        ready = threading.Event()
        servers = []

        def on_ready(s):
            servers.extend(s)
            ready.set()

        t = threading.Thread(target=runtime.serve_lb, args=(routes, port, health_port, stopper, "127.0.0.1", on_ready), daemon=True)
        t.start()
        self.assertTrue(ready.wait(5))
        self.addCleanup(lambda: (stopper.stop("test over"), t.join(5)))
        return servers[0].server_address[1]

    def request(self, port, method, path, body=None, headers=None):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        try:
            conn.request(method, path, body=body, headers=headers or {})
            resp = conn.getresponse()
            data = resp.read()
            return resp.status, (json.loads(data) if data else None), resp
        finally:
            conn.close()

    def test_routes(self):
        import asyncio
        api = Endpoint(name="api")

        @api.post("/process")
        def process(body):
            return {"got": body}

        @api.get("/health")
        def health(query):
            return {"ok": True, "query": query}

        @api.put("/created")
        def created(body):
            return 201, {"id": 1}

        @api.delete("/boom")
        def boom():
            raise RuntimeError("it broke")

        @api.patch("/async")
        async def patch(body):
            await asyncio.sleep(0.01)
            return body["n"] + 1

        port = self.serve(api.routes)
        self.assertEqual(self.request(port, "POST", "/process", b'{"x": [1, 2]}')[:2], (200, {"got": {"x": [1, 2]}}))
        self.assertEqual(self.request(port, "POST", "/process")[:2], (200, {"got": None}))
        self.assertEqual(self.request(port, "GET", "/health?a=1&b=2&b=3")[:2], (200, {"ok": True, "query": {"a": "1", "b": ["2", "3"]}}))
        self.assertEqual(self.request(port, "PUT", "/created", b"{}")[:2], (201, {"id": 1}))
        self.assertEqual(self.request(port, "PATCH", "/async", b'{"n": 41}')[:2], (200, 42))
        status, body, _ = self.request(port, "DELETE", "/boom")
        self.assertEqual((status, body), (500, {"error": "RuntimeError: it broke"}))
        status, body, _ = self.request(port, "POST", "/process", b"{not json")
        self.assertEqual(status, 400)
        self.assertIn("not JSON", body["error"])
        status, body, resp = self.request(port, "GET", "/process")
        self.assertEqual(status, 405)
        self.assertEqual(resp.getheader("Allow"), "POST")
        self.assertEqual(self.request(port, "GET", "/nope")[0], 404)
        self.assertEqual(self.request(port, "GET", "/ping")[:2], (200, {"status": "healthy"}))
        # A chunked body, as a proxy streaming a request would send it.
        status, body, _ = self.request(port, "POST", "/process", iter([b'{"a":', b' 1}']))
        self.assertEqual((status, body), (200, {"got": {"a": 1}}))

    def test_keep_alive(self):
        api = Endpoint(name="api")
        api.get("/n")(lambda: 1)
        port = self.serve(api.routes)
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        self.addCleanup(conn.close)
        for _ in range(20):
            conn.request("GET", "/n")
            resp = conn.getresponse()
            self.assertEqual(resp.read(), b"1")
        self.assertEqual(resp.getheader("Content-Type"), "application/json")


class Process(unittest.TestCase):
    """The runtime as the platform starts it: `python3 -m gantry.runtime` with env only."""

    def run_runtime(self, env, timeout=20):
        return subprocess.run([sys.executable, "-m", "gantry.runtime"], env=runtime_env(**env), capture_output=True,
                              text=True, timeout=timeout, cwd=SDK_DIR)

    def test_missing_variables_are_named(self):
        r = self.run_runtime({})
        self.assertEqual(r.returncode, 2)
        self.assertIn("missing environment variables GANTRY_ARTIFACT_URL, GANTRY_ARTIFACT_SHA256, "
                      "GANTRY_ARTIFACT_CACHE, GANTRY_RESOURCE", r.stderr)
        project = temp_project(self, {"w.py": QUEUE_SRC.replace("import depmod\n", "").replace(', "dep": depmod.VALUE', "")})
        r = self.run_runtime({"GANTRY_PROJECT_DIR": project, "GANTRY_RESOURCE": "adder"})
        self.assertEqual(r.returncode, 2)
        self.assertIn("missing environment variables RUNPOD_WEBHOOK_GET_JOB", r.stderr)
        r = self.run_runtime({"GANTRY_PROJECT_DIR": project, "GANTRY_RESOURCE": "nope"})
        self.assertEqual(r.returncode, 2)
        self.assertIn("no resource 'nope'", r.stderr)
        self.assertIn("found: adder", r.stderr)

    def test_files_named_like_loaded_modules_and_odd_directories(self):
        # queue.py would otherwise import the standard library's queue; my-app/ is no package name.
        for rel in ("queue.py", "my-app/worker.py"):
            with self.subTest(rel=rel):
                project = temp_project(self, {rel: 'from gantry import endpoint\n@endpoint(name="w")\ndef f(x):\n    return x\n'})
                fake = FakeProtocol()
                self.addCleanup(fake.close)
                fake.add("j", {"x": 7})
                proc = subprocess.Popen([sys.executable, "-m", "gantry.runtime"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                        env=runtime_env(GANTRY_PROJECT_DIR=project, GANTRY_RESOURCE="w", **fake.env()))
                try:
                    fake.wait_done(1, timeout=15)
                finally:
                    proc.send_signal(signal.SIGTERM)
                    out, _ = proc.communicate(timeout=20)
                self.assertEqual(fake.done["j"]["body"], {"output": 7}, out)

    def test_import_failure_exits_non_zero(self):
        project = temp_project(self, {"w.py": 'from gantry import endpoint\nraise RuntimeError("bad model path")\n'
                                              '@endpoint(name="w")\ndef f(): pass\n'})
        fake = FakeProtocol()
        self.addCleanup(fake.close)
        r = self.run_runtime({"GANTRY_PROJECT_DIR": project, "GANTRY_RESOURCE": "w", **fake.env()})
        self.assertEqual(r.returncode, 1)
        self.assertIn("bad model path", r.stderr)
        self.assertIn("importing w.py failed", r.stderr)

    def test_sigterm_finishes_the_running_job_then_exits_0(self):
        project = temp_project(self, {"w.py": '''
            import time
            from gantry import endpoint
            @endpoint(name="slow")
            def slow(seconds: float):
                print("job started", flush=True)
                time.sleep(seconds)
                return "finished"
        '''})
        fake = FakeProtocol(hold=30)
        self.addCleanup(fake.close)
        proc = subprocess.Popen([sys.executable, "-m", "gantry.runtime"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                env=runtime_env(GANTRY_PROJECT_DIR=project, GANTRY_RESOURCE="slow", **fake.env()))
        self.addCleanup(lambda: proc.poll() is None and proc.kill())
        fake.add("s1", {"seconds": 1.0})
        for line in proc.stdout:
            if "job started" in line:
                break
        proc.send_signal(signal.SIGTERM)
        proc.send_signal(signal.SIGTERM)  # delivered twice by some wrappers: still a graceful stop
        out, _ = proc.communicate(timeout=20)
        self.assertEqual(proc.returncode, 0, out)
        self.assertEqual(fake.done["s1"]["body"], {"output": "finished"})
        # The take asked for while s1 ran (job_in_progress=1) was cut short by the stop: no other take.
        self.assertLessEqual(len(fake.takes), 2, "no new take after SIGTERM")
        self.assertTrue(all(q.endswith("job_in_progress=1") for _, q in fake.takes[1:]), fake.takes)

        # Idle in a 30 s long-poll: SIGTERM ends it at once.
        proc = subprocess.Popen([sys.executable, "-m", "gantry.runtime"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                env=runtime_env(GANTRY_PROJECT_DIR=project, GANTRY_RESOURCE="slow", **fake.env()))
        for line in proc.stdout:
            if "from the job queue" in line:
                break
        time.sleep(0.3)
        t0 = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=20)
        self.assertEqual(proc.returncode, 0, out)
        self.assertLess(time.monotonic() - t0, 3)

    def test_load_balanced_with_a_separate_health_port(self):
        project = temp_project(self, {"lb.py": '''
            from gantry import Endpoint
            api = Endpoint(name="api")
            @api.post("/process")
            def process(body):
                return {"echo": body}
        '''})
        port, health = free_port(), free_port()
        proc = subprocess.Popen([sys.executable, "-m", "gantry.runtime"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                env=runtime_env(GANTRY_PROJECT_DIR=project, GANTRY_RESOURCE="api", PORT=port, PORT_HEALTH=health))
        self.addCleanup(lambda: proc.poll() is None and proc.kill())
        for line in proc.stdout:
            if "serving" in line:
                break

        def call(p, method, path, body=None):
            conn = http.client.HTTPConnection("127.0.0.1", p, timeout=10)
            conn.request(method, path, body=body)
            resp = conn.getresponse()
            out = resp.status, json.loads(resp.read())
            conn.close()
            return out

        self.assertEqual(call(health, "GET", "/ping"), (200, {"status": "healthy"}))
        self.assertEqual(call(port, "POST", "/process", b'{"a": 1}'), (200, {"echo": {"a": 1}}))
        self.assertEqual(call(port, "GET", "/ping")[0], 404)
        self.assertEqual(call(health, "POST", "/process", b"{}")[0], 404)
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=20)
        self.assertEqual(proc.returncode, 0, out)


if __name__ == "__main__":
    unittest.main()
