#!/usr/bin/env python3
"""`kgpu scheduler` (the extender) under hostile clients, measured from outside.

Usage: bench/extender_hostile.py BUILD_DIR [--calls N] [--idle N] [--slow N]

Starts the API-server stand-in (BUILD_DIR/tools/apiserver/kgpu-apiserver) with one 8-GPU node and
`kgpu scheduler` against it, then reports /filter latency (a new connection per call, as
kube-scheduler's client does after an idle period) and /readyz latency:
  1. with nothing else connected;
  2. with N idle connections held open (default 1,000);
  3. with N slow-loris connections (default 100) each sending one header byte a second;
  4. RSS at rest, after three 50 MB bodies, and 2 s later.
Prints a Markdown table. No assertion: the numbers go to bench/RESULTS.md.
"""
import argparse
import json
import os
import re
import resource
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

from agent_bench import pct, rss_kib


def start(args, log_path):
    log = open(log_path, "w+")
    return subprocess.Popen(args, stdout=log, stderr=log), log


def wait_for(pred, what, timeout=30):
    deadline = time.time() + timeout
    while time.time() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(0.05)
    sys.exit(f"timed out waiting for {what}")


def api(port, method, path, body=None):
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    req = urllib.request.Request(f"https://127.0.0.1:{port}{path}", method=method,
                                 data=None if body is None else json.dumps(body).encode(),
                                 headers={"Authorization": "Bearer t0k", "Content-Type": "application/json"})
    with urllib.request.urlopen(req, context=ctx, timeout=10) as r:
        return json.loads(r.read())


def node(name, gpus):
    report = {"observedAt": "2026-12-01T00:00:00.000000Z",
              "gpus": [{"index": i, "uuid": f"GPU-{name}-{i}", "model": "NVIDIA H100 80GB HBM3",
                        "memoryMiB": 81559, "healthy": True, "resource": "nvidia.com/gpu", "replicas": 1,
                        "nvlinkPeers": [i ^ 1], "used": []} for i in range(gpus)]}
    alloc = {"cpu": "64", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": str(gpus)}
    return {"metadata": {"name": name, "labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
                         "annotations": {"kgpu.io/gpus": json.dumps(report)}},
            "status": {"allocatable": alloc, "capacity": alloc}}


def http(port, method, path, body=b""):
    """One request on a new connection; (status, milliseconds)."""
    t0 = time.perf_counter()
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    s.sendall(f"{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\n"
              f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
    data = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    s.close()
    status = int(data[9:12]) if data.startswith(b"HTTP/1.") else -1
    return status, (time.perf_counter() - t0) * 1000


def measure(port, body, calls):
    f = [http(port, "POST", "/filter", body) for _ in range(calls)]
    r = [http(port, "GET", "/readyz") for _ in range(calls)]
    errors = sum(1 for st, _ in f + r if st != 200)
    fl = [ms for _, ms in f]
    rl = [ms for _, ms in r]
    return (f"filter p50 {statistics.median(fl):.2f} ms, p99 {pct(fl, 0.99):.2f} ms; "
            f"readyz p99 {pct(rl, 0.99):.2f} ms" + (f"; {errors} errors" if errors else ""))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--calls", type=int, default=500)
    ap.add_argument("--idle", type=int, default=1000)
    ap.add_argument("--slow", type=int, default=100)
    a = ap.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    tmp = tempfile.mkdtemp(prefix="kgpu-extender-")
    kubeconfig = os.path.join(tmp, "kubeconfig")
    port_file = os.path.join(tmp, "port")
    apiserver, _ = start([os.path.join(a.build, "tools/apiserver/kgpu-apiserver"), "--tls", "--cert-dir",
                          os.path.join(tmp, "certs"), "--token", "t0k", "--kubeconfig", kubeconfig,
                          "--port-file", port_file], os.path.join(tmp, "apiserver.log"))
    sched = None
    try:
        api_port = int(wait_for(lambda: os.path.exists(port_file) and open(port_file).read().strip(), "the stand-in"))
        api(api_port, "POST", "/api/v1/nodes", node("n1", 8))
        pod = api(api_port, "POST", "/api/v1/namespaces/default/pods", {
            "metadata": {"name": "p", "namespace": "default"},
            "spec": {"containers": [{"name": "main", "image": "i:1",
                                     "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}})
        pod.pop("apiVersion", None)
        pod.pop("kind", None)
        body = json.dumps({"Pod": pod, "NodeNames": ["n1"]}).encode()
        log_path = os.path.join(tmp, "scheduler.log")
        sched, log = start([os.path.join(a.build, "kgpu"), "scheduler", "--kubeconfig", kubeconfig,
                            "--address", "127.0.0.1:0", "--leader-elect=false"], log_path)
        port = int(wait_for(lambda: (m := re.search(r"listening on [^:\s]+:(\d+)", open(log_path).read())) and m.group(1),
                            "the scheduler"))
        wait_for(lambda: http(port, "GET", "/readyz")[0] == 200, "readiness")
        rows = [("nothing else connected", measure(port, body, a.calls))]

        idle = [socket.create_connection(("127.0.0.1", port)) for _ in range(a.idle)]
        time.sleep(0.5)
        rows.append((f"{a.idle} idle connections open", measure(port, body, a.calls)))
        for s in idle:
            s.close()

        stop = threading.Event()
        slow = []
        for _ in range(a.slow):
            s = socket.create_connection(("127.0.0.1", port))
            s.send(b"POST /filter HTTP/1.1\r\nHost: x\r\nX-a: ")
            slow.append(s)

        def trickle():
            while not stop.wait(1):
                for s in slow:
                    try:
                        s.send(b"a")
                    except OSError:
                        pass

        t = threading.Thread(target=trickle)
        t.start()
        time.sleep(0.5)
        rows.append((f"{a.slow} slow-loris connections (a byte a second)", measure(port, body, a.calls)))
        stop.set()
        t.join()
        for s in slow:
            s.close()

        rest = rss_kib(sched.pid)
        big = json.dumps({"Pod": pod, "NodeNames": ["n1"], "Padding": "x" * (50 << 20)}).encode()
        statuses = [http(port, "POST", "/filter", big)[0] for _ in range(3)]
        right_after = rss_kib(sched.pid)
        time.sleep(2)
        later = rss_kib(sched.pid)
        rows.append(("RSS at rest / after three 50 MB bodies / 2 s later",
                     f"{rest / 1024:.1f} / {right_after / 1024:.1f} / {later / 1024:.1f} MiB (answered {statuses})"))
        print("| condition | result |\n|---|---|")
        for k, v in rows:
            print(f"| {k} | {v} |")
    finally:
        if sched:
            sched.terminate()
            sched.wait(10)
        apiserver.terminate()
        apiserver.wait(10)


if __name__ == "__main__":
    main()
