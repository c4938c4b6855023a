"""A queue-based CPU endpoint: the same job API as the GPU one, on a CPU instance.

`cpu` names an instance as flavor-vcpus-memoryGb: cpu3c-2-4 is 2 vCPUs and 4 GB.
"""

from gantry import endpoint


@endpoint(name="cpu-worker", cpu="cpu3c-2-4", workers=(0, 3))
def add(a: int, b: int) -> dict:
    """Adds two numbers."""
    return {"sum": a + b}
