#!/usr/bin/env python3
"""The openb cluster through the real kube-scheduler (test/kube/cluster.py), with and without
kgpu's extender.

The 1,213 GPU nodes of the openb trace become kwok nodes (kwok keeps them Ready and marks bound
pods Running), the first N pods of the default trace (file order, CPU-only pods included) are
created as fast as four API connections allow, and kube-scheduler v1.36 places them:
  a) kube-scheduler alone, NodeResourcesFit with MostAllocated on the GPU resource (the guide's
     bin-packing profile);
  b) kube-scheduler with deploy/scheduler/main-scheduler-extender.yaml, `kgpu scheduler`
     (FGDPack) as its extender.

Resource model (the same as bench/sched_live_replay.cc): every GPU is advertised as
nvidia.com/gpu.shared with 1000 replicas; a pod asks gpu_milli replicas (a share) or
1000 x num_gpu (whole GPUs), its CPU and memory, and its GPU models as required node affinity on
nvidia.com/gpu.product. Each node carries the kgpu.io/gpus report its agent would write.

Admission: kwok nodes have no kubelet device manager, so nothing checks a binding against real
GPUs. kube-scheduler alone counts replicas per node, not per GPU: it can bind a pod asking a whole
GPU (1000) to a node whose free replicas are spread over several GPUs, which a device plugin could
not honour. The benchmark therefore replays every node's bindings in bind order onto its GPUs
(a share on one GPU, whole GPUs free) and reports the pods no GPU could hold as "not placeable";
GPU allocation counts only placeable pods. kgpu's bindings name their GPUs and are checked the
same way. kgpu scheduler runs with --serialize-admission=false (no kubelet admits anything).

By default every pod is created (pending) before kube-scheduler starts, so pods/s is scheduling
alone: bindings per second from the first to the last (with kgpu: filter, prioritize and kgpu's
bind of each pod, all through the API server); --concurrent creates them while it runs (then
pods/s is from the first create to the last binding, bounded by how fast pods arrive).
Reported per run: pods/s, kube-scheduler's own
scheduler_scheduling_attempt_duration_seconds p50/p99 (result="scheduled"), the GPU allocation
ratio when the first GPU pod was found unschedulable, and at the end.

Usage: bench/kube_sched_bench.py BUILD_DIR [--pods 5000] [--nodes N] [--runs a,b] [--concurrent] [--json OUT]
"""
import argparse
import csv
import http.client
import json
import os
import re
import ssl
import sys
import threading
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(SOURCE, "test/kube"))
from cluster import ADMIN_TOKEN, Cluster, shipped_scheduler_config  # noqa: E402
from kgpu_procs import parallel, start_scheduler  # noqa: E402

DATA = os.path.join(os.path.dirname(SOURCE), "shared/data/openb")
SHARED = "nvidia.com/gpu.shared"
REPLICAS = 1000
KGPU_EXTRA = [a for a in os.environ.get("KGPU_SCHEDULER_ARGS", "").split() if a]


def read_csv(name):
    path = os.path.join(DATA, name)
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        raise SystemExit(f"{path}: no rows")
    return rows


def node_object(row):
    gpus = int(row["gpu"])
    name = row["sn"]
    res = {"cpu": f"{row['cpu_milli']}m", "memory": f"{row['memory_mib']}Mi", "pods": "110",
           SHARED: str(gpus * REPLICAS)}
    report = {"observedAt": "2026-12-01T00:00:00.000000Z", "gpus": [
        {"index": g, "uuid": f"GPU-{name}-{g}", "model": row["model"], "memoryMiB": 0, "healthy": True,
         "resource": SHARED, "replicas": REPLICAS, "nvlinkPeers": [], "used": []} for g in range(gpus)]}
    return ({"apiVersion": "v1", "kind": "Node",
             "metadata": {"name": name, "labels": {"nvidia.com/gpu.product": row["model"], "type": "kwok"},
                          "annotations": {"kwok.x-k8s.io/node": "fake", "kgpu.io/gpus": json.dumps(report)}},
             "status": {"capacity": res, "allocatable": res}}, gpus)


