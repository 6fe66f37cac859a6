#!/usr/bin/env python3
"""GPU remediation end to end on a real control plane (test/kube/cluster.py, with the
controller-manager's disruption controller, so PodDisruptionBudgets are kube-apiserver's to
enforce): the chart's RBAC, `kgpu agent` processes on kwok nodes with faults injected into the
fake NVML at run time (docs/remediation.md):

- reset-gpu (XID 48 on GPU 2, remediation on): the GPU is withheld at once, the node condition
  GpuResetRequired names the GPU and the XID, an eviction refused by a PodDisruptionBudget is
  tried again until the budget is removed, the GPU is reset through NVML (drain, remove,
  rediscover), validated and returned; the cluster budget ConfigMap holds a slot meanwhile;
- two GPUs at once (XID 62 and XID 46) with a cluster budget of one: one waits for the other;
- an agent killed while a GPU drains resumes from the node annotation (no second out-of-service
  Event) and finishes;
- a reset that fails (injected IN_USE) escalates once to reboot-node: the node is cordoned and
  drained, and a new boot ID returns the GPU and uncordons the node;
- dry-run on a second node (XID 79): the condition says what would be done, nothing is touched.
Measured: seconds from the XID to the GPU out of service, and from the fix (the budget removed) to
back in service, on a fake 8-GPU node.

Usage: e2e_remediation_test.py BUILD_DIR
"""
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cluster import CONTROLLERS, SOURCE, Cluster, Process  # noqa: E402
from kgpu_procs import agent_port, events, kgpu, pod_or_none, rbac_refusals, run_main, start_agent  # noqa: E402

build = os.path.abspath(sys.argv[1])
HELM = os.path.join(SOURCE, ".tools/kube/helm")
NS = "team"


def node_file(c, node):
    return c.path(f"agent-{node}", "node.yaml")


def edit_node(c, node, fn):
    """Rewrites the fake node description of `node` (the fake reloads it on change)."""
    path = node_file(c, node)
    with open(path) as f:
        desc = yaml.safe_load(f)
    fn(desc)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        yaml.safe_dump(desc, f)
    os.replace(tmp, path)


def inject_xid(c, node, gpu, xid):
    edit_node(c, node, lambda d: d.setdefault("faults", {}).setdefault("xids", []).append({"gpu": gpu, "xid": xid}))


def uuids(c, node):
    with open(node_file(c, node)) as f:
        return [g["uuid"] for g in yaml.safe_load(f)["gpus"]]


def record(c, node, uuid):
    a = c.get(f"/api/v1/nodes/{node}")["metadata"].get("annotations", {}).get("kgpu.io/remediation")
    return json.loads(a)["gpus"].get(uuid) if a else None


def phase(c, node, uuid):
    r = record(c, node, uuid)
    return r["phase"] if r else None


def condition(c, node, type_):
    for k in c.get(f"/api/v1/nodes/{node}")["status"].get("conditions", []):
        if k["type"] == type_:
            return k
    return None


