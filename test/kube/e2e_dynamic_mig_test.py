#!/usr/bin/env python3
"""Dynamic MIG through DRA on a real control plane (docs/dra.md "Dynamic MIG"): `kgpu agent
--gpu-api=dra --dra-dynamic-mig` on a kwok node whose fake H100 GPU 0 is in MIG mode with no
instances publishes every profile at every placement as partitionable devices (KEP-4815 counter
sets in a slice of their own), which kube-apiserver validates;

- kube-scheduler's own DRA allocator allocates MIG devices that do not exist yet from those
  slices, and never two that overlap: a 4g.40gb and a 3g.40gb fill GPU 0, a 1g.10gb waits until
  the 3g.40gb is gone;
- the node's agent creates each partition's MIG instance when the kubelet peer prepares the claim
  (the layout read back with `kgpu mig export` from the same fake NVML state) and destroys it at
  unprepare;
- `kgpu scheduler`'s allocator (the kgpu-scheduler profile, DynamicResources off) places a 1g.10gb
  where the counters leave room and refuses a 3g.40gb they do not;
- a kube-apiserver with DRAPartitionableDevices off drops the counter sets: the agent says so,
  turns dynamic MIG off, and publishes no partition.

Usage: e2e_dynamic_mig_test.py BUILD_DIR
"""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cluster import SOURCE, Cluster, kgpu_allocator_config, shipped_scheduler_config  # noqa: E402
from kgpu_procs import allocated_claim, dra_peer, rbac_refusals, run_main, start_agent, start_scheduler  # noqa: E402

build = os.path.abspath(sys.argv[1])
HELM = os.path.join(SOURCE, ".tools/kube/helm")
NODE = "mig-a"
NS = "team-mig"
DRIVER = "gpu.nvidia.com"
RES = "/apis/resource.k8s.io/v1"
NODE_YAML = "preset: hgx-h100-8\ngpus:\n  - index: 0\n    mig: {enabled: true}\n"


def peer(*args):
    return dra_peer(build, *args)


def start_dra_agent(c, kubeconfig):
    """The agent on NODE with dynamic MIG; returns (registration socket, fake NVML state, node file)."""
    node_file = c.path("h100-mig.yaml")
    with open(node_file, "w") as f:
        f.write(NODE_YAML)
    state = c.path("mig.state")
    reg = c.path(f"agent-{NODE}", "plugins_registry")
    start_agent(c, build, NODE, kubeconfig, nvml_config=node_file,
                extra=["--gpu-api=dra", "--device-plugin=false", "--dra-dynamic-mig", f"--dra-driver-name={DRIVER}",
                       f"--dra-registry-dir={reg}", f"--dra-plugins-dir={c.path(f'agent-{NODE}', 'plugins')}",
                       "--health-interval=500"],
                env={"KGPU_FAKE_NVML_STATE": state})
    return os.path.join(reg, f"{DRIVER}-reg.sock"), state, c.path(f"agent-{NODE}", "node.yaml")


def slices(c):
    return [s for s in c.get(f"{RES}/resourceslices")["items"] if s["spec"].get("nodeName") == NODE]


def devices(c):
    return {d["name"]: d for s in slices(c) for d in s["spec"].get("devices", [])}


