"""A queue worker that takes at least 3 s to become ready: its imports, then a "model" load that
fills 1 GiB of memory (every page written, so it is resident), then the rest of the 3 s. Answers
with its process id, a token made at its start, and how long its load took."""
import time

T0 = time.monotonic()
import os
import uuid

from gantry._runtime_queue import QueueWorker
from gantry._runtime_stop import Stopper

MODEL = bytearray(b"\x01") * (1 << 30)
time.sleep(max(0.0, 3.0 - (time.monotonic() - T0)))
LOAD_MS = round((time.monotonic() - T0) * 1000)
BOOT = uuid.uuid4().hex


def handler(**inp):
    return {"pid": os.getpid(), "boot": BOOT, "loadMs": LOAD_MS, "modelBytes": len(MODEL), "echo": inp}


stopper = Stopper()
stopper.install()
QueueWorker(handler, os.environ, stopper).run()
