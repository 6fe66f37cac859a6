#!/usr/bin/env python3
"""End to end on a real control plane (test/kube/cluster.py): kgpu's Helm chart installed by
`helm install` (kube-apiserver's validation and RBAC), real `kgpu agent` processes on kwok GPU
nodes (fake NVML) reporting kgpu.io/gpus with the chart's agent ServiceAccount, `kgpu scheduler`
with the chart's scheduler ServiceAccount, and the real kube-scheduler on the shipped
deploy/scheduler/main-scheduler-extender.yaml calling it for a Deployment and a Job of GPU pods.
Then `kgpu top`, `allocations` and `doctor` against the same server, the Events `kubectl
describe` shows, and `helm uninstall`.

Admission: kwok nodes have no kubelet, so no device manager calls the agent's Allocate; kwok's
Stages mark bound pods Running (and Job pods Succeeded). The scheduler therefore runs with
--serialize-admission=false (nothing on the node could confuse two equal pods).

Usage: e2e_device_plugin_test.py BUILD_DIR
"""
import json
import os
import subprocess
import sys
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cluster import SOURCE, Cluster, shipped_scheduler_config  # noqa: E402
from kgpu_procs import (agent_port, eventually, kgpu, rbac_refusals, run_main, start_agent,  # noqa: E402
                        start_prometheus, start_scheduler)

build = os.path.abspath(sys.argv[1])
HELM = os.path.join(SOURCE, ".tools/kube/helm")
NODES = ["gpu-a", "gpu-b", "gpu-c"]
NS = "team-a"


def pods(c, selector):
    return c.get(f"/api/v1/namespaces/{NS}/pods?labelSelector={selector}")["items"]


