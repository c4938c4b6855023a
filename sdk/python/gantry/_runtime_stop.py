"""Stopping the runtime: SIGTERM and SIGINT become a stop request that a blocked long-poll notices
at once; what is running finishes first."""

from __future__ import annotations

import os
import signal
import socket
import threading
import traceback

from ._runtime_common import log, log_error


class Stopper:
    """Turns SIGTERM/SIGINT into a stop request that a blocked long-poll notices at once.

    A signal may be delivered to any thread, and a Python handler only runs once the main thread
    gets back to bytecode, which a socket read of a 90 s long-poll does not. So the C-level handler
    writes to a wakeup fd, and a thread waiting on it runs the callbacks (e.g. shutting down the
    long-poll's socket). A second SIGINT exits at once.
    """

    def __init__(self):
        self.event = threading.Event()
        self._callbacks = []
        self._lock = threading.Lock()

    def on_stop(self, callback):
        with self._lock:
            self._callbacks.append(callback)

    def is_set(self):
        return self.event.is_set()

    def wait(self, timeout=None):
        return self.event.wait(timeout)

    def stop(self, why="stop requested"):
        with self._lock:
            if self.event.is_set():
                return
            self.event.set()
            callbacks = list(self._callbacks)
        log(f"{why}: finishing what is running, then exiting")
        for cb in callbacks:
            try:
                cb()
            except Exception:
                traceback.print_exc()

    def install(self):
        r, w = socket.socketpair()
        w.setblocking(False)
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda signum, frame: None)
        signal.set_wakeup_fd(w.fileno(), warn_on_full_buffer=False)
        self._wakeup = (r, w)  # keep both ends alive

        def watch():
            while True:
                data = r.recv(64)
                if not data:
                    return
                for signum in data:
                    if signum not in (signal.SIGTERM, signal.SIGINT):
                        continue
                    # A second Ctrl-C is a person who does not want to wait. A repeated SIGTERM is
                    # not: wrappers (timeout, some inits) deliver it twice, and the platform's
                    # SIGKILL after its grace period is the hard stop.
                    if signum == signal.SIGINT and self.is_set():
                        log_error("second SIGINT: exiting now")
                        os._exit(130)
                    self.stop(f"got {signal.Signals(signum).name}")

        threading.Thread(target=watch, name="gantry-signals", daemon=True).start()