def gpu_pod(c, name, node, uuid):
    c.create(f"/api/v1/namespaces/{NS}/pods", {
        "metadata": {"name": name, "labels": {"app": "train"},
                     "annotations": {"kgpu.io/gpu-resource": "nvidia.com/gpu", "kgpu.io/gpu-assignment": f"cuda:{uuid}"}},
        "spec": {"nodeName": node, "containers": [{
            "name": "cuda", "image": "nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04",
            "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}})


def agent_metrics(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        return r.read().decode()


def pod_exists(c, name):
    return pod_or_none(c, NS, name) is not None


def body(check):
    with Cluster(controllers=CONTROLLERS + ["disruption-controller"]) as c:
        r = subprocess.run([HELM, "install", "kgpu", os.path.join(SOURCE, "deploy/helm/kgpu"), "--namespace",
                            "kgpu-system", "--create-namespace", "--set", "remediation.mode=on",
                            f"--kubeconfig={c.kubeconfig}"], capture_output=True, text=True, timeout=180)
        check(r.returncode == 0, "helm install with remediation on: kube-apiserver accepts the chart's roles", r.stderr)
        for n in ("gpu-a", "gpu-b"):
            c.add_fake_node(n, labels={"nvidia.com/gpu.present": "true"}, capacity={"nvidia.com/gpu": "8"})
        c.wait_for(lambda: all(c.node_ready(n) for n in ("gpu-a", "gpu-b")), 90, "kwok nodes Ready")
        kc = c.service_account_kubeconfig("kgpu-system", "kgpu-agent")
        boot = c.path("boot_id")
        with open(boot, "w") as f:
            f.write("boot-1\n")
        common = ["--remediation-namespace=kgpu-system", "--remediation-interval=200", "--health-interval=500",
                  f"--boot-id-file={boot}"]
        name_a = start_agent(c, build, "gpu-a", kc, extra=["--remediation=on", *common])
        start_agent(c, build, "gpu-b", kc, extra=["--remediation=dry-run", *common])
        agent_port(c, "gpu-a")
        agent_port(c, "gpu-b")
        # No nvidia-persistenced (the reset needs it off, as NVML says); the simulated processes stay
        # on GPU 2 alone, as if its pod's process outlived the pod.
        def prepare(d):
            for g in d["gpus"]:
                g["persistenceMode"] = False
                if g.get("index") != 2:
                    g.pop("processes", None)
        edit_node(c, "gpu-a", prepare)
        ua, ub = uuids(c, "gpu-a"), uuids(c, "gpu-b")

        c.create("/api/v1/namespaces", {"metadata": {"name": NS}})
        c.wait_for(lambda: c.get(f"/api/v1/namespaces/{NS}/serviceaccounts")["items"], 30, "the default ServiceAccount")
        gpu_pod(c, "train-2", "gpu-a", ua[2])
        gpu_pod(c, "train-3", "gpu-a", ua[3])
        c.wait_for(lambda: all(c.get(f"/api/v1/namespaces/{NS}/pods/{p}")["status"].get("phase") == "Running"
                               for p in ("train-2", "train-3")), 60, "the GPU pods Running")
        c.create(f"/apis/policy/v1/namespaces/{NS}/poddisruptionbudgets", {
            "metadata": {"name": "train"}, "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "train"}}}})
        c.wait_for(lambda: c.get(f"/apis/policy/v1/namespaces/{NS}/poddisruptionbudgets/train").get("status", {})
                   .get("observedGeneration") == 1, 30, "the disruption controller to observe the budget")

        # --- reset-gpu: XID 48 on GPU 2 ---------------------------------------------------------
        t0 = time.monotonic()
        inject_xid(c, "gpu-a", 2, 48)
        c.wait_for(lambda: phase(c, "gpu-a", ua[2]) == "draining", 30, "GPU 2 draining")
        t_out = time.monotonic() - t0
        cond = c.wait_for(lambda: (lambda k: k if k and k["status"] == "True" else None)(
            condition(c, "gpu-a", "GpuResetRequired")), 30, "the GpuResetRequired condition")
        check(cond["reason"] == "Draining" and f"GPU 2 ({ua[2]})" in cond["message"] and "XID 48" in cond["message"],
              "GpuResetRequired names the GPU and the XID", cond)
        port = agent_port(c, "gpu-a")
        metrics = c.wait_for(lambda: (lambda t: t if 'phase="draining"' in t else None)(agent_metrics(port)), 10,
                             "the remediation metrics")
        check(f'kgpu_remediation_phase{{gpu="2",UUID="{ua[2]}",phase="draining"}} 1' in metrics and
              'kgpu_remediation_faults_total{action="reset-gpu"} 1' in metrics, "the agent's metrics show the phase")
        blocked = c.wait_for(lambda: events(c, "EvictionBlocked"), 30, "the EvictionBlocked Event")
        check("disruption budget" in blocked[0]["note"], "the refused eviction names the PodDisruptionBudget",
              blocked[0]["note"])
        check(pod_exists(c, "train-2"), "the budget keeps the pod: nothing deleted behind kube-apiserver's back")
        cm = c.get("/api/v1/namespaces/kgpu-system/configmaps/kgpu-remediation")["data"]
        check(f"gpu.gpu-a.{ua[2]}" in cm and cm.get("maxUnavailable") == "1", "GPU 2 holds the cluster budget's slot", cm)
        c.request("DELETE", f"/apis/policy/v1/namespaces/{NS}/poddisruptionbudgets/train")
        rec = c.wait_for(lambda: (lambda r: r if r and r["phase"] == "resetting" else None)(record(c, "gpu-a", ua[2])),
                         30, "GPU 2 evicted, waiting for its process")
        check("process(es) outside Kubernetes hold the GPU" in rec["message"],
              "a process still on the GPU holds the reset back", rec)
        t1 = time.monotonic()
        edit_node(c, "gpu-a", lambda d: [g.pop("processes", None) for g in d["gpus"]])
        c.wait_for(lambda: phase(c, "gpu-a", ua[2]) == "in-service", 60, "GPU 2 back in service")
        t_back = time.monotonic() - t1
        check(not pod_exists(c, "train-2") and pod_exists(c, "train-3"),
              "only the pod on the faulted GPU was evicted")
        check(condition(c, "gpu-a", "GpuResetRequired")["status"] == "False", "GpuResetRequired False again")
        check(events(c, "GpuReset") and events(c, "GpuReturnedToService"), "Events for the reset and the return")
        cm = c.get("/api/v1/namespaces/kgpu-system/configmaps/kgpu-remediation").get("data", {})
        check(not any(k.startswith("gpu.") for k in cm), "the budget slot is released", cm)
        print(f"measure: XID -> out of service {t_out:.2f} s; fix -> back in service {t_back:.2f} s", flush=True)

        # --- two GPUs at once, a budget of one -------------------------------------------------
        # A process on GPU 5 keeps its remediation (and its budget slot) going while GPU 6 faults.
        edit_node(c, "gpu-a", lambda d: d["gpus"][5].update({"processes": [{"pid": 4242, "usedMemoryMiB": 1024}]}))
        inject_xid(c, "gpu-a", 5, 62)
        c.wait_for(lambda: phase(c, "gpu-a", ua[5]) == "resetting", 30, "GPU 5 holding its slot")
        inject_xid(c, "gpu-a", 6, 46)
        rec6 = c.wait_for(lambda: (lambda r: r if r and "waiting for a slot" in r["message"] else None)(
            record(c, "gpu-a", ua[6])), 30, "GPU 6 waiting for the budget")
        check("held by 1 of 1" in rec6["message"] and ua[5] in rec6["message"],
              "GPU 6 waits for GPU 5's slot of a budget of one", rec6)
        edit_node(c, "gpu-a", lambda d: d["gpus"][5].pop("processes", None))
        c.wait_for(lambda: phase(c, "gpu-a", ua[5]) == "in-service" and phase(c, "gpu-a", ua[6]) == "in-service",
                   60, "GPUs 5 and 6 reset one after the other")
        resets = [e for e in events(c, "GpuReset") if ua[5] in e["note"] or ua[6] in e["note"]]
        check(len(resets) == 2, "both GPUs reset", [e["note"] for e in resets])

        # --- an agent killed while GPU 3 drains -------------------------------------------------
        c.create(f"/apis/policy/v1/namespaces/{NS}/poddisruptionbudgets", {
            "metadata": {"name": "hold"}, "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "train"}}}})
        c.wait_for(lambda: c.get(f"/apis/policy/v1/namespaces/{NS}/poddisruptionbudgets/hold").get("status", {})
                   .get("observedGeneration") == 1, 30, "the second budget observed")
        inject_xid(c, "gpu-a", 3, 119)
        c.wait_for(lambda: phase(c, "gpu-a", ua[3]) == "draining" and "refused" in record(c, "gpu-a", ua[3])["message"],
                   30, "GPU 3 draining, its eviction refused")
        out_events = len([e for e in events(c, "GpuOutOfService") if ua[3] in e["note"]])
        proc = c.procs[name_a]
        os.killpg(proc.p.pid, signal.SIGKILL)
        proc.p.wait()
        proc.out.close()
        c.procs[name_a] = Process(name_a, proc.argv, c.log(name_a),
                                  {"KGPU_FAKE_NVML_CONFIG": node_file(c, "gpu-a"), "NVIDIA_DRIVER_ROOT": "/"})
        c.wait_for(lambda: "resuming GPU 3 in phase draining" in open(c.log(name_a)).read(), 30,
                   "the restarted agent to resume GPU 3")
        c.request("DELETE", f"/apis/policy/v1/namespaces/{NS}/poddisruptionbudgets/hold")
        c.wait_for(lambda: phase(c, "gpu-a", ua[3]) == "in-service", 60, "GPU 3 back after the restart")
        check(len([e for e in events(c, "GpuOutOfService") if ua[3] in e["note"]]) == out_events,
              "the restarted agent resumed instead of starting the remediation again")

        # --- a reset that fails escalates once -------------------------------------------------
        gpu_pod(c, "notebook", "gpu-a", ua[4])
        c.wait_for(lambda: c.get(f"/api/v1/namespaces/{NS}/pods/notebook")["status"].get("phase") == "Running", 60,
                   "the notebook pod Running")
        edit_node(c, "gpu-a", lambda d: d.setdefault("faults", {}).setdefault("calls", []).append(
            {"call": "nvmlDeviceRemoveGpu_v2", "gpu": 7, "error": "IN_USE"}))
        inject_xid(c, "gpu-a", 7, 95)
        c.wait_for(lambda: phase(c, "gpu-a", ua[7]) == "node-draining", 30, "GPU 7 escalated to reboot-node")
        c.wait_for(lambda: c.get("/api/v1/nodes/gpu-a")["spec"].get("unschedulable") is True, 30, "the node cordoned")
        c.wait_for(lambda: not pod_exists(c, "notebook"), 30, "the node drained")
        rec = record(c, "gpu-a", ua[7])
        check("the reset failed" in rec["reason"] + rec["message"] + json.dumps(events(c, "RemediationEscalated")),
              "the escalation says the reset failed", rec)
        check(condition(c, "gpu-a", "GpuRebootRequired")["status"] == "True", "GpuRebootRequired True")
        with open(boot, "w") as f:
            f.write("boot-2\n")
        c.wait_for(lambda: phase(c, "gpu-a", ua[7]) == "in-service", 30, "GPU 7 back after the reboot")
        check(not c.get("/api/v1/nodes/gpu-a")["spec"].get("unschedulable"), "the node uncordoned after the reboot")

        # --- dry run on gpu-b --------------------------------------------------------------------
        inject_xid(c, "gpu-b", 0, 79)
        cond = c.wait_for(lambda: (lambda k: k if k and k["status"] == "True" else None)(
            condition(c, "gpu-b", "GpuRebootRequired")), 30, "gpu-b's GpuRebootRequired")
        check(cond["reason"] == "Noted" and "it would withhold it, cordon and drain the node" in cond["message"],
              "dry-run: the condition says what would be done", cond)
        dry = [e for e in events(c, "RemediationDryRun") if ub[0] in e["note"]]
        check(len(dry) == 1, "one RemediationDryRun Event")
        check(not c.get("/api/v1/nodes/gpu-b")["spec"].get("unschedulable"), "dry-run cordons nothing")
        # --- the other classes: restart-app, none (an XID the table does not list), report ---------
        inject_xid(c, "gpu-b", 2, 13)
        inject_xid(c, "gpu-b", 3, 999)
        app = c.wait_for(lambda: [e for e in events(c, "GpuApplicationError") if ub[2] in e["note"]], 30,
                         "the GpuApplicationError Event")
        check("XID 13 (GR_EXCEPTION): restart-app; the GPU stays in service" in app[0]["note"],
              "restart-app: an Event, the GPU stays in service", app[0]["note"])
        unknown = c.wait_for(lambda: [e for e in events(c, "GpuFault") if ub[3] in e["note"]], 30, "the GpuFault Event")
        check("XID 999: not in the fault action table, no action" in unknown[0]["note"],
              "an unknown XID is reported with its number and no action", unknown[0]["note"])
        inject_xid(c, "gpu-a", 0, 54)
        c.wait_for(lambda: phase(c, "gpu-a", ua[0]) == "needs-operator", 30, "GPU 0 waiting for an operator")
        cond = condition(c, "gpu-a", "GpuNeedsAttention")
        check(cond["status"] == "True" and "XID 54 (CHECK_MECHANICALS)" in cond["message"],
              "report: withheld until an operator returns it", cond)
        c.patch("/api/v1/nodes/gpu-a", {"metadata": {"annotations": {"kgpu.io/remediation-release": ua[0]}}})
        c.wait_for(lambda: phase(c, "gpu-a", ua[0]) in (None, "in-service"), 30, "GPU 0 returned by the operator")

        # --- a flapping GPU is quarantined; kgpu doctor explains it; an operator returns it -------
        def faults(uuid):
            r = record(c, "gpu-a", uuid)
            return len(r["faults"]) if r else 0

        base = faults(ua[1])
        for k in range(3):
            inject_xid(c, "gpu-a", 1, 46)
            want = "in-service" if k < 2 else "quarantined"
            # The fault must be counted before the next comes: an XID that arrives while the GPU is
            # still being remediated belongs to that episode and is not a new fault.
            c.wait_for(lambda: faults(ua[1]) == base + k + 1 and phase(c, "gpu-a", ua[1]) == want, 30,
                       f"GPU 1 {want} after fault {k + 1}")
        cond = condition(c, "gpu-a", "GpuNeedsAttention")
        check(cond["status"] == "True" and cond["reason"] == "Quarantined" and "3 faults within 3600s" in cond["message"],
              "the third fault within the hour quarantines GPU 1 instead of cycling it", cond)
        _, out, _ = kgpu(build, "doctor", kubeconfig=c.kubeconfig)
        check("gpu-remediation" in out and "waits for an operator (Quarantined)" in out and
              "kgpu.io/remediation-release" in out and ua[1] in out,
              "kgpu doctor explains the quarantine with the condition and the record", out[-3000:])
        c.patch("/api/v1/nodes/gpu-a", {"metadata": {"annotations": {"kgpu.io/remediation-release": ua[1]}}})
        c.wait_for(lambda: phase(c, "gpu-a", ua[1]) in (None, "in-service"), 30, "GPU 1 returned by the operator")
        check("kgpu.io/remediation-release" not in c.get("/api/v1/nodes/gpu-a")["metadata"].get("annotations", {}),
              "the operator's release is validated, applied and removed")

        # --- kgpu validate: the chain on gpu-a, then a GPU of gpu-b with a row remap pending ----------
        def validate(node, *extra):
            root = c.path(f"agent-{node}")
            return subprocess.run(
                [os.path.join(build, "kgpu"), "--nvml-library", os.path.join(build, "tools/fake-nvml/libnvidia-ml.so.1"),
                 "validate", "--dev-root", root, "--device-plugin-dir", os.path.join(root, "device-plugins"),
                 "--cdi-root", os.path.join(root, "cdi"), f"--kubeconfig={c.kubeconfig}", f"--node-name={node}", *extra],
                env=dict(os.environ, KGPU_FAKE_NVML_CONFIG=node_file(c, node)), capture_output=True, text=True,
                timeout=120)
        r = validate("gpu-a", "--namespace", NS, "--workload-image", "nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0",
                     "--workload-timeout", "60", "--label-node")
        check(r.returncode == 0 and "validation passed" in r.stdout and
              "workload       passed  Job team/kgpu-validate-gpu-a" in r.stdout,
              "kgpu validate: driver, NVML, device plugin, CDI and a GPU Job on gpu-a pass", r.stdout + r.stderr)
        labels = c.get("/api/v1/nodes/gpu-a")["metadata"]["labels"]
        check(all(labels.get(f"kgpu.io/validation.{s}") == "passed" for s in ("driver", "nvml", "device-plugin", "cdi", "workload")),
              "the node carries the validation labels", labels)
        edit_node(c, "gpu-b", lambda d: d["gpus"][1].setdefault("telemetry", {}).update({"remapPending": 1}))
        r = validate("gpu-b", "--gpu", "1")
        check(r.returncode == 1 and f"GPU 1 ({ub[1]}): a row remap is pending" in r.stdout,
              "kgpu validate fails a GPU with a row remap pending, naming it", r.stdout + r.stderr)
        rbac_refusals(check, c, accounts=("kgpu-agent",))


run_main(body)
