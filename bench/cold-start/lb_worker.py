"""A load-balancing worker that takes at least 3 s to become ready, as queue_worker.py: it listens on
$PORT at once, its health check GET /ping answering 204 (initializing) until the 1 GiB "model" is
loaded and 3 s have passed, then 200; POST /process answers with its process id and start token."""
import time

T0 = time.monotonic()
import http.server
import json
import os
import signal
import threading
import uuid

# The container's first process: SIGTERM does nothing unless handled.
signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
state = {"ready": False, "served": 0}
BOOT = uuid.uuid4().hex


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def answer(self, status, value=None):
        body = b"" if value is None else json.dumps(value).encode()
        self.send_response(status)
        if value is not None:
            self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path.split("?")[0] == "/ping":
            return self.answer(200, {"status": "healthy"}) if state["ready"] else self.answer(204)
        self.answer(404, {"error": "no route"})

    def do_POST(self):
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if not state["ready"]:
            return self.answer(503, {"error": "loading"})
        state["served"] += 1
        self.answer(200, {"pid": os.getpid(), "boot": BOOT, "loadMs": state["loadMs"], "served": state["served"], "echo": json.loads(raw or b"null")})


server = http.server.ThreadingHTTPServer(("0.0.0.0", int(os.environ.get("PORT") or 80)), Handler)
server.daemon_threads = True
threading.Thread(target=server.serve_forever, daemon=True).start()
MODEL = bytearray(b"\x01") * (1 << 30)
time.sleep(max(0.0, 3.0 - (time.monotonic() - T0)))
state["loadMs"] = round((time.monotonic() - T0) * 1000)
state["ready"] = True
while True:
    time.sleep(3600)