def pod_units(row):
    n, milli = int(row["num_gpu"]), int(row["gpu_milli"] or 0)
    if n == 0:
        return 0
    return milli if n == 1 and milli < REPLICAS else n * REPLICAS


def pod_object(row):
    units = pod_units(row)
    req = {"cpu": f"{row['cpu_milli']}m", "memory": f"{row['memory_mib']}Mi"}
    lim = {}
    if units:
        req[SHARED] = lim[SHARED] = str(units)
    o = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": row["name"]},
         "spec": {"automountServiceAccountToken": False, "terminationGracePeriodSeconds": 0,
                  "containers": [{"name": "main", "image": "replay:1",
                                  "resources": {"requests": req, **({"limits": lim} if lim else {})}}]}}
    if row["gpu_spec"]:
        o["spec"]["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [
                {"key": "nvidia.com/gpu.product", "operator": "In", "values": row["gpu_spec"].split("|")}]}]}}}
    return o


class Api:
    """Keep-alive HTTPS connections, one per thread."""

    def __init__(self, cluster):
        self.port = cluster.port
        self.ctx = ssl.create_default_context(cafile=cluster.ca)
        self.local = threading.local()

    def call(self, method, path, body=None, ctype="application/json"):
        for attempt in range(3):
            conn = getattr(self.local, "conn", None)
            if conn is None:
                conn = self.local.conn = http.client.HTTPSConnection("127.0.0.1", self.port, context=self.ctx, timeout=60)
            try:
                conn.request(method, path, body=json.dumps(body) if body is not None else None,
                             headers={"Authorization": "Bearer " + ADMIN_TOKEN, "Content-Type": ctype,
                                      "Accept": "application/json"})
                r = conn.getresponse()
                data = r.read()
            except (http.client.HTTPException, OSError):
                conn.close()
                self.local.conn = None
                if attempt == 2:
                    raise
                continue
            if r.status == 429:  # API priority and fairness pushes back: wait as clients do
                time.sleep(float(r.getheader("Retry-After", "1")))
                continue
            if r.status >= 300:
                raise RuntimeError(f"{method} {path}: {r.status} {data[:300]!r}")
            return json.loads(data) if data else None
        raise RuntimeError(f"{method} {path}: throttled three times")


class Watcher(threading.Thread):
    """Watches the namespace's pods; records when each got a node or was found unschedulable."""

    def __init__(self, cluster, ns):
        super().__init__(daemon=True)
        self.cluster, self.ns = cluster, ns
        self.bound, self.unsched, self.assign, self.why = {}, {}, {}, {}
        self.order = []  # pod names in bind order
        self.stop = False
        self.ready = threading.Event()

    def run(self):
        ctx = ssl.create_default_context(cafile=self.cluster.ca)
        rv = self.cluster.get(f"/api/v1/namespaces/{self.ns}/pods?limit=1")["metadata"]["resourceVersion"]
        while not self.stop:
            conn = http.client.HTTPSConnection("127.0.0.1", self.cluster.port, context=ctx, timeout=30)
            conn.request("GET", f"/api/v1/namespaces/{self.ns}/pods?watch=1&allowWatchBookmarks=true&resourceVersion={rv}",
                         headers={"Authorization": "Bearer " + ADMIN_TOKEN})
            r = conn.getresponse()
            self.ready.set()
            try:
                for line in r:
                    ev = json.loads(line)
                    o = ev["object"]
                    rv = o["metadata"].get("resourceVersion", rv)
                    if ev["type"] not in ("ADDED", "MODIFIED"):
                        continue
                    name = o["metadata"]["name"]
                    now = time.monotonic()
                    if o["spec"].get("nodeName") and name not in self.bound:
                        self.bound[name] = (now, o["spec"]["nodeName"])
                        self.order.append(name)
                        self.assign[name] = o["metadata"].get("annotations", {}).get("kgpu.io/gpu-assignment", "")
                    for c in o.get("status", {}).get("conditions", []):
                        if c["type"] == "PodScheduled" and c["status"] == "False" and name not in self.unsched:
                            self.unsched[name] = now
                            self.why[name] = c.get("message", "")
                    if self.stop:
                        break
            except (OSError, http.client.HTTPException, ValueError):
                pass
            conn.close()


