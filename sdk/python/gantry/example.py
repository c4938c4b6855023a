"""An example worker: ``python3 -m gantry.example``, the command of the image
``localhost/gantry-example-worker:py3.X`` that hosts build when an endpoint names it
(docs/jobs.md, "The example worker").

It speaks the worker protocol as any worker image written for the hosted service does, on
Gantry's runtime (standard library only, so it needs no package index), and answers each job
with its input: ``{"input": {"prompt": "hello"}}`` gives ``{"echo": {"prompt": "hello"}}``. An
input ``{"fail": "why"}`` fails the job with that message, to see a failed job end to end.
"""

from __future__ import annotations

import os
import sys

from ._runtime_common import Fatal, log, log_error, require_env
from ._runtime_queue import QUEUE_ENV, QueueWorker
from ._runtime_stop import Stopper


def handler(**job_input):
    """The job's input back, or the failure it asks for."""
    if "fail" in job_input:
        raise RuntimeError(str(job_input["fail"]))
    return {"echo": job_input}


def main(env=None):
    env = os.environ if env is None else env
    try:
        require_env(QUEUE_ENV, env)
        stopper = Stopper()
        stopper.install()
        log(f"example worker {env['RUNPOD_POD_ID']} of endpoint {env.get('RUNPOD_ENDPOINT_ID', '?')} taking jobs")
        QueueWorker(handler, env, stopper).run()
        return 0
    except Fatal as e:
        log_error(str(e))
        return e.code


if __name__ == "__main__":
    sys.exit(main())
