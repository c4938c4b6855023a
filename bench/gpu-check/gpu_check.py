"""The GPU path on real hardware, for a machine with an NVIDIA GPU (bench/README.md, "GPU check").

Needs only python3 (with torch built for CUDA, for the runtime part) and this repository: GPU
machines often have no Node.js, no network and no container runtime. Three parts, each saying what
it found or why it could not run:

1. The host probe: the platform's own probe script (PROBE_SCRIPT of activities/host-probe.ts, read
   from the source) run with `sh -s`, as the platform runs it over SSH; prints the GPUs, the CUDA
   version, the container runtime and the CDI specs. Where Node.js and the project's packages are
   there, Gantry's parser (bench/gpu-check/parse-probe.ts) says the pool and passthrough method.
2. Gantry's Python runtime (sdk/python) serving a torch CUDA function through its local job API
   (GANTRY_LOCAL_API=1, as `gantry dev` runs it): N jobs, each checked against a direct call of the
   same function, and the overhead per job against direct calls.
3. Where Podman or Docker is there: one container with the GPU flags Gantry gives a worker (a CDI
   device by UUID, or Docker's --gpus device=<uuid>), the machine's own root as the container's root
   (no image can be pulled on such machines): what the container sees of the GPU.

Usage: python3 bench/gpu-check/gpu_check.py [--jobs 1600] [--size 4096] [--allow-cpu]
--allow-cpu runs part 2 on the CPU with a small matmul where torch has no CUDA (to try the script
anywhere); the figures are then not GPU figures and say so.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
import urllib.request

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
MARK = "@@gantry-probe:"


def probe_script() -> str:
    source = open(os.path.join(ROOT, "activities", "host-probe.ts"), encoding="utf-8").read()
    m = re.search(r"export const PROBE_SCRIPT = String\.raw`(.*?)`;", source, re.S)
    if not m:
        raise SystemExit("PROBE_SCRIPT not found in activities/host-probe.ts")
    return m.group(1).replace("${MARK}", MARK)


def sections(output: str) -> dict[str, str]:
    found: dict[str, list[str]] = {}
    current = None
    for line in output.splitlines():
        if line.startswith(MARK):
            current = line[len(MARK):].strip()
            found[current] = []
        elif current is not None:
            found[current].append(line)
    return {k: "\n".join(v).strip() for k, v in found.items()}


def part_probe() -> dict:
    print("== 1. host probe (activities/host-probe.ts PROBE_SCRIPT)")
    out = subprocess.run(["sh", "-s"], input=probe_script(), capture_output=True, text=True, timeout=300).stdout
    sec = sections(out)
    for name in ("nvidia-smi", "nvidia-smi-exit", "cuda", "nvidia-ctk", "cdi-spec-versions", "cdi-devices"):
        if sec.get(name):
            print(f"  {name}: {', '.join(sec[name].splitlines())}")
    # A runtime counts where it answered (a Docker CLI without its daemon does not).
    runtimes = [k.split(":", 1)[1] for k in sec if k.startswith("runtime:") and "usable=1" in sec[k]]
    print(f"  usable container runtimes: {', '.join(runtimes) or 'none'}")
    gpus = []
    if sec.get("nvidia-smi-exit") == "0":
        for line in sec.get("nvidia-smi", "").splitlines():
            fields = [f.strip() for f in line.split(",")]
            if len(fields) >= 4:
                gpus.append({"name": fields[0], "memoryMb": int(fields[1]), "uuid": fields[2], "driver": fields[3]})
    parsed = parse_with_gantry(out)
    if parsed:
        for g in parsed.get("gpus", []):
            print(f"  Gantry's parse: {g['name']} -> type {g['gpuTypeId']}, pool {g.get('pool')}")
        print(f"  passthrough: {parsed['gpuPassthrough']['method']}; hint: {parsed['gpuPassthrough'].get('hint')}")
    else:
        print("  (the pool: Gantry's parser needs Node.js and the project's packages, not here)")
    return {"gpus": gpus, "runtimes": runtimes, "parsed": parsed}


def parse_with_gantry(output: str) -> dict | None:
    bootstrap = os.path.join(ROOT, "tooling", "bootstrap.mjs")
    if not shutil.which("node") or not os.path.isdir(os.path.join(ROOT, "node_modules", "tsx")):
        return None
    r = subprocess.run(
        ["node", bootstrap, "node", "--import", "tsx", os.path.join(ROOT, "bench", "gpu-check", "parse-probe.ts")],
        input=output, capture_output=True, text=True, cwd=ROOT, timeout=120,
    )
    return json.loads(r.stdout) if r.returncode == 0 else None


FUNCTION = textwrap.dedent('''
    import hashlib
    from gantry import endpoint

    try:
        import torch
    except ImportError:
        torch = None


    @endpoint(name="gpu-check", gpu=["ADA_24"], workers=(0, 1))
    def matmul(seed: int, size: int, device: str) -> dict:
        """A bf16 matmul on the GPU (fp32 on the CPU), answered with a checksum of its result."""
        if device == "python":  # no torch: a small product in plain Python, to try the harness
            import random
            r = random.Random(seed)
            a = [[r.random() for _ in range(size)] for _ in range(size)]
            c = [sum(x * y for x, y in zip(row, col)) for row in a for col in zip(*a)]
            return {"sha256": hashlib.sha256(repr(c).encode()).hexdigest()}
        g = torch.Generator(device=device).manual_seed(seed)
        dtype = torch.bfloat16 if device == "cuda" else torch.float32
        a = torch.randn(size, size, generator=g, device=device, dtype=dtype)
        b = torch.randn(size, size, generator=g, device=device, dtype=dtype)
        c = (a @ b).float().cpu()
        return {"sha256": hashlib.sha256(c.numpy().tobytes()).hexdigest()}
''')


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def post(url: str, body: dict, timeout: float = 120) -> dict:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read())


def part_runtime(jobs: int, size: int, allow_cpu: bool) -> dict | None:
    print("== 2. Gantry's Python runtime, local job API, a torch function")
    try:
        import torch
    except ImportError:
        torch = None
    device = "cuda" if torch is not None and torch.cuda.is_available() else "cpu" if torch is not None else "python"
    if device != "cuda" and not allow_cpu:
        print(f"  {'torch has no CUDA device' if torch else 'torch is not installed'} here: skipped (--allow-cpu runs it on the CPU)")
        return None
    if device != "cuda":
        size = min(size, 256 if device == "cpu" else 24)
        print(f"  on the CPU ({device}, {size}x{size}): not GPU figures")
    project = tempfile.mkdtemp(prefix="gantry-gpu-check-")
    with open(os.path.join(project, "gpu_check_fn.py"), "w") as f:
        f.write(FUNCTION)
    sys.path[:0] = [project, os.path.join(ROOT, "sdk", "python")]
    import gpu_check_fn

    # Direct calls: the floor, and the expected answers.
    gpu_check_fn.matmul(seed=0, size=size, device=device)  # warm-up (kernels, allocator)
    expected, direct = [], []
    for i in range(jobs):
        t = time.perf_counter()
        expected.append(gpu_check_fn.matmul(seed=i, size=size, device=device)["sha256"])
        direct.append(time.perf_counter() - t)

    port = free_port()
    env = dict(os.environ, GANTRY_PROJECT_DIR=project, GANTRY_RESOURCE="gpu-check", GANTRY_LOCAL_API="1",
               PORT=str(port), PYTHONPATH=os.path.join(ROOT, "sdk", "python"))
    started = time.perf_counter()
    log = open(os.path.join(project, "runtime.log"), "w")
    proc = subprocess.Popen([sys.executable, "-m", "gantry.runtime"], env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        url = f"http://127.0.0.1:{port}"
        first = None
        while first is None:
            try:
                first = post(f"{url}/runsync", {"input": {"seed": 0, "size": size, "device": device}})
            except OSError:
                if proc.poll() is not None:
                    raise SystemExit(f"the runtime exited with {proc.returncode}: see {log.name}")
                time.sleep(0.05)
        first_s = time.perf_counter() - started
        correct, served = 0, []
        for i in range(jobs):
            t = time.perf_counter()
            r = post(f"{url}/runsync", {"input": {"seed": i, "size": size, "device": device}})
            served.append(time.perf_counter() - t)
            correct += r.get("status") == "COMPLETED" and r["output"]["sha256"] == expected[i]
    finally:
        proc.terminate()
        proc.wait(30)
    # Overhead: the served time's quantiles less the direct calls' (each job is also timed directly).
    over = [(s - d) * 1000 for s, d in zip(sorted(served), sorted(direct))]
    result = {
        "device": torch.cuda.get_device_name(0) if device == "cuda" else device,
        "jobs": jobs,
        "correct": correct,
        "firstJobSeconds": round(first_s, 2),
        "directMsP50": round(statistics.median(direct) * 1000, 3),
        "servedMsP50": round(statistics.median(served) * 1000, 3),
        "overheadMsP50": round(statistics.median(over), 3),
        "overheadMsP90": round(sorted(over)[int(len(over) * 0.9)], 3),
    }
    print(f"  {correct}/{jobs} jobs correct on {result['device']}; first job {first_s:.2f} s after the start")
    print(f"  per job: direct {result['directMsP50']} ms, through the runtime {result['servedMsP50']} ms (p50)")
    print(f"  overhead per job: p50 {result['overheadMsP50']} ms, p90 {result['overheadMsP90']} ms")
    return result


def part_container(probe: dict, image: str | None) -> dict | None:
    print("== 3. one GPU container with Gantry's flags")
    if not probe["gpus"]:
        print("  no GPU found by the probe: skipped")
        return None
    runtime = next((r for r in ("docker", "podman") if r in probe["runtimes"]), None)
    if not runtime:
        print("  no Podman or Docker here: skipped")
        return None
    if runtime == "docker" and not image:
        print("  Docker needs an image with sh (--image): skipped")
        return None
    parsed_method = ((probe["parsed"] or {}).get("gpuPassthrough") or {}).get("method")
    method = parsed_method or ("docker-gpus" if runtime == "docker" else "cdi")
    uuid = probe["gpus"][0]["uuid"]
    # The flags hostctl/containers.ts (runArgs) gives a worker with one GPU.
    flags = ["--network", "bridge", "--cap-drop", "NET_RAW"]
    flags += ["--device", f"nvidia.com/gpu={uuid}"] if method == "cdi" else ["--gpus", f"device={uuid}"]
    look = "ls /dev | grep nvidia | tr '\\n' ' '; echo; cat /proc/1/environ | tr '\\0' '\\n' | grep NVIDIA_; command -v nvidia-smi >/dev/null && nvidia-smi -L || echo 'no nvidia-smi in the container'"
    rootfs = None
    if image:
        cmd = [runtime, "run", "--rm", *flags, image, "sh", "-c", look]
    else:
        # No image can be pulled on such machines: the machine's own root, bound without its
        # submounts (runc refuses a root that carries the host's /sys).
        rootfs = tempfile.mkdtemp(prefix="gantry-gpu-root-")
        subprocess.run(["mount", "--bind", "/", rootfs], check=True)
        cmd = [runtime, "run", "--rm", *flags, "--rootfs", rootfs, "sh", "-c", look]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    finally:
        if rootfs:
            subprocess.run(["umount", rootfs])
            os.rmdir(rootfs)
    print(f"  {' '.join(cmd[:-1])} '...': exit {r.returncode}")
    print(textwrap.indent((r.stdout + r.stderr).strip(), "  "))
    return {"command": cmd, "exit": r.returncode, "output": (r.stdout + r.stderr).strip()[:2000]}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=1600)
    ap.add_argument("--size", type=int, default=4096)
    ap.add_argument("--allow-cpu", action="store_true")
    ap.add_argument("--image", help="an image with sh for the container part (default, Podman: the machine's root)")
    ap.add_argument("--json", help="write the results to this file")
    args = ap.parse_args()
    probe = part_probe()
    runtime = part_runtime(args.jobs, args.size, args.allow_cpu)
    container = part_container(probe, args.image)
    results = {"probe": {k: probe[k] for k in ("gpus", "runtimes")}, "runtime": runtime, "container": container}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)
    ok = runtime is None or runtime["correct"] == runtime["jobs"]
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
