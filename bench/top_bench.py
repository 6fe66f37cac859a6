#!/usr/bin/env python3
"""`kgpu top nodes` over N GPU nodes, through the API-server stand-in's pods/proxy.

1. Records real agent pages: `kgpu agent` on the fake NVML with each of examples/nodes/*.yaml
   (8x H100 with MIG and jobs, 8x H200, 8x A100 MIG, T4s, a mixed node), 1 s apart so GPM and
   per-process readings are in.
2. Serves them from one process (bench/top_pages.cc): node i's agent pod has the address
   127.1.<i/250>.<i%250+1>, and the page is chosen by the address a request arrives on.
3. Loads the stand-in with N nodes (8 GPUs each), N agent pods (labels and port as
   deploy/daemonset.yaml) and 4 GPU pods per node.
4. Runs `kgpu top nodes` (and `-o json`, and with 64 pages in flight) RUNS times; reports wall
   time (median, min), the kgpu process's CPU time (user + system) and its peak RSS, and the CPU
   the stand-in and the page server spent meanwhile (medians).

usage: bench/top_bench.py BUILD_DIR [NODES] [RUNS]
"""

import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(HERE)
NODE_FILES = ["dgx-h100.yaml", "hgx-h200.yaml", "dgx-a100-mig.yaml", "t4-pcie.yaml", "mixed.yaml"]


def wait_for(path_or_log, pattern, timeout=20):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            m = re.search(pattern, open(path_or_log).read())
            if m:
                return m
        except FileNotFoundError:
            pass
        time.sleep(0.02)
    sys.exit(f"timed out waiting for {pattern} in {path_or_log}")


def record_pages(build, tmp):
    pages = []
    for name in NODE_FILES:
        log = os.path.join(tmp, name + ".log")
        env = dict(os.environ, KGPU_FAKE_NVML_CONFIG=os.path.join(SOURCE, "examples/nodes", name))
        args = [os.path.join(build, "kgpu"), "agent", "--nvml-library",
                os.path.join(build, "tools/fake-nvml/libnvidia-ml.so.1"), "-a", "127.0.0.1:0", "-c", "500",
                "--pod-resources-socket", "", "--device-plugin=false", "--labels=false"]
        with open(log, "w") as out:
            proc = subprocess.Popen(args, stdout=out, stderr=out, env=env)
        try:
            port = int(wait_for(log, r"listening on [^:\s]+:(\d+)").group(1))
            time.sleep(1.2)  # two samples at least: GPM ratios and per-process readings
            body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read()
        finally:
            proc.terminate()
            proc.wait()
        path = os.path.join(tmp, name + ".prom")
        with open(path, "wb") as f:
            f.write(body)
        pages.append(path)
    return pages


def cpu_seconds(pid):
    """User + system CPU seconds a running process has used (/proc/<pid>/stat)."""
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def address(i):
    return f"127.1.{i // 250}.{i % 250 + 1}"