def body(check):
    with Cluster() as c:
        helm = lambda *a: subprocess.run([HELM, *a, f"--kubeconfig={c.kubeconfig}"], capture_output=True, text=True,
                                         timeout=180)
        # --- the chart, validated and authorized by kube-apiserver ---------------------------------
        r = helm("install", "kgpu", os.path.join(SOURCE, "deploy/helm/kgpu"), "--namespace", "kgpu-system",
                 "--create-namespace", "--set", "scheduler.enabled=true", "--set", "scheduler.mode=extender",
                 "--set", "scheduler.replicas=1")
        check(r.returncode == 0, "helm install: kube-apiserver accepts every object of the chart", r.stderr)
        roles = {n: c.get(f"/apis/rbac.authorization.k8s.io/v1/clusterroles/{n}")
                 for n in ("kgpu-agent", "kgpu-scheduler")}
        check(all(roles.values()), "the agent's and the scheduler's ClusterRoles are served")

        for n in NODES:
            c.add_fake_node(n, labels={"nvidia.com/gpu.present": "true"}, capacity={"nvidia.com/gpu": "8"})
        c.wait_for(lambda: all(c.node_ready(n) for n in NODES), 90, "kwok to make the nodes Ready and untainted")
        check(True, "three kwok GPU nodes Ready, the not-ready taint removed by the controller-manager")

        # --- the agents, with exactly the chart's agent RBAC ---------------------------------------
        agent_kc = c.service_account_kubeconfig("kgpu-system", "kgpu-agent")
        for n in NODES:
            start_agent(c, build, n, agent_kc)

        def reports():
            out = {}
            for n in NODES:
                a = c.get(f"/api/v1/nodes/{n}")["metadata"].get("annotations", {}).get("kgpu.io/gpus")
                if not a:
                    return None
                out[n] = json.loads(a)
            return out
        rep = c.wait_for(reports, 60, "every agent's kgpu.io/gpus report")
        uuids = {n: {g["uuid"] for g in r["gpus"]} for n, r in rep.items()}
        check(all(len(u) == 8 for u in uuids.values()), "each agent reports its node's 8 GPUs under the agent's RBAC",
              {n: len(u) for n, u in uuids.items()})

        # --- kgpu scheduler (chart RBAC) and the real kube-scheduler calling it ---------------------
        sched_kc = c.service_account_kubeconfig("kgpu-system", "kgpu-scheduler")
        url = start_scheduler(c, build, sched_kc, ["--leader-elect=false", "--serialize-admission=false"])
        c.start_scheduler(shipped_scheduler_config("main-scheduler-extender.yaml"), url)
        check(True, "kube-scheduler runs deploy/scheduler/main-scheduler-extender.yaml with kgpu as its extender")

        c.create("/api/v1/namespaces", {"metadata": {"name": NS}})
        c.wait_for(lambda: c.get(f"/api/v1/namespaces/{NS}/serviceaccounts")["items"], 30, "the default ServiceAccount")
        container = lambda g: {"name": "cuda", "image": "nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04",
                               "resources": {"limits": {"nvidia.com/gpu": str(g)}}}
        c.create(f"/apis/apps/v1/namespaces/{NS}/deployments", {
            "metadata": {"name": "infer"},
            "spec": {"replicas": 5, "selector": {"matchLabels": {"app": "infer"}},
                     "template": {"metadata": {"labels": {"app": "infer"}},
                                  "spec": {"containers": [container(2)]}}}})
        c.create(f"/apis/batch/v1/namespaces/{NS}/jobs", {
            "metadata": {"name": "train"},
            "spec": {"parallelism": 4, "completions": 4, "backoffLimit": 0,
                     "template": {"metadata": {"labels": {"app": "train"}},
                                  "spec": {"restartPolicy": "Never", "containers": [container(1)]}}}})

        def running_infer():
            ps = pods(c, "app=infer")
            return ps if len(ps) == 5 and all(p["status"].get("phase") == "Running" for p in ps) else None
        placed = c.wait_for(running_infer, 90, "the Deployment's 5 pods bound and Running")
        job = c.wait_for(lambda: (lambda j: j if j.get("status", {}).get("succeeded") == 4 else None)(
            c.get(f"/apis/batch/v1/namespaces/{NS}/jobs/train")), 90, "the Job's 4 completions")
        check(job["status"]["succeeded"] == 4, "the Job completes: 4 GPU pods placed, run and Succeeded")

        held = {}  # node -> uuids held by the Deployment's pods
        ok_assign = True
        detail = []
        for p in placed + pods(c, "app=train"):
            a = p["metadata"].get("annotations", {})
            node = p["spec"].get("nodeName")
            assign = a.get("kgpu.io/gpu-assignment", "")
            got = [u for part in assign.split(";") if part for u in part.split(":", 1)[1].split(",")]
            want = 2 if p["metadata"]["labels"]["app"] == "infer" else 1
            if a.get("kgpu.io/gpu-resource") != "nvidia.com/gpu" or len(got) != want or not set(got) <= uuids.get(node, set()):
                ok_assign = False
                detail.append((p["metadata"]["name"], node, a))
            if p["metadata"]["labels"]["app"] == "infer":
                for u in got:
                    if u in held.setdefault(node, set()):
                        ok_assign = False
                        detail.append(("twice", node, u))
                    held[node].add(u)
        check(ok_assign, "every binding carries its GPU assignment: the node's own GPUs, the requested count, none twice",
              detail)
        # kgpu's filter answers one node, so every placement above is kgpu's; no node over capacity.
        per_node = {}
        for p in placed + pods(c, "app=train"):
            want = 2 if p["metadata"]["labels"]["app"] == "infer" else 1
            per_node[p["spec"]["nodeName"]] = per_node.get(p["spec"]["nodeName"], 0) + want
        check(sum(per_node.values()) == 14 and max(per_node.values()) <= 8, "14 GPUs placed, no node over its 8",
              per_node)

        # --- Events as kubectl describe shows them ------------------------------------------------
        name = placed[0]["metadata"]["name"]

        def described():
            out = c.kubectl("describe", "pod", "-n", NS, name).stdout
            return out if "GPUsAssigned" in out else None
        out = eventually(described, 30)
        check(out is not None and "kgpu assigned nvidia.com/gpu GPU(s)" in out,
              "kubectl describe pod shows kgpu's GPUsAssigned event", out)

        # --- the live commands against the same server ---------------------------------------------
        rc, out, err = kgpu(build, "allocations", "-o", "json", kubeconfig=c.kubeconfig)
        check(rc == 0, "kgpu allocations runs against kube-apiserver", err)
        if rc == 0:
            data = json.loads(out)
            text = json.dumps(data)
            check('"nvidia.com/gpu"' in text and all(n in text for n in NODES), "kgpu allocations lists the kwok GPU nodes",
                  out[:2000])
        # No agent pod serves these nodes (the agents are processes here, not the DaemonSet's pods),
        # so top has no utilization to read (it says so per node and exits 1); the allocation columns
        # come from the API: the Deployment's 10 GPUs (the Job's finished pods hold none).
        rc, out, err = kgpu(build, "top", "nodes", "-o", "json", kubeconfig=c.kubeconfig)
        try:
            rows = {r["name"]: r for r in json.loads(out)}
        except ValueError:
            rows = {}
        requested = sum(res["requested"] for r in rows.values() for res in r["resources"] if res["name"] == "nvidia.com/gpu")
        check(sorted(rows) == NODES and requested == 10 and
              all(r["gpus"] == 8 and r["models"] == {"NVIDIA H100 80GB HBM3": 8} for r in rows.values()) and
              err.count("no kgpu agent pod on this node") == 3,
              "kgpu top nodes: the GPU nodes, their models from the agents' reports, 10 GPUs requested", out[:2000] + err)
        # Utilization through Debian's Prometheus scraping the three agents (the agent pods of a
        # real cluster; here processes, so no pod proxy): top's utilization columns, and report
        # over the same window.
        if os.path.exists("/usr/bin/prometheus"):
            prom = start_prometheus(c, [f"127.0.0.1:{agent_port(c, n)}" for n in NODES])

            def up():
                try:
                    with urllib.request.urlopen(prom + "/api/v1/query?query=sum(up)", timeout=5) as r:
                        res = json.load(r)["data"]["result"]
                    return res and float(res[0]["value"][1]) == 3
                except (OSError, ValueError, KeyError):
                    return False
            c.wait_for(up, 60, "Prometheus to scrape the three agents")
            rc, out, err = kgpu(build, "top", "nodes", "--prometheus", prom, "-o", "json", kubeconfig=c.kubeconfig)
            try:
                rows = {r["name"]: r for r in json.loads(out)}
            except ValueError:
                rows = {}
            check(rc == 0 and sorted(rows) == NODES and all(r["utilPercent"] is not None and r["powerW"] for r in rows.values()),
                  "kgpu top nodes --prometheus: every GPU node's utilization and power from the agents' series",
                  out[:1500] + err)
            rc, out, err = kgpu(build, "report", "--prometheus", prom, "--since", "10m", "--step", "15s", "-o", "json",
                                kubeconfig=c.kubeconfig)
            # Per-pod usage needs the kubelet's PodResources (which pod holds which GPU), which kwok
            # nodes lack: report says so for each pod, and counts the cluster from the API.
            try:
                rep_json = json.loads(out)
                frag = rep_json["fragmentation"]
            except (ValueError, KeyError):
                rep_json, frag = {}, {}
            check(rc == 0 and rep_json.get("gpuPods") == 5 and frag.get("gpus") == 24 and frag.get("nodes") == 3 and
                  frag.get("gpusAllocated") == 10.0 and
                  any("5 of 5 GPU pods have no utilization series" in w for w in rep_json.get("warnings", [])),
                  "kgpu report: the Deployment's 5 GPU pods and 10 of 24 GPUs from kube-apiserver, the window from "
                  "Prometheus", out[:2000] + err)

        # A pod no node can hold        # --- RBAC as kube-apiserver saw it: no request of kgpu's accounts was refused --------------
        rbac_refusals(check, c)

        # --- uninstall -----------------------------------------------------------------------------
        r = helm("uninstall", "kgpu", "--namespace", "kgpu-system", "--wait", "--timeout", "60s")
        check(r.returncode == 0, "helm uninstall", r.stderr)
        gone = eventually(lambda: c.request("GET", "/apis/rbac.authorization.k8s.io/v1/clusterroles?labelSelector="
                                            "app.kubernetes.io/instance=kgpu")["items"] == [], 30)
        check(gone, "helm uninstall removes the ClusterRoles")


run_main(body)