def quantiles(metrics, family, labels, qs):
    """histogram_quantile over one histogram's buckets (summed over series matching `labels`)."""
    buckets = {}
    for line in metrics.splitlines():
        if not line.startswith(family + "_bucket{") or not all(l in line for l in labels):
            continue
        le = re.search(r'[{,]le="([^"]+)"', line).group(1)
        key = float("inf") if le == "+Inf" else float(le)
        buckets[key] = buckets.get(key, 0) + float(line.rsplit(" ", 1)[1])
    if not buckets:
        return [None] * len(qs)
    les = sorted(buckets)
    total = buckets[les[-1]]
    out = []
    for q in qs:
        rank, prev_le, prev_c = q * total, 0.0, 0.0
        for le in les:
            c = buckets[le]
            if c >= rank:
                if le == float("inf"):
                    out.append(prev_le)
                else:
                    out.append(prev_le + (le - prev_le) * ((rank - prev_c) / (c - prev_c) if c > prev_c else 0))
                break
            prev_le, prev_c = le, c
    return out


def placeable(order, bound, pods_by_name, gpus_of, assignments):
    """Replays each node's bindings in bind order onto its GPUs; (placeable pod names, the rest).
    A pod with a kgpu assignment must fit the GPUs it names."""
    free = {}
    ok, bad = set(), set()
    for name in order:
        units = pod_units(pods_by_name[name])
        if units == 0:
            ok.add(name)
            continue
        node = bound[name][1]
        g = free.setdefault(node, [REPLICAS] * gpus_of[node])
        a = assignments.get(name, "")
        if a:
            uuids = [u for part in a.split(";") if part for u in part.split(":", 1)[1].split(",")]
            idx = [int(u.rsplit("-", 1)[1]) for u in uuids]
            each = units if units < REPLICAS else REPLICAS
            if all(g[i] >= each for i in idx) and len(idx) == max(1, units // REPLICAS):
                for i in idx:
                    g[i] -= each
                ok.add(name)
            else:
                bad.add(name)
            continue
        if units < REPLICAS:
            cand = [i for i in range(len(g)) if g[i] >= units]
            if cand:  # best fit, as a sharing-aware device plugin would
                i = min(cand, key=lambda i: g[i])
                g[i] -= units
                ok.add(name)
            else:
                bad.add(name)
        else:
            whole = [i for i in range(len(g)) if g[i] == REPLICAS]
            if len(whole) >= units // REPLICAS:
                for i in whole[:units // REPLICAS]:
                    g[i] = 0
                ok.add(name)
            else:
                bad.add(name)
    return ok, bad


def run(mode, build, nodes_rows, pod_rows, drain):
    t_start = time.monotonic()
    with Cluster(apiserver_args=["--max-requests-inflight=2000", "--max-mutating-requests-inflight=1000"]) as c:
        api = Api(c)
        gpus_of = {}
        node_objs = []
        for row in nodes_rows:
            o, g = node_object(row)
            node_objs.append(o)
            gpus_of[o["metadata"]["name"]] = g
        capacity = sum(gpus_of.values()) * REPLICAS

        def add_node(o):
            api.call("POST", "/api/v1/nodes", o)
            api.call("PATCH", f"/api/v1/nodes/{o['metadata']['name']}/status",
                     {"status": {"capacity": o["status"]["capacity"], "allocatable": o["status"]["allocatable"]}},
                     "application/merge-patch+json")
        parallel(node_objs, add_node)
        c.wait_for(lambda: sum(1 for n in c.get("/api/v1/nodes?fieldSelector=spec.unschedulable=false")["items"]
                               if not n["spec"].get("taints") and any(
                                   x["type"] == "Ready" and x["status"] == "True" for x in n["status"].get("conditions", [])))
                   == len(node_objs), 180, "every kwok node Ready and untainted", interval=1)
        t_nodes = time.monotonic()

        ns = "openb"
        c.create("/api/v1/namespaces", {"metadata": {"name": ns}})
        c.wait_for(lambda: c.get(f"/api/v1/namespaces/{ns}/serviceaccounts")["items"], 30, "the default ServiceAccount")
        w = Watcher(c, ns)
        w.start()
        w.ready.wait(10)
        pods_by_name = {r["name"]: r for r in pod_rows}

        def create_pods():
            parallel([pod_object(r) for r in pod_rows], lambda o: api.call("POST", f"/api/v1/namespaces/{ns}/pods", o))

        t_created = None
        if drain:  # every pod pending before the scheduler starts: scheduling alone is timed
            create_pods()
            t_created = time.monotonic()
        t0 = time.monotonic()  # drain: the scheduler's start (kgpu's too) is inside the timed span
        if mode == "a":
            cfg = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
                   "percentageOfNodesToScore": 100,
                   "profiles": [{"schedulerName": "default-scheduler", "pluginConfig": [{
                       "name": "NodeResourcesFit",
                       "args": {"scoringStrategy": {"type": "MostAllocated",
                                                    "resources": [{"name": SHARED, "weight": 1}]}}}]}]}
            c.start_scheduler(cfg)
        else:
            url = start_scheduler(c, build, c.kubeconfig, ["--leader-elect=false", "--serialize-admission=false",
                                                            "--kube-api-qps=1000", "--kube-api-burst=2000", *KGPU_EXTRA])
            cfg = shipped_scheduler_config("main-scheduler-extender.yaml")
            c.start_scheduler(cfg, url)
        if not drain:
            t0 = time.monotonic()
            create_pods()
            t_created = time.monotonic()

        # Done when every pod is bound or unschedulable and nothing changed for 5 s.
        last, quiet_since = -1, time.monotonic()
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            c.check()
            n = len(w.bound) + len([p for p in w.unsched if p not in w.bound])
            if n != last:
                last, quiet_since = n, time.monotonic()
            if n >= len(pod_rows) and time.monotonic() - quiet_since > 5:
                break
            time.sleep(0.2)
        w.stop = True
        metrics = c.scheduler_metrics()
        p50, p99 = quantiles(metrics, "scheduler_scheduling_attempt_duration_seconds", ['result="scheduled"'], [0.5, 0.99])
        algo = quantiles(metrics, "scheduler_scheduling_algorithm_duration_seconds", [], [0.5, 0.99])
        writes = {}
        for line in c.request_text("/metrics").splitlines():
            if not line.startswith("apiserver_request_total{"):
                continue
            lab = dict(re.findall(r'(\w+)="([^"]*)"', line))
            if lab.get("verb") in ("POST", "PUT", "PATCH", "DELETE") and lab.get("code", "").startswith("2"):
                k = lab.get("resource", "") + ("/" + lab["subresource"] if lab.get("subresource") else "") + " " + lab["verb"]
                writes[k] = writes.get(k, 0) + int(float(line.rsplit(" ", 1)[1]))
        kgpu_q = {}
        if mode == "b":
            with urllib.request.urlopen(url + "/metrics", timeout=10) as r:
                km = r.read().decode()
            for verb in ("filter", "bind"):
                kgpu_q[verb] = [round(v * 1000, 2) if v is not None else None for v in
                                quantiles(km, "kgpu_scheduler_attempt_duration_seconds", [f'verb="{verb}"'], [0.5, 0.99])]

        bound_times = sorted(t for t, _ in w.bound.values())
        ok, bad = placeable(w.order, w.bound, pods_by_name, gpus_of, w.assign)
        gpu_pods = [n for n in pods_by_name if pod_units(pods_by_name[n])]
        first_fail = min((t for n, t in w.unsched.items() if n in gpu_pods and n not in w.bound), default=None)

        def allocated(until):
            return sum(pod_units(pods_by_name[n]) for n in ok if w.bound[n][0] <= until)
        end = bound_times[-1] if bound_times else t0
        out = {
            "mode": mode, "pods": len(pod_rows), "gpu_pods": len(gpu_pods), "nodes": len(node_objs),
            "gpus": capacity // REPLICAS,
            "bound": len(w.bound), "unschedulable": len([p for p in w.unsched if p not in w.bound]),
            "not_placeable": len(bad),
            "drain": drain,
            "create_s": round(t_created - t0, 2) if not drain else None,
            "first_bind_s": round(bound_times[0] - t0, 2) if bound_times else None,
            "schedule_s": round(end - t0, 2),
            # drain: first to last binding (the scheduler's informers synced); else creation to last binding
            "pods_per_s": round(len(w.bound) / (end - (bound_times[0] if drain else t0)), 1) if bound_times and end > t0 else None,
            "attempt_p50_ms": round(p50 * 1000, 2) if p50 is not None else None,
            "attempt_p99_ms": round(p99 * 1000, 2) if p99 is not None else None,
            "algorithm_p50_p99_ms": [round(v * 1000, 2) if v is not None else None for v in algo],
            "kgpu_filter_p50_p99_ms": kgpu_q.get("filter"), "kgpu_bind_p50_p99_ms": kgpu_q.get("bind"),
            "unschedulable_pods": {n: w.why.get(n, "")[:300] for n in sorted(w.unsched) if n not in w.bound},
            "api_writes": dict(sorted(writes.items(), key=lambda kv: -kv[1])[:8]),
            "alloc_at_first_fail": round(allocated(first_fail) / capacity, 4) if first_fail else None,
            "alloc_final": round(allocated(float("inf")) / capacity, 4),
            "demand": round(sum(pod_units(pods_by_name[n]) for n in gpu_pods) / capacity, 4),
            "setup_s": round(t_nodes - t_start, 1),
        }
        return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("build")
    ap.add_argument("--pods", type=int, default=5000)
    ap.add_argument("--nodes", type=int, default=0, help="only the first N GPU nodes (0: all 1,213)")
    ap.add_argument("--runs", default="a,b")
    ap.add_argument("--concurrent", action="store_true",
                    help="create the pods while the scheduler runs (default: all pending first, then the scheduler)")
    ap.add_argument("--json")
    a = ap.parse_args()
    nodes = read_csv("openb_node_list_gpu_node.csv")
    if a.nodes:
        nodes = nodes[:a.nodes]
    pods = read_csv("openb_pod_list_default.csv")[:a.pods]
    results = []
    for mode in a.runs.split(","):
        r = run(mode, os.path.abspath(a.build), nodes, pods, not a.concurrent)
        print(json.dumps(r), flush=True)
        results.append(r)
    print()
    print("| run | pods/s | attempt p50 / p99 (ms) | bound | unschedulable | not placeable | GPU alloc at first failure | GPU alloc at end |")
    print("|---|---|---|---|---|---|---|---|")
    names = {"a": "kube-scheduler, MostAllocated", "b": "kube-scheduler + kgpu (FGDPack)"}
    for r in results:
        pct = lambda v: "-" if v is None else f"{100 * v:.1f} %"
        print(f"| {names[r['mode']]} | {r['pods_per_s']} | {r['attempt_p50_ms']} / {r['attempt_p99_ms']} | {r['bound']} | "
              f"{r['unschedulable']} | {r['not_placeable']} | {pct(r['alloc_at_first_fail'])} | {pct(r['alloc_final'])} |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
