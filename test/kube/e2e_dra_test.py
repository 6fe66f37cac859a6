#!/usr/bin/env python3
"""DRA end to end on a real control plane (test/kube/cluster.py): the chart with its DRA driver
(DeviceClasses and the slices' RBAC) through `helm install`; real `kgpu agent --gpu-api=dra`
processes on two kwok nodes publishing ResourceSlices that kube-apiserver validates; a pod with a
ResourceClaimTemplate whose claim kube-controller-manager creates, allocated
  (a) by kube-scheduler's own DRA allocator from kgpu's slices and DeviceClasses, and
  (b) by `kgpu scheduler` as the extender of a `kgpu-scheduler` profile whose DynamicResources
      plugin is off (docs/scheduler.md "DRA claims"),
each then prepared by the node's agent for the kubelet peer (kubelet-dra-peer, the kubelet's
registration and NodePrepareResources on the wire), giving CDI device IDs of the allocated device.

Usage: e2e_dra_test.py BUILD_DIR
"""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cluster import SOURCE, Cluster, kgpu_allocator_config, shipped_scheduler_config  # noqa: E402
from kgpu_procs import allocated_claim, dra_peer, eventually, kgpu, rbac_refusals, run_main, start_agent, start_scheduler  # noqa: E402

build = os.path.abspath(sys.argv[1])
HELM = os.path.join(SOURCE, ".tools/kube/helm")
NODES = ["dra-a", "dra-b"]
NS = "team-dra"
DRIVER = "gpu.nvidia.com"
RES = "/apis/resource.k8s.io/v1"


def peer(*args):
    return dra_peer(build, *args)


