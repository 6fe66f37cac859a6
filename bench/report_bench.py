#!/usr/bin/env python3
"""`kgpu report` over a 1,000-node GPU cluster: answer time and peak RSS.

Generates the cluster (1,000 nodes: 600 with 8x H100, 300 with 8x A100 80GB, 100 with 4x L4
time-sliced 4 ways) with about 75% of its GPUs held by Deployment, StatefulSet, Job and notebook
pods, and the agent's series for every GPU over 7 days at one sample per `--interval` (default
6 h), loads the series into Debian's prometheus with promtool and the objects into the API-server
stand-in, then runs `kgpu report --since 7d --step <interval>` a few times and prints wall time and
maximum RSS (GNU time) of each run.

Usage: bench/report_bench.py BUILD_DIR [--runs 3] [--interval 6h] [--nodes 1000]
"""
import argparse
import json
import os
import random
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def rfc3339(t):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def generate(nodes_n, interval, until, out_dir, rng):
    kinds = [("h100", "NVIDIA-H100-80GB-HBM3", "NVIDIA H100 80GB HBM3", 8, 1, 81559)] * 6 + \
            [("a100", "NVIDIA-A100-SXM4-80GB", "NVIDIA A100-SXM4-80GB", 8, 1, 81920)] * 3 + \
            [("l4", "NVIDIA-L4-SHARED", "NVIDIA L4", 4, 4, 23034)]
    samples = int(7 * 86400 // interval)
    t0 = until - (samples - 1) * interval
    items = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": f"team-{i}"}} for i in range(20)]
    series = []  # (labels, util list, fb_used, fb_free)
    pods = 0
    for n in range(nodes_n):
        key, product, model, gpus, replicas, mem = kinds[n % len(kinds)]
        name = f"gpu-{key}-{n:04d}"
        alloc = {"cpu": "128", "memory": "1024Gi", "pods": "110"}
        labels = {"nvidia.com/gpu.product": product, "nvidia.com/gpu.count": str(gpus),
                  "nvidia.com/gpu.memory": str(mem)}
        if replicas > 1:
            labels["nvidia.com/gpu.replicas"] = str(replicas)
            alloc["nvidia.com/gpu.shared"] = str(gpus * replicas)
        else:
            alloc["nvidia.com/gpu"] = str(gpus)
        items.append({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels},
                      "status": {"allocatable": alloc, "capacity": alloc}})
        gpu = 0
        while gpu < gpus:
            if rng.random() < 0.25:  # a free GPU
                series.append((name, gpu, model, None, None, [0] * samples, 0, mem))
                gpu += 1
                continue
            ns = f"team-{rng.randrange(20)}"
            pod = f"p{pods:05d}"
            pods += 1
            if replicas > 1:
                res, units, width = "nvidia.com/gpu.shared", 1, 1
            else:
                units = min(rng.choice([1, 1, 1, 2, 4, 8]), gpus - gpu)
                res, width = "nvidia.com/gpu", units
            kind = rng.choice(["busy", "busy", "idle", "notebook", "job"])
            owner = None
            if kind == "job":
                owner = [{"apiVersion": "batch/v1", "kind": "Job", "name": f"job-{pod}", "uid": f"u-{pod}",
                          "controller": True}]
            elif kind == "busy":
                owner = [{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": f"svc-{pods % 97}",
                          "uid": f"s-{pods % 97}", "controller": True}]
            name_prefix = "notebook-" if kind == "notebook" else ""
            meta = {"name": name_prefix + pod, "namespace": ns, "labels": {"owner": f"user{rng.randrange(50)}"}}
            if owner:
                meta["ownerReferences"] = owner
            items.append({"apiVersion": "v1", "kind": "Pod", "metadata": meta,
                          "spec": {"nodeName": name, "containers": [
                              {"name": "main", "image": "registry.example/app:1",
                               "resources": {"limits": {res: str(units)}}}]},
                          "status": {"phase": "Running", "startTime": rfc3339(t0 - 86400)}})
            for g in range(gpu, gpu + width):
                if kind == "busy":
                    util = [rng.randrange(40, 100) for _ in range(samples)]
                elif kind == "notebook":
                    cut = rng.randrange(samples)
                    util = [rng.randrange(10, 60) if i < cut else 0 for i in range(samples)]
                else:
                    util = [rng.randrange(0, 3) for _ in range(samples)]
                used = rng.randrange(1000, mem // (4 if replicas > 1 else 1))
                series.append((name, g, model, ns, meta["name"], util, used, None if replicas > 1 else mem - used))
            gpu += width
    with open(os.path.join(out_dir, "cluster.json"), "w") as f:
        json.dump({"apiVersion": "v1", "kind": "List", "items": items}, f)
    with open(os.path.join(out_dir, "history.om"), "w") as f:
        for metric in ("DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE"):
            f.write(f"# TYPE {metric} gauge\n")
            for node, g, model, ns, pod, util, used, free in series:
                if metric == "DCGM_FI_DEV_FB_FREE" and free is None:
                    continue
                lbl = (f'gpu="{g}",UUID="GPU-{node}-{g}",device="nvidia{g}",modelName="{model}",'
                       f'Hostname="{node}"')
                if pod:
                    lbl += f',container="main",namespace="{ns}",pod="{pod}"'
                for i in range(samples):
                    v = util[i] if metric == "DCGM_FI_DEV_GPU_UTIL" else (used if metric == "DCGM_FI_DEV_FB_USED" else free)
                    f.write(f"{metric}{{{lbl}}} {v} {t0 + i * interval}\n")
        f.write("# EOF\n")
    return pods, len(series), samples


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--interval", default="6h")
    ap.add_argument("--nodes", type=int, default=1000)
    a = ap.parse_args()
    unit = {"m": 60, "h": 3600}[a.interval[-1]]
    interval = int(a.interval[:-1]) * unit
    build = os.path.abspath(a.build)
    now = int(time.time())
    until = now - now % interval - interval
    work = tempfile.mkdtemp(prefix="kgpu-report-bench-")
    procs = []
    try:
        t = time.time()
        pods, nseries, samples = generate(a.nodes, interval, until, work, random.Random(7))
        print(f"generated {a.nodes} nodes, {pods} GPU pods, {nseries} device series x {samples} samples "
              f"in {time.time() - t:.1f} s", flush=True)
        t = time.time()
        subprocess.run(["promtool", "tsdb", "create-blocks-from", "openmetrics", "--max-block-duration=24h",
                        f"{work}/history.om",
                        f"{work}/data"], check=True, stdout=subprocess.DEVNULL)
        os.remove(f"{work}/history.om")
        print(f"promtool: {time.time() - t:.1f} s", flush=True)
        with open(f"{work}/prometheus.yml", "w") as f:
            f.write("global: {scrape_interval: 1m}\n")
        pport = free_port()
        procs.append(subprocess.Popen(["prometheus", f"--config.file={work}/prometheus.yml",
                                       f"--storage.tsdb.path={work}/data", "--storage.tsdb.retention.time=3650d",
                                       f"--web.listen-address=127.0.0.1:{pport}", "--log.level=warn"],
                                      stderr=open(f"{work}/prometheus.log", "w")))
        procs.append(subprocess.Popen([f"{build}/tools/apiserver/kgpu-apiserver", "--tls", "--cert-dir",
                                       f"{work}/certs", "--token", "t0k", "--kubeconfig", f"{work}/kubeconfig",
                                       "--port-file", f"{work}/port", "--load", f"{work}/cluster.json"],
                                      stderr=open(f"{work}/apiserver.log", "w")))
        deadline = time.time() + 300
        while time.time() < deadline:
            try:
                if urllib.request.urlopen(f"http://127.0.0.1:{pport}/-/ready", timeout=2).status == 200 and \
                        os.path.exists(f"{work}/port") and open(f"{work}/port").read().strip():
                    break
            except OSError:
                pass
            time.sleep(0.5)
        kgpu = shutil.which("kgpu", path=build) or f"{build}/kgpu"
        # Where the time goes: each of the report's PromQL queries alone, and one list of pods.
        step = a.interval
        u = "(DCGM_FI_DEV_GPU_UTIL or 100 * DCGM_FI_PROF_GR_ENGINE_ACTIVE)"
        sub = f"[604800s:{interval}s]"
        for q in (f"count_over_time({u}{sub})", f"count_over_time(({u} < 5){sub})", f"avg_over_time({u}{sub})",
                  f"max_over_time(timestamp({u} >= 5){sub})", f"min_over_time(timestamp({u}){sub})",
                  "max_over_time(DCGM_FI_DEV_FB_USED[604800s])",
                  f"max_over_time((DCGM_FI_DEV_FB_USED + DCGM_FI_DEV_FB_FREE){sub})"):
            t = time.time()
            body = urllib.parse.urlencode({"query": q, "time": str(until)}).encode()
            n = len(urllib.request.urlopen(f"http://127.0.0.1:{pport}/api/v1/query", data=body, timeout=600).read())
            print(f"  query {time.time() - t:6.2f} s, {n / 1e6:5.1f} MB: {q[:70]}", flush=True)
        for run in range(a.runs):
            out = subprocess.run(["/usr/bin/time", "-v", kgpu, "report", "--kubeconfig", f"{work}/kubeconfig",
                                  "--prometheus", f"http://127.0.0.1:{pport}", "--since", "7d", "--step", a.interval,
                                  "--until", str(until), "-o", "json"], capture_output=True, text=True)
            if out.returncode != 0:
                sys.exit("kgpu report failed:\n" + out.stderr[-3000:])
            wall = re.search(r"Elapsed \(wall clock\) time.*: (?:(\d+):)?(\d+):([\d.]+)", out.stderr)
            secs = (int(wall.group(1) or 0) * 3600 + int(wall.group(2)) * 60 + float(wall.group(3)))
            rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", out.stderr).group(1))
            cpu = float(re.search(r"User time \(seconds\): ([\d.]+)", out.stderr).group(1)) + \
                float(re.search(r"System time \(seconds\): ([\d.]+)", out.stderr).group(1))
            r = json.loads(out.stdout)
            print(f"run {run + 1}: {secs:.2f} s wall, {cpu:.2f} s CPU (kgpu), max RSS {rss / 1024:.0f} MiB; "
                  f"{r['gpuPods']} GPU pods, {r['podsWithMetrics']} with metrics, {len(r['idle'])} idle, "
                  f"{len(r['rightSize'])} right-size, {len(r['stale'])} stale, "
                  f"FGD frees {r['fragmentation']['freedGpus']} GPUs", flush=True)
    finally:
        for p in procs:
            p.terminate()
            p.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
