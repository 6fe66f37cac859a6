#!/usr/bin/env python3
"""kgpu's API client against the real kube-apiserver (test/kube/cluster.py), through `kgpu
scheduler`, its biggest user: two replicas under the chart's scheduler ServiceAccount elect a
leader with a coordination.k8s.io Lease and hand over when the leader stops; the survivor's
informers list 1,100 pending GPU pods in pages of 500 (limit/continue); kube-apiserver is restarted
under it (every watch breaks; resumed, or relisted after 410 Gone) and what changes afterwards
reaches it; `kgpu doctor --collect` pages through the same pods.

Usage: e2e_api_test.py BUILD_DIR
"""
import json
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cluster import SOURCE, Cluster, Process, http_ok, tail  # noqa: E402
from kgpu_procs import eventually, kgpu, metric, parallel, rbac_refusals, run_main, wait_listening  # noqa: E402

build = os.path.abspath(sys.argv[1])
HELM = os.path.join(SOURCE, ".tools/kube/helm")
NS = "many"
PODS = 1100


def node(name, gpus=8):
    report = {"observedAt": "2026-12-01T00:00:00.000000Z", "gpus": [
        {"index": g, "uuid": f"GPU-{name}-{g}", "model": "NVIDIA H100 80GB HBM3", "memoryMiB": 81559, "healthy": True,
         "resource": "nvidia.com/gpu", "replicas": 1, "nvlinkPeers": [], "used": []} for g in range(gpus)]}
    return {"kgpu.io/gpus": json.dumps(report)}


def body(check):
    with Cluster() as c:
        r = subprocess.run([HELM, "install", "kgpu", os.path.join(SOURCE, "deploy/helm/kgpu"), "--namespace",
                            "kgpu-system", "--create-namespace", "--set", "scheduler.enabled=true", "--set",
                            "scheduler.mode=extender", f"--kubeconfig={c.kubeconfig}"],
                           capture_output=True, text=True, timeout=180)
        check(r.returncode == 0, "helm install", r.stderr)
        for n in ("api-a", "api-b"):
            c.add_fake_node(n, capacity={"nvidia.com/gpu": "8"}, annotations=node(n))

        # --- two replicas, one leader -------------------------------------------------------------
        kc = c.service_account_kubeconfig("kgpu-system", "kgpu-scheduler")
        urls = {}
        for rep in ("r1", "r2"):
            name = f"kgpu-scheduler-{rep}"
            c.procs[name] = Process(name, [os.path.join(build, "kgpu"), "scheduler", f"--kubeconfig={kc}",
                                           "--address=127.0.0.1:0", "--leader-elect=true",
                                           "--leader-elect-resource-namespace=kgpu-system", f"--identity={rep}"],
                                    c.log(name))
            urls[rep] = f"http://127.0.0.1:{wait_listening(c, name)}"
        lease_path = "/apis/coordination.k8s.io/v1/namespaces/kgpu-system/leases"

        def holder():
            items = c.get(lease_path)["items"]
            return items[0]["spec"].get("holderIdentity") if len(items) == 1 else None
        leader = c.wait_for(lambda: holder() in ("r1", "r2") and holder(), 30, "a Lease held by one replica")
        other = "r2" if leader == "r1" else "r1"
        check(c.wait_for(lambda: metric(urls[leader], "kgpu_scheduler_leader") == 1 and
                         metric(urls[other], "kgpu_scheduler_leader") == 0, 30, "the leader metric"),
              f"one leader ({leader}) through a Lease the chart's RBAC allows; the other replica waits")

        c.procs.pop(f"kgpu-scheduler-{leader}").stop()
        got = eventually(lambda: holder() == other and metric(urls[other], "kgpu_scheduler_leader") == 1, 45)
        check(got, f"the leader stops: {other} takes the Lease over", c.get(lease_path)["items"])

        # --- paging: 1,100 pending GPU pods --------------------------------------------------------
        c.create("/api/v1/namespaces", {"metadata": {"name": NS}})
        c.wait_for(lambda: c.get(f"/api/v1/namespaces/{NS}/serviceaccounts")["items"], 30, "the default ServiceAccount")
        pod = lambda i: {"metadata": {"name": f"p-{i:04}"}, "spec": {"schedulerName": "nobody", "containers": [
            {"name": "c", "image": "img:1", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}
        try:
            parallel(range(PODS), lambda i: c.create(f"/api/v1/namespaces/{NS}/pods", pod(i)))
            created = ""
        except RuntimeError as e:
            created = str(e)
        check(not created, f"{PODS} pods created", created)

        # --- kube-apiserver restarts under the survivor -------------------------------------------
        url = urls[other]
        before = metric(url, "kgpu_scheduler_pending_gpu_pods")
        c.restart_apiserver()
        c.add_fake_node("api-c", capacity={"nvidia.com/gpu": "8"}, annotations=node("api-c"))
        pending = eventually(lambda: metric(url, "kgpu_scheduler_pending_gpu_pods") == PODS, 60)
        nodes = eventually(lambda: metric(url, "kgpu_scheduler_nodes", 'report="present"') == 3, 60)
        check(pending, f"the scheduler's informers hold all {PODS} pending pods (listed in pages of 500)",
              (before, metric(url, "kgpu_scheduler_pending_gpu_pods")))
        check(nodes, "after kube-apiserver restarts, a node created afterwards reaches the scheduler",
              metric(url, "kgpu_scheduler_nodes", 'report="present"'))
        # A replica that could not renew within its deadline (the server was away) steps down and
        # campaigns again, as client-go's elector does; the Lease is still its own.
        check(eventually(lambda: c.get(lease_path)["items"][0]["spec"].get("holderIdentity") == other and
                         metric(url, "kgpu_scheduler_leader") == 1, 45),
              "the survivor leads again after the restart", tail(c.log(f"kgpu-scheduler-{other}")))
        check(eventually(lambda: http_ok(url + "/readyz"), 30),
              "the survivor is ready again (its informers synced after the restart)")

        # How the pod informer came back, as kube-apiserver logged it: a watch resumed from its last
        # resourceVersion, or (410 Gone: older than the new server's cache) a relist in pages.
        paged = [ev["requestURI"] for ev in c.audit_events("kgpu-scheduler")
                 if ev.get("verb") == "list" and ev.get("objectRef", {}).get("resource") == "pods"
                 and "continue=" in ev.get("requestURI", "")]
        print(f"info: after the restart the pod informer {'relisted in pages' if paged else 'resumed its watch'}"
              f" ({len(paged)} continued pages)", flush=True)

        # --- the CLI pages through the same pods ---------------------------------------------------
        rbac_refusals(check, c, ("kgpu-scheduler",))

        snap = c.path("snapshot.json")
        rc, out, err = kgpu(build, "doctor", "--collect", "-o", snap, kubeconfig=c.kubeconfig, timeout=120)
        try:
            with open(snap) as f:
                text = f.read()
        except OSError:
            text = ""
        seen = set(re.findall(r'"name":\s*"(p-\d{4})"', text))
        check(rc == 0 and len(seen) == PODS, f"kgpu doctor --collect reads all {PODS} pods (listed in pages)",
              (rc, len(seen), out[:500], err[:500]))


run_main(body)
