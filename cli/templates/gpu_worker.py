"""A queue-based GPU endpoint: jobs wait in a queue and each worker takes them one at a time.

Call it with POST {url}/run (answers at once with a job id) or {url}/runsync (waits for the
result), body {"input": {"prompt": "...", "steps": 20}}: the members of "input" are the function's
parameters.
"""

from gantry import endpoint


@endpoint(name="gpu-worker", gpu=["ADA_24"], gpu_count=1, workers=(0, 3), idle_timeout=5)
def generate(prompt: str, steps: int = 20) -> dict:
    """Stands in for a model: replace the body with your inference code.

    GPU workers' runtime image has torch, torchvision, torchaudio, numpy and triton, so
    `import torch` works here without listing it in requirements.txt (CPU workers' image has
    none of them: a CPU function that imports one lists it there).
    """
    words = prompt.split()
    return {"prompt": prompt, "steps": steps, "tokens": len(words)}