def cluster(nodes, port):
    items = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kgpu-system"}},
             {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}}]
    for i in range(nodes):
        name = f"gpu-{i:04d}"
        items.append({"apiVersion": "v1", "kind": "Node",
                      "metadata": {"name": name, "labels": {"nvidia.com/gpu.present": "true",
                                                            "nvidia.com/gpu.count": "8"}},
                      "status": {"capacity": {"nvidia.com/gpu": "8", "cpu": "128"},
                                 "allocatable": {"nvidia.com/gpu": "8", "cpu": "128"},
                                 "conditions": [{"type": "Ready", "status": "True"}]}})
        items.append({"apiVersion": "v1", "kind": "Pod",
                      "metadata": {"name": f"kgpu-agent-{i:04d}", "namespace": "kgpu-system",
                                   "labels": {"app.kubernetes.io/name": "kgpu-agent",
                                              "app.kubernetes.io/instance": "kgpu"}},
                      "spec": {"nodeName": name, "containers": [
                          {"name": "agent", "image": "ghcr.io/kgpu/kgpu:0.1.0",
                           "ports": [{"name": "metrics", "containerPort": port}]}]},
                      "status": {"phase": "Running", "podIP": address(i),
                                 "conditions": [{"type": "Ready", "status": "True"}]}})
        for j in range(4):
            items.append({"apiVersion": "v1", "kind": "Pod",
                          "metadata": {"name": f"job-{i:04d}-{j}", "namespace": "ml"},
                          "spec": {"nodeName": name, "containers": [
                              {"name": "main", "image": "trainer:1",
                               "resources": {"limits": {"nvidia.com/gpu": "2"}}}]},
                          "status": {"phase": "Running"}})
    return {"apiVersion": "v1", "kind": "List", "items": items}


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    build = os.path.abspath(sys.argv[1])
    nodes = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
    runs = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    tmp = tempfile.mkdtemp(prefix="kgpu-top-bench-")
    pages = record_pages(build, tmp)
    sizes = [os.path.getsize(p) for p in pages]
    server_port_file = os.path.join(tmp, "pages.port")
    server = subprocess.Popen([os.path.join(build, "bench/top_pages"), "--port-file", server_port_file, *pages])
    port = int(wait_for(server_port_file, r"(\d+)").group(1))
    load = os.path.join(tmp, "cluster.json")
    with open(load, "w") as f:
        json.dump(cluster(nodes, port), f)
    kubeconfig = os.path.join(tmp, "kubeconfig")
    api_log = open(os.path.join(tmp, "apiserver.log"), "w")
    api = subprocess.Popen([os.path.join(build, "tools/apiserver/kgpu-apiserver"), "--token", "t",
                            "--kubeconfig", kubeconfig, "--port-file", os.path.join(tmp, "api.port"),
                            "--load", load], stdout=api_log, stderr=api_log)
    wait_for(os.path.join(tmp, "api.port"), r"(\d+)", timeout=120)
    results = {}
    try:
        for label, extra in [("table", []), ("json", ["-o", "json"]), ("table, --concurrency 64",
                                                                          ["--concurrency", "64"])]:
            walls, rss, cpu, api_cpu, pages_cpu = [], [], [], [], []
            for _ in range(runs):
                cmd = [os.path.join(build, "kgpu"), "top", "nodes", "--kubeconfig", kubeconfig, *extra]
                api_before, pages_before = cpu_seconds(api.pid), cpu_seconds(server.pid)
                start = time.monotonic()
                proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                out = proc.stdout.read()
                err = proc.stderr.read()
                _, status, usage = os.wait4(proc.pid, 0)
                walls.append(time.monotonic() - start)
                rss.append(usage.ru_maxrss)  # KiB on Linux
                cpu.append(usage.ru_utime + usage.ru_stime)
                api_cpu.append(cpu_seconds(api.pid) - api_before)
                pages_cpu.append(cpu_seconds(server.pid) - pages_before)
                if status != 0 or err:
                    sys.exit(f"kgpu top nodes failed ({status}): {err.decode()[:2000]}")
                lines = out.decode().count("\n") if label != "json" else len(json.loads(out))
                if lines < nodes:
                    sys.exit(f"expected {nodes} nodes, got {lines}")
            results[label] = (walls, rss, cpu, api_cpu, pages_cpu)
    finally:
        api.terminate()
        server.terminate()
    print(f"kgpu top nodes over {nodes} GPU nodes (8 GPUs each), {nodes} agent pods behind the stand-in's "
          f"pods/proxy, {4 * nodes} GPU pods; recorded pages {min(sizes)}-{max(sizes)} bytes; {runs} runs each")
    print(f"{'output':<26} {'wall median (s)':>16} {'wall min (s)':>13} {'kgpu CPU (s)':>13} "
          f"{'max RSS (MiB)':>14} {'stand-in CPU (s)':>17} {'page server CPU (s)':>20}")
    for label, (walls, rss, cpu, api_cpu, pages_cpu) in results.items():
        print(f"{label:<26} {statistics.median(walls):>16.3f} {min(walls):>13.3f} {statistics.median(cpu):>13.3f} "
              f"{max(rss) / 1024:>14.1f} {statistics.median(api_cpu):>17.3f} {statistics.median(pages_cpu):>20.3f}")


if __name__ == "__main__":
    main()
