"""Shared by the tests: the package on sys.path, temporary projects, and a fake of the platform's
worker protocol (enough of it to drive the runtime's queue loop: take, done, ping; and live
reload's source poll with the signed download it hands out)."""

import collections
import hashlib
import http.server
import io
import json
import os
import socket
import subprocess
import sys
import tarfile
import tempfile
import textwrap
import threading
import time
import urllib.parse

SDK_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCAN_PY = os.path.join(SDK_DIR, "gantry", "scan.py")
if SDK_DIR not in sys.path:
    sys.path.insert(0, SDK_DIR)


def write_project(root, files):
    """Writes {relative path: source} under root (dedented)."""
    for rel, text in files.items():
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        mode = "wb" if isinstance(text, bytes) else "w"
        with open(path, mode) as f:
            f.write(text if isinstance(text, bytes) else textwrap.dedent(text).lstrip("\n"))
    return root


def temp_project(test, files):
    d = tempfile.mkdtemp(prefix="gantry-test-")
    test.addCleanup(lambda: subprocess.run(["rm", "-rf", d]))
    return write_project(d, files)


def source_tar(files):
    """A source upload as `gantry dev` sends it: a gzip tar of {relative path: source} at its root."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        for rel, text in files.items():
            data = textwrap.dedent(text).lstrip("\n").encode()
            info = tarfile.TarInfo(rel)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def runtime_env(**extra):
    """A clean environment for running the runtime as a subprocess: only what a worker gets."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": SDK_DIR, "PYTHONUNBUFFERED": "1"}
    if os.environ.get("PYTHONDONTWRITEBYTECODE"):
        env["PYTHONDONTWRITEBYTECODE"] = "1"  # a read-only or clean checkout stays so
    env.update({k: str(v) for k, v in extra.items()})
    return env


