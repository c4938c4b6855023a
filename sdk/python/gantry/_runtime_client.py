"""The worker protocol's HTTP client: one persistent HTTP/1.1 connection carrying the worker's key,
and the backoff its callers wait by between failures. Shared by the queue loop and live reload."""

from __future__ import annotations

import http.client
import socket
import urllib.parse

from ._runtime_common import USER_AGENT

REQUEST_TIMEOUT_S = 60


class RequestFailed(Exception):
    """reused: it failed on a connection that had served before (likely closed while idle).
    status: the HTTP status when the server answered, None when the connection failed."""

    def __init__(self, message, reused, status=None):
        super().__init__(message)
        self.reused = reused
        self.status = status


class Client:
    """One persistent HTTP/1.1 connection (reconnected when it breaks or the origin changes)."""

    def __init__(self, key=None):
        self.key = key
        self.conn = None
        self.origin = None
        self.used = 0

    def close(self):
        if self.conn is not None:
            try:
                self.conn.close()
            except OSError:
                pass
        self.conn = None
        self.used = 0

    def connect(self, url):
        parts = urllib.parse.urlsplit(url)
        origin = (parts.scheme, parts.hostname, parts.port)
        if self.conn is not None and self.conn.sock is not None and origin == self.origin:
            return self.conn
        self.close()
        cls = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
        conn = cls(parts.hostname, parts.port, timeout=REQUEST_TIMEOUT_S)
        try:
            conn.connect()
        except OSError as e:
            raise RequestFailed(f"cannot connect to {parts.hostname}:{parts.port}: {e}", False) from None
        # Small requests answered at once: without this, Nagle plus delayed ACKs can add 40 ms.
        conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.conn, self.origin = conn, origin
        return conn

    @property
    def sock(self):
        return self.conn.sock if self.conn is not None else None

    def request(self, method, url, body=None, timeout=REQUEST_TIMEOUT_S):
        conn = self.connect(url)
        reused = self.used > 0
        parts = urllib.parse.urlsplit(url)
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        headers = {"User-Agent": USER_AGENT, "Accept": "application/json"}
        if self.key:
            headers["Authorization"] = self.key  # the worker protocol's key has no "Bearer"
        if body is not None:
            headers["Content-Type"] = "application/json"
        try:
            conn.sock.settimeout(timeout)
            conn.request(method, target, body=body, headers=headers)
            resp = conn.getresponse()
            data = resp.read()
        except (OSError, http.client.HTTPException) as e:
            self.close()
            raise RequestFailed(f"{method} {parts.path}: {type(e).__name__}: {e}", reused) from None
        self.used += 1
        if resp.will_close:
            self.close()
        return resp.status, data


class Backoff:
    def __init__(self, first, limit):
        self.first, self.limit, self.next = first, limit, first

    def delay(self):
        d = self.next
        self.next = min(self.limit, self.next * 2)
        return d

    def reset(self):
        self.next = self.first
