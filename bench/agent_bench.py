"""What the Python benchmarks of the :9400 endpoint share: start the real `kgpu agent` on the fake
NVML (metrics only, port chosen by the OS), read a process's RSS, take a percentile."""

import os
import re
import subprocess
import sys
import tempfile
import time


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def start_agent(build, tmp=None, extra_args=()):
    """Starts the agent (8x H100 fake node, 1 s interval) with `extra_args`; logs go to
    <tmp>/agent.log (a new temporary directory when tmp is None). Returns (process, port)."""
    tmp = tmp or tempfile.mkdtemp(prefix="kgpu-http-")
    log_path = os.path.join(tmp, "agent.log")
    log = open(log_path, "w+")
    env = {k: v for k, v in os.environ.items() if k != "KGPU_FAKE_NVML_CONFIG"}
    args = [os.path.join(build, "kgpu"), "agent", "--nvml-library",
            os.path.join(build, "tools/fake-nvml/libnvidia-ml.so.1"), "-a", "127.0.0.1:0", "-c", "1000",
            "--pod-resources-socket", "", "--device-plugin=false", *extra_args]
    proc = subprocess.Popen(args, stdout=log, stderr=log, env=env)
    deadline = time.time() + 20
    while time.time() < deadline:
        log.seek(0)
        m = re.search(r"listening on [^:\s]+:(\d+)", log.read())
        if m:
            return proc, int(m.group(1))
        time.sleep(0.02)
    proc.kill()
    sys.exit("agent did not start:\n" + open(log_path).read())


def pct(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * p))]
