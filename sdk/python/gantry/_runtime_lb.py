"""Load-balanced resources: an Endpoint's routes served over HTTP/1.1 by a threaded server (async
routes on an event loop of their own), the health check on /ping, and a drain on stop."""

from __future__ import annotations

import asyncio
import http.server
import inspect
import json
import threading
import traceback
import urllib.parse

from ._runtime_common import log, log_error


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