class FakeProtocol:
    """The worker protocol's job-take / job-done / ping, served over HTTP/1.1 keep-alive.

    Jobs are queued with add(); a take with nothing queued is held (a long-poll) for up to
    `hold` seconds, then answered 204. Everything the runtime sent is recorded.
    """

    def __init__(self, key="worker-key", endpoint="ep1", hold=0.2, port=0):
        self.key, self.endpoint, self.hold = key, endpoint, hold
        self.jobs = collections.deque()
        self.cond = threading.Condition()
        self.done = {}          # job id -> parsed body
        self.done_times = []
        self.take_times = []
        self.takes = []         # query strings of takes
        self.pings = []         # job_id values of pings
        self.connections = set()  # client ports that took or posted
        self.bad_auth = []
        self.answers = collections.deque()  # forced statuses for the next takes (e.g. 429)
        self.sources = {}       # version -> gzip tar bytes (live reload)
        self.source_polls = []  # (worker, after) of each source poll
        self.source_gets = []   # versions downloaded
        fake = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True

            def log_message(self, *args):
                pass

            def reply(self, status, body=b""):
                head = f"HTTP/1.1 {status} X\r\nContent-Length: {len(body)}\r\nContent-Type: application/json\r\n\r\n"
                self.wfile.write(head.encode() + body)  # one write: no Nagle/delayed-ACK stalls

            def do_GET(self):
                u = urllib.parse.urlsplit(self.path)
                q = urllib.parse.parse_qs(u.query, keep_blank_values=True)
                if u.path.startswith("/signed/sources/"):  # the URL is the credential, as the platform's
                    version = int(u.path.rsplit("/", 1)[-1])
                    fake.source_gets.append(version)
                    data = fake.sources.get(version)
                    return self.reply(200, data) if data is not None else self.reply(404)
                if self.headers.get("Authorization") != fake.key:
                    fake.bad_auth.append(self.headers.get("Authorization"))
                    return self.reply(401)
                parts = u.path.split("/")
                if u.path.startswith(f"/v2/{fake.endpoint}/source/"):
                    after = int(q.get("after", ["0"])[0])
                    fake.source_polls.append((parts[-1], after))
                    newest = max(fake.sources, default=0)
                    if newest <= after:
                        return self.reply(204)
                    data = fake.sources[newest]
                    answer = {"version": newest, "sha256": hashlib.sha256(data).hexdigest(),
                              "url": f"http://127.0.0.1:{fake.port}/signed/sources/{newest}?sig=secret"}
                    return self.reply(200, json.dumps(answer).encode())
                if u.path.startswith(f"/v2/{fake.endpoint}/ping/"):
                    fake.pings.append((parts[-1], q.get("job_id", [None])[0]))
                    return self.reply(200, b"{}")
                if u.path.startswith(f"/v2/{fake.endpoint}/job-take/"):
                    fake.connections.add(self.client_address[1])
                    fake.takes.append((parts[-1], u.query))
                    fake.take_times.append(time.monotonic())
                    with fake.cond:
                        if fake.answers:
                            return self.reply(fake.answers.popleft())
                        deadline = time.monotonic() + fake.hold
                        while not fake.jobs and time.monotonic() < deadline:
                            fake.cond.wait(deadline - time.monotonic())
                        job = fake.jobs.popleft() if fake.jobs else None
                    if job is None:
                        return self.reply(204)
                    return self.reply(200, json.dumps(job).encode())
                self.reply(404)

            def do_POST(self):
                u = urllib.parse.urlsplit(self.path)
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.headers.get("Authorization") != fake.key:
                    fake.bad_auth.append(self.headers.get("Authorization"))
                    return self.reply(401)
                if u.path.startswith(f"/v2/{fake.endpoint}/job-done/"):
                    fake.connections.add(self.client_address[1])
                    job_id = urllib.parse.unquote(u.path.split("/")[-1])
                    with fake.cond:
                        fake.done[job_id] = {"body": json.loads(body), "query": u.query, "worker": u.path.split("/")[-2],
                                             "contentType": self.headers.get("Content-Type")}
                        fake.done_times.append(time.monotonic())
                        fake.cond.notify_all()
                    return self.reply(200, b"{}")
                self.reply(404)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()

    def publish_source(self, files):
        """A new source version (the next number), as an upload to the platform makes one."""
        version = max(self.sources, default=0) + 1
        self.sources[version] = source_tar(files)
        return version

    def add(self, job_id, job_input):
        with self.cond:
            self.jobs.append({"id": job_id, "input": job_input})
            self.cond.notify_all()

    def wait_done(self, count, timeout=10.0):
        deadline = time.monotonic() + timeout
        with self.cond:
            while len(self.done) < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"only {len(self.done)} of {count} jobs done after {timeout} s")
                self.cond.wait(left)

    def error_of(self, job_id):
        return json.loads(self.done[job_id]["body"]["error"])

    def env(self, worker_id="w1", ping_interval=10000, **extra):
        return protocol_env(self.port, self.key, self.endpoint, worker_id, ping_interval, **extra)


def protocol_env(port, key="worker-key", endpoint="ep1", worker_id="w1", ping_interval=10000, **extra):
    """The worker-protocol variables the platform gives a worker, pointing at 127.0.0.1:port."""
    base = f"http://127.0.0.1:{port}/v2/{endpoint}"
    env = {
        "RUNPOD_WEBHOOK_GET_JOB": f"{base}/job-take/$ID?gpu=CPU",
        "RUNPOD_WEBHOOK_POST_OUTPUT": f"{base}/job-done/$RUNPOD_POD_ID/$ID?gpu=CPU",
        "RUNPOD_WEBHOOK_PING": f"{base}/ping/$RUNPOD_POD_ID",
        "RUNPOD_PING_INTERVAL": str(ping_interval),
        "RUNPOD_AI_API_KEY": key,
        "RUNPOD_POD_ID": worker_id,
        "RUNPOD_ENDPOINT_ID": endpoint,
    }
    env.update({k: str(v) for k, v in extra.items()})
    return env
