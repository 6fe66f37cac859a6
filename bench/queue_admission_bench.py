#!/usr/bin/env python3
"""Queue admission throughput against the real control plane, in the shape of Kueue's own
scheduler performance test (test/performance/scheduler/configs/baseline in kubernetes-sigs/kueue:
5 cohorts x 6 ClusterQueues, nominalQuota 20 and borrowingLimit 100 each, reclaimWithinCohort Any;
per queue 350 small workloads (request 1, runtime 200 ms, priority 50, one every 100 ms), 100
medium (5, 500 ms, 100, every 500 ms) and 50 large (20, 1 s, 200, every 1.2 s): 15,000 workloads).
Kueue's check: the whole run within 425 s (its average 351 s), each queue class used >= 55 %.

Here each workload is one pod, created already gated (`kgpu.io/queue`) in its queue's namespace,
asking `example.com/unit` (the quota's resource) and naming a scheduler nobody runs, so kube-scheduler
plays no part: what is timed is kgpu's admission (`kgpu scheduler --queue-config`, rounds every
100 ms) and the API server. The runner mimics execution as Kueue's does: a pod whose gate is gone
runs for its runtime and is then deleted (finished). Reported: wall time from the first creation to
the last workload finished, time to admission per class (mean), and the queues' mean usage.

Not Kueue's: no preemption within a queue (Kueue's withinClusterQueue: LowerPriority). Priorities
come from three PriorityClasses (bench-small 50, bench-medium 100, bench-large 200).

Usage: queue_admission_bench.py BUILD_DIR [--scale F]   (F < 1 shrinks every count, for a quick run)
Writes bench/results/queue_admission.json.
"""
import heapq
import http.client
import json
import os
import ssl
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "test", "kube"))
from cluster import ADMIN_TOKEN, Cluster  # noqa: E402
from kgpu_procs import start_scheduler  # noqa: E402

build = os.path.abspath(sys.argv[1])
scale = float(sys.argv[sys.argv.index("--scale") + 1]) if "--scale" in sys.argv else 1.0
COHORTS, QUEUES = 5, 6
CLASSES = [  # name, count per queue, creation interval s, runtime s, priority, request
    ("small", 350, 0.1, 0.2, 50, 1),
    ("medium", 100, 0.5, 0.5, 100, 5),
    ("large", 50, 1.2, 1.0, 200, 20),
]
RESOURCE = "example.com/unit"


class Api:
    """One keep-alive HTTPS connection to kube-apiserver as the admin (one per thread)."""

    def __init__(self, c):
        ctx = ssl.create_default_context(cafile=c.ca)
        self.conn = http.client.HTTPSConnection("127.0.0.1", c.port, context=ctx, timeout=60)
        self.headers = {"Authorization": f"Bearer {ADMIN_TOKEN}", "Content-Type": "application/json"}

    def call(self, method, path, body=None):
        for attempt in range(3):
            try:
                self.conn.request(method, path, None if body is None else json.dumps(body), self.headers)
                r = self.conn.getresponse()
                data = r.read()
                return r.status, data
            except (http.client.HTTPException, OSError):
                self.conn.close()
                if attempt == 2:
                    raise
        return 0, b""