def body(check):
    with Cluster() as c:
        r = subprocess.run([HELM, "install", "kgpu", os.path.join(SOURCE, "deploy/helm/kgpu"), "--namespace",
                            "kgpu-system", "--create-namespace", "--set", "draDriver.enabled=true", "--set",
                            "scheduler.enabled=true", "--set", "scheduler.mode=extender", "--set", "scheduler.replicas=1",
                            f"--kubeconfig={c.kubeconfig}"], capture_output=True, text=True, timeout=180)
        check(r.returncode == 0, "helm install with draDriver: kube-apiserver accepts the DeviceClasses and DRA RBAC", r.stderr)
        classes = sorted(d["metadata"]["name"] for d in c.get(f"{RES}/deviceclasses")["items"])
        check(classes == ["gpu.nvidia.com", "mig.nvidia.com"], "the chart's DeviceClasses are served", classes)

        for n in NODES:
            c.add_fake_node(n, labels={"nvidia.com/gpu.present": "true", "kgpu.io/gpu-api": "dra"})
        c.wait_for(lambda: all(c.node_ready(n) for n in NODES), 90, "the kwok nodes Ready")

        agent_kc = c.service_account_kubeconfig("kgpu-system", "kgpu-agent")
        regs = {}
        for n in NODES:
            reg = c.path(f"agent-{n}", "plugins_registry")
            regs[n] = os.path.join(reg, f"{DRIVER}-reg.sock")
            start_agent(c, build, n, agent_kc, extra=["--gpu-api=dra", "--device-plugin=false",
                                                      f"--dra-driver-name={DRIVER}", f"--dra-registry-dir={reg}",
                                                      f"--dra-plugins-dir={c.path(f'agent-{n}', 'plugins')}"])

        # The agent publishes once the kubelet has registered its driver, as on a real node.
        endpoints = {}
        for n in NODES:
            c.wait_for(lambda: os.path.exists(regs[n]), 30, f"{n}'s registration socket")
            rc, info = peer("register", regs[n])
            check(rc == 0 and "v1.DRAPlugin" in " ".join(info["versions"]), f"the kubelet peer registers {n}'s driver", info)
            endpoints[n] = info["endpoint"] if rc == 0 else ""

        def devices(node):
            return [d["name"] for s in c.get(f"{RES}/resourceslices")["items"]
                    if s["spec"].get("nodeName") == node for d in s["spec"].get("devices", [])]
        # GPUs 0-6 whole and GPU 7's four MIG devices (examples/nodes/dgx-h100.yaml).
        published = c.wait_for(lambda: (lambda d: d if all(len(v) == 11 for v in d.values()) else None)(
            {n: devices(n) for n in NODES}), 60, "each agent's ResourceSlices")
        check(True, "kube-apiserver accepts every agent's ResourceSlices (11 devices per node), written under the chart's RBAC")


        c.create("/api/v1/namespaces", {"metadata": {"name": NS}})
        c.wait_for(lambda: c.get(f"/api/v1/namespaces/{NS}/serviceaccounts")["items"], 30, "the default ServiceAccount")
        c.create(f"{RES}/namespaces/{NS}/resourceclaimtemplates", {
            "metadata": {"name": "single-gpu"},
            "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                "deviceClassName": "gpu.nvidia.com",
                "selectors": [{"cel": {"expression":
                                       f'device.capacity["{DRIVER}"].memory.compareTo(quantity("40Gi")) >= 0'}}]}}]}}}})

        def dra_pod(name, scheduler=None):
            spec = {"containers": [{"name": "cuda", "image": "nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04",
                                    "resources": {"claims": [{"name": "gpu"}]}}],
                    "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "single-gpu"}]}
            if scheduler:
                spec["schedulerName"] = scheduler
            c.create(f"/api/v1/namespaces/{NS}/pods", {"metadata": {"name": name}, "spec": spec})

        def placed(pod):
            claim = allocated_claim(c, NS, pod)
            return (c.get(f"/api/v1/namespaces/{NS}/pods/{pod}"), claim) if claim else None

        def prepared(label, pod, claim):
            node = pod["spec"]["nodeName"]
            results = claim["status"]["allocation"]["devices"]["results"]
            check(len(results) == 1 and results[0]["driver"] == DRIVER and results[0]["pool"] == node and
                  results[0]["device"] in published[node] and
                  any(r.get("name") == pod["metadata"]["name"] for r in claim["status"].get("reservedFor", [])),
                  f"{label}: one of the node's published GPUs, the claim reserved for the pod", claim["status"])
            rc, out = peer("prepare", endpoints[node], "v1", NS, claim["metadata"]["uid"], claim["metadata"]["name"])
            check(rc == 0 and not out["error"] and out["devices"] and out["devices"][0]["device"] == results[0]["device"]
                  and out["devices"][0]["cdi"], f"{label}: the node's agent prepares the allocated device with CDI IDs", out)

        # (a) kube-scheduler's own DRA allocator, kgpu's extender beside it for nvidia.com/gpu pods.
        sched_kc = c.service_account_kubeconfig("kgpu-system", "kgpu-scheduler")
        url = start_scheduler(c, build, sched_kc, ["--leader-elect=false", "--serialize-admission=false"])
        c.start_scheduler(shipped_scheduler_config("main-scheduler-extender.yaml"), url)
        dra_pod("by-kube-scheduler")
        got = c.wait_for(lambda: placed("by-kube-scheduler"), 90,
                         "kube-controller-manager's claim and kube-scheduler's allocation")
        check(True, "kube-controller-manager creates the claim from the template; kube-scheduler allocates it from kgpu's slices")
        prepared("kube-scheduler's allocation", *got)

        # (b) kgpu's allocator: the kgpu-scheduler profile (deploy/scheduler/second-scheduler.yaml)
        # sends every pod to kgpu and leaves DynamicResources off.
        c.procs.pop("kube-scheduler").stop()
        c.start_scheduler(kgpu_allocator_config(), url)
        dra_pod("by-kgpu", scheduler="kgpu-scheduler")
        got = c.wait_for(lambda: placed("by-kgpu"), 90, "kgpu scheduler's allocation and bind")
        prepared("kgpu's allocation", *got)
        if got:
            ev = c.get(f"/apis/events.k8s.io/v1/namespaces/{NS}/events")["items"]
            check(any(e.get("reason") == "ResourceClaimsAllocated" and e["regarding"]["name"] == "by-kgpu" for e in ev),
                  "kgpu's ResourceClaimsAllocated event on the pod", [e.get("reason") for e in ev])
            first = placed("by-kube-scheduler")
            if first and first[0]["spec"]["nodeName"] == got[0]["spec"]["nodeName"]:
                a = first[1]["status"]["allocation"]["devices"]["results"][0]["device"]
                b = got[1]["status"]["allocation"]["devices"]["results"][0]["device"]
                check(a != b, "kgpu never allocates a device kube-scheduler already allocated", (a, b))

        rc, out, err = kgpu(build, "allocations", "-o", "json", kubeconfig=c.kubeconfig)
        check(rc == 0 and DRIVER in out, "kgpu allocations counts the DRA devices on the real server", err or out[:2000])
        rbac_refusals(check, c)


run_main(body)