def body(check):
    with Cluster() as c:
        r = subprocess.run([HELM, "install", "kgpu", os.path.join(SOURCE, "deploy/helm/kgpu"), "--namespace",
                            "kgpu-system", "--create-namespace", "--set", "draDriver.enabled=true", "--set",
                            "draDriver.dynamicMig=true", "--set", "scheduler.enabled=true", "--set",
                            "scheduler.mode=extender", "--set", "scheduler.replicas=1", f"--kubeconfig={c.kubeconfig}"],
                           capture_output=True, text=True, timeout=180)
        check(r.returncode == 0, "helm install with draDriver.dynamicMig", r.stderr)
        ds = c.get("/apis/apps/v1/namespaces/kgpu-system/daemonsets/kgpu-agent")
        args = ds["spec"]["template"]["spec"]["containers"][0].get("args", [])
        check("--dra-dynamic-mig" in args, "the chart passes --dra-dynamic-mig to the agent", args)

        c.add_fake_node(NODE, labels={"nvidia.com/gpu.present": "true", "kgpu.io/gpu-api": "dra"})
        c.wait_for(lambda: c.node_ready(NODE), 90, "the kwok node Ready")
        reg, state, agent_nvml = start_dra_agent(c, c.service_account_kubeconfig("kgpu-system", "kgpu-agent"))
        c.wait_for(lambda: os.path.exists(reg), 30, "the registration socket")
        rc, info = peer("register", reg)
        check(rc == 0, "the kubelet peer registers the driver", info)
        endpoint = info["endpoint"] if rc == 0 else ""

        # GPUs 1-7 whole; GPU 0 as partitions: 7 x 1g.10gb, 7 x 1g.10gb+me, 4 x 1g.20gb, 3 x 2g.20gb,
        # 2 x 3g.40gb, 4g.40gb, 7g.80gb.
        devs = c.wait_for(lambda: (lambda d: d if len(d) == 7 + 25 else None)(devices(c)), 60,
                          "the agent's slices with GPU 0's partitions")
        sets = [cs for s in slices(c) for cs in s["spec"].get("sharedCounters", [])]
        check(len(sets) == 1 and sets[0]["name"] == "gpu-0-counter-set" and
              sets[0]["counters"]["compute-slices"]["value"] == "7" and
              all(sets[0]["counters"][f"memory-slice-{i}"]["value"] == "1" for i in range(8)),
              "kube-apiserver keeps GPU 0's counter set (7 compute slices, 8 memory slices)", sets)
        check(all("devices" not in s["spec"] or not s["spec"]["devices"] for s in slices(c)
                  if s["spec"].get("sharedCounters")), "the counter set is in a slice of its own (Kubernetes 1.35+)")
        p4 = devs.get("gpu-0-mig-4g40gb-5-0", {})
        check(p4.get("consumesCounters", [{}])[0].get("counterSet") == "gpu-0-counter-set" and
              sorted(p4["consumesCounters"][0]["counters"]) ==
              ["compute-slices"] + [f"memory-slice-{i}" for i in range(4)] and "uuid" not in p4.get("attributes", {}),
              "a partition consumes its placement's memory slices and its compute slices, and has no uuid yet", p4)
        gens = {s["spec"]["pool"]["generation"] for s in slices(c)}
        counts = {s["spec"]["pool"]["resourceSliceCount"] for s in slices(c)}
        check(len(gens) == 1 and counts == {len(slices(c))}, "one pool generation; resourceSliceCount counts every slice",
              (gens, counts))

        c.create("/api/v1/namespaces", {"metadata": {"name": NS}})
        c.wait_for(lambda: c.get(f"/api/v1/namespaces/{NS}/serviceaccounts")["items"], 30, "the default ServiceAccount")
        for profile in ("4g.40gb", "3g.40gb", "1g.10gb"):
            c.create(f"{RES}/namespaces/{NS}/resourceclaimtemplates", {
                "metadata": {"name": "mig-" + profile.replace(".", "-")},
                "spec": {"spec": {"devices": {"requests": [{"name": "mig", "exactly": {
                    "deviceClassName": "mig.nvidia.com",
                    "selectors": [{"cel": {"expression":
                                           f'device.attributes["{DRIVER}"].profile == "{profile}"'}}]}}]}}}})

        def mig_pod(name, profile, scheduler=None):
            spec = {"containers": [{"name": "cuda", "image": "nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04",
                                    "resources": {"claims": [{"name": "mig"}]}}],
                    "resourceClaims": [{"name": "mig", "resourceClaimTemplateName": "mig-" + profile.replace(".", "-")}]}
            if scheduler:
                spec["schedulerName"] = scheduler
            c.create(f"/api/v1/namespaces/{NS}/pods", {"metadata": {"name": name}, "spec": spec})

        def claim_of(pod):
            return allocated_claim(c, NS, pod)

        def device_of(claim):
            return claim["status"]["allocation"]["devices"]["results"][0]["device"]

        def export():
            r = subprocess.run([os.path.join(build, "kgpu"), "--nvml-library",
                                os.path.join(build, "tools/fake-nvml/libnvidia-ml.so.1"), "mig", "export"],
                               env=dict(os.environ, KGPU_FAKE_NVML_CONFIG=agent_nvml, KGPU_FAKE_NVML_STATE=state),
                               capture_output=True, text=True, timeout=60)
            return r.stdout + r.stderr

        def prepare(claim):
            return peer("prepare", endpoint, "v1", NS, claim["metadata"]["uid"], claim["metadata"]["name"])

        def unprepare(claim):
            return peer("unprepare", endpoint, "v1", NS, claim["metadata"]["uid"], claim["metadata"]["name"])

        # --- kube-scheduler's DRA allocator ------------------------------------------------------------
        sched_kc = c.service_account_kubeconfig("kgpu-system", "kgpu-scheduler")
        url = start_scheduler(c, build, sched_kc, ["--leader-elect=false", "--serialize-admission=false"])
        c.start_scheduler(shipped_scheduler_config("main-scheduler-extender.yaml"), url)
        mig_pod("a-4g", "4g.40gb")
        c4 = c.wait_for(lambda: claim_of("a-4g"), 90, "kube-scheduler's allocation of the 4g.40gb claim")
        check(device_of(c4) == "gpu-0-mig-4g40gb-5-0", "kube-scheduler allocates the 4g.40gb partition", device_of(c4))
        mig_pod("a-3g", "3g.40gb")
        c3 = c.wait_for(lambda: claim_of("a-3g"), 90, "kube-scheduler's allocation of the 3g.40gb claim")
        check(device_of(c3) == "gpu-0-mig-3g40gb-9-4", "the 3g.40gb goes to memory slices 4-7, beside the 4g.40gb",
              device_of(c3))
        mig_pod("a-1g", "1g.10gb")

        def unschedulable(pod):
            p = c.get(f"/api/v1/namespaces/{NS}/pods/{pod}")
            return any(k["type"] == "PodScheduled" and k["status"] == "False" and k.get("reason") == "Unschedulable"
                       for k in p.get("status", {}).get("conditions", []))
        c.wait_for(lambda: unschedulable("a-1g"), 60, "the 1g.10gb pod unschedulable while GPU 0 is full")
        check(claim_of("a-1g") is None,
              "none of the seven free 1g.10gb partitions is allocated: the counters of GPU 0 are used up")

        rc, first = prepare(c4)
        check(rc == 0 and not first["error"] and first["devices"][0]["device"] == "gpu-0-mig-4g40gb-5-0" and
              first["devices"][0]["cdi"], "prepare creates the 4g.40gb instance and answers its CDI ID", first)
        rc, out = prepare(c3)
        check(rc == 0 and not out["error"], "prepare creates the 3g.40gb instance", out)
        layout = export()
        check("4g.40gb" in layout and "3g.40gb" in layout, "NVML shows both instances on GPU 0", layout)
        rc, again = prepare(c4)
        check(rc == 0 and again == first, "a repeated prepare answers the same", again)
        devs_after = devices(c)
        check(len(devs_after) == 32 and "gpu-0-mig-4g40gb-5-0" in devs_after,
              "the published partitions stay the same while instances exist (the counters track them)")

        rc, out = unprepare(c3)
        check(rc == 0 and not out.get("error"), "unprepare of the 3g.40gb claim", out)
        layout = export()
        check("4g.40gb" in layout and "3g.40gb" not in layout, "unprepare destroyed the 3g.40gb instance only", layout)
        c.request("DELETE", f"/api/v1/namespaces/{NS}/pods/a-3g")
        c1a = c.wait_for(lambda: claim_of("a-1g"), 90, "the 1g.10gb claim allocated once the 3g.40gb is gone")
        start_a = int(device_of(c1a).rsplit("-", 1)[1])
        check(device_of(c1a).startswith("gpu-0-mig-1g10gb-19-") and start_a >= 4,
              "kube-scheduler then allocates a 1g.10gb the 4g.40gb does not cover", device_of(c1a))
        rc, out = prepare(c1a)
        check(rc == 0 and not out["error"], "prepare creates that 1g.10gb instance", out)

        # --- kgpu's allocator: the same counters ------------------------------------------------------
        c.procs.pop("kube-scheduler").stop()
        c.start_scheduler(kgpu_allocator_config(), url)
        mig_pod("b-1g", "1g.10gb", scheduler="kgpu-scheduler")
        c1 = c.wait_for(lambda: claim_of("b-1g"), 90, "kgpu scheduler's allocation of a 1g.10gb claim")
        start = int(device_of(c1).rsplit("-", 1)[1])
        check(device_of(c1).startswith("gpu-0-mig-1g10gb-19-") and start >= 4 and start != start_a,
              "kgpu allocates a 1g.10gb placement neither the 4g.40gb nor the other 1g.10gb covers", device_of(c1))
        mig_pod("b-3g", "3g.40gb", scheduler="kgpu-scheduler")
        c.wait_for(lambda: unschedulable("b-3g"), 60, "the 3g.40gb pod unschedulable under kgpu")
        check(claim_of("b-3g") is None, "kgpu allocates no 3g.40gb over the 1g.10gb instances (their counters)")
        rc, out = prepare(c1)
        check(rc == 0 and not out["error"], "prepare creates kgpu's 1g.10gb instance", out)
        layout = export()
        check('"4g.40gb": 1' in layout and '"1g.10gb": 2' in layout and "3g.40gb" not in layout,
              "NVML shows the 4g.40gb and the two 1g.10gb instances", layout)
        rbac_refusals(check, c)

    # --- an API server that does not serve partitionable devices ----------------------------------
    with Cluster(apiserver_args=("--feature-gates=DRAPartitionableDevices=false",)) as c:
        c.add_fake_node(NODE, labels={"nvidia.com/gpu.present": "true", "kgpu.io/gpu-api": "dra"})
        reg, _, _ = start_dra_agent(c, c.kubeconfig)
        c.wait_for(lambda: os.path.exists(reg), 30, "the registration socket")
        check(peer("register", reg)[0] == 0, "the kubelet peer registers the driver (gate off)")
        log = c.log(f"agent-{NODE}")
        c.wait_for(lambda: "does not keep ResourceSlice counter sets" in open(log).read(), 60,
                   "the agent's message that dynamic MIG is off")
        whole = c.wait_for(lambda: (lambda d: d if len(d) == 7 else None)(devices(c)), 60,
                           "GPUs 1-7 published whole")
        check(not any(n.startswith("gpu-0-mig-") for n in whole) and
              not any(s["spec"].get("sharedCounters") for s in slices(c)),
              "no partition and no counter set are left published", sorted(whole))


run_main(body)