def main():
    with Cluster(kwok=False) as c:
        api = Api(c)
        queues = []
        lines = ["version: v1", "clusterQueues:"]
        for k in range(COHORTS):
            for q in range(QUEUES):
                name = f"cq-{k}-{q}"
                queues.append(name)
                lines += [f"  - name: {name}", f"    cohort: cohort-{k}", f"    namespaces: [{name}]",
                          "    reclaimWithinCohort: Any",
                          f"    quotas: [{{resource: {RESOURCE}, nominalQuota: 20, borrowingLimit: 100}}]"]
                api.call("POST", "/api/v1/namespaces", {"metadata": {"name": name}})
        api.call("POST", "/api/v1/namespaces", {"metadata": {"name": "kgpu-system"}})
        for name, _, _, _, priority, _ in CLASSES:
            api.call("POST", "/apis/scheduling.k8s.io/v1/priorityclasses",
                     {"metadata": {"name": f"bench-{name}"}, "value": priority})
        api.call("POST", "/api/v1/namespaces/kgpu-system/configmaps",
                 {"metadata": {"name": "queues"}, "data": {"queues.yaml": "\n".join(lines) + "\n"}})
        start_scheduler(c, build, c.kubeconfig, ["--leader-elect=false", "--queue-config=kgpu-system/queues",
                                                 "--gang-interval-ms=100", "--kube-api-qps=2000",
                                                 "--kube-api-burst=4000"])

        lock = threading.Lock()
        running = []  # heap of (end time, key)
        done = threading.Event()
        created, admitted, finished = {}, {}, {}  # pod -> time
        klass = {}
        usage_area = [0.0]
        expected = sum(int(n * scale) for _, n, *_ in CLASSES) * len(queues)
        t0 = time.monotonic()

        failed = []

        def creator(name, count, interval, runtime, priority, request):
            try:
                create(name, count, interval, runtime, priority, request)
            except Exception as e:  # noqa: BLE001 - the run stops and says why
                failed.append(str(e))
                done.set()

        def create(name, count, interval, runtime, priority, request):
            a = Api(c)
            count = int(count * scale)
            for i in range(count):
                due = t0 + i * interval
                delay = due - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
                for q in queues:
                    pod = f"{name}-{i}"
                    body = {"metadata": {"name": pod, "labels": {"bench": "queues"}},
                            "spec": {"schedulerName": "none", "priorityClassName": f"bench-{name}",
                                     "schedulingGates": [{"name": "kgpu.io/queue"}],
                                     "containers": [{"name": "c", "image": "x",
                                                     "resources": {"limits": {RESOURCE: str(request)}}}]}}
                    status, data = a.call("POST", f"/api/v1/namespaces/{q}/pods", body)
                    if status != 201:
                        raise RuntimeError(f"creating {q}/{pod}: {status} {data[:200]}")
                    with lock:
                        created[f"{q}/{pod}"] = time.monotonic()
                        klass[f"{q}/{pod}"] = (name, runtime, request)


        def watcher():
            """Records when each pod loses its gate (admitted) and queues its end."""
            ctx = ssl.create_default_context(cafile=c.ca)
            conn = http.client.HTTPSConnection("127.0.0.1", c.port, context=ctx, timeout=3600)
            conn.request("GET", "/api/v1/pods?watch=1&labelSelector=bench%3Dqueues&allowWatchBookmarks=false",
                         headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
            r = conn.getresponse()
            buf = b""
            while not done.is_set():
                try:
                    chunk = r.read1(65536)
                except (http.client.HTTPException, OSError):
                    break  # the server went away at the end of the run
                if not chunk:
                    break
                buf += chunk
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    if not line.strip():
                        continue
                    ev = json.loads(line)
                    o = ev["object"]
                    key = f"{o['metadata']['namespace']}/{o['metadata']['name']}"
                    if ev["type"] != "MODIFIED":
                        continue
                    gates = o["spec"].get("schedulingGates", [])
                    if any(g["name"] == "kgpu.io/queue" for g in gates):
                        continue
                    now = time.monotonic()
                    with lock:
                        if key in admitted or key not in klass:
                            continue
                        admitted[key] = now
                        heapq.heappush(running, (now + klass[key][1], key))

        def finisher():
            a = Api(c)
            while not done.is_set():
                with lock:
                    due = running[0] if running and running[0][0] <= time.monotonic() else None
                    if due:
                        heapq.heappop(running)
                if not due:
                    time.sleep(0.01)
                    continue
                ns, name = due[1].split("/")
                a.call("DELETE", f"/api/v1/namespaces/{ns}/pods/{name}?gracePeriodSeconds=0")
                with lock:
                    finished[due[1]] = time.monotonic()
                    if len(finished) == expected:
                        done.set()

        def sampler():
            """Quota in use (admitted, not finished), integrated over time."""
            last = time.monotonic()
            while not done.is_set():
                time.sleep(0.5)
                now = time.monotonic()
                with lock:
                    used = sum(klass[k][2] for k in admitted if k not in finished)
                usage_area[0] += used * (now - last)
                last = now

        threads = [threading.Thread(target=watcher, daemon=True), threading.Thread(target=sampler, daemon=True)]
        threads += [threading.Thread(target=finisher, daemon=True) for _ in range(4)]
        threads += [threading.Thread(target=creator, args=cls, daemon=True) for cls in CLASSES]
        for t in threads:
            t.start()
        limit = 1800
        while not done.wait(5) or failed:
            if failed:
                raise RuntimeError("; ".join(failed))
            with lock:
                print(f"{time.monotonic() - t0:6.0f} s: created {len(created)}, admitted {len(admitted)}, "
                      f"finished {len(finished)} of {expected}", flush=True)
            if time.monotonic() - t0 > limit:
                print("FAIL: not finished within the limit", flush=True)
                break
        wall = time.monotonic() - t0
        by_class = {}
        for key, t in admitted.items():
            by_class.setdefault(klass[key][0], []).append(t - created[key])
        capacity = 20 * len(queues)
        result = {
            "workloads": expected, "queues": len(queues), "scale": scale,
            "wallSeconds": round(wall, 1),
            "kueueMaxWallSeconds": 425, "kueueAverageWallSeconds": 351.1,
            "ratioToKueueAverage": round(351.1 / wall, 2) if scale == 1.0 else None,
            "meanTimeToAdmissionSeconds": {k: round(sum(v) / len(v), 2) for k, v in by_class.items()},
            "meanUsageOfNominal": round(usage_area[0] / wall / capacity, 3),
        }
        print(json.dumps(result, indent=2))
        out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "queue_admission.json")
        if scale == 1.0:
            with open(out, "w") as f:
                json.dump(result, f, indent=2)
        done.set()


main()
