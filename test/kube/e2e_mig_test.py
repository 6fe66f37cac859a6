#!/usr/bin/env python3
"""`kgpu agent --mig-manager` on a real control plane (test/kube/cluster.py): the chart's RBAC, a
kwok node with eight fake H100s whose MIG layout the fake NVML keeps in a state file, and the node
label nvidia.com/mig.config driving it (docs/mig.md):

- all-balanced: state pending -> success; the layout read back by `kgpu mig export` on the same
  GPUs; the other operands' gpu.deploy labels that were "true" are paused and restored, "false"
  untouched, the agent's own gate never paused;
- a config changing GPU 3 alone while a pod holds GPU 3: GPU 3 withheld, the change waits, times
  out, fails naming the pod, nothing changed, the operands restored;
- the same layout again: success without pausing anything;
- once the pod is gone: only GPU 3 changes (the others keep their instances);
- a profile the GPU does not offer: failed with the reason in the node annotation, nothing changed;
- the agent killed while a change is pending (operands paused): the restarted agent restores them
  and finishes the change;
- `kgpu mig plan --apply`: pending MIG requests choose the node's layout, which the manager applies.
- `kgpu scheduler --mig-plan-interval-ms`: pending MIG requests relabel the node without a person.

Usage: e2e_mig_test.py BUILD_DIR
"""
import json
import os
import signal
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cluster import SOURCE, Cluster, Process  # noqa: E402
from kgpu_procs import agent_port, events, metric, rbac_refusals, run_main, start_agent, start_scheduler  # noqa: E402

build = os.path.abspath(sys.argv[1])
HELM = os.path.join(SOURCE, ".tools/kube/helm")
NODE = "gpu-m"
NS = "team"

CONFIG = """version: v1
mig-configs:
  all-balanced:
    - devices: all
      mig-enabled: true
      mig-devices: {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}
  gpu3-split:
    - devices: all
      mig-enabled: true
      mig-devices: {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}
    - devices: [3]
      mig-enabled: true
      mig-devices: {"3g.40gb": 2}
  all-7g:
    - devices: all
      mig-enabled: true
      mig-devices: {"7g.80gb": 1}
  bad-profile:
    - devices: [0]
      mig-enabled: true
      mig-devices: {"1g.5gb": 7}
"""


def body(check):
    with Cluster() as c:
        r = subprocess.run([HELM, "install", "kgpu", os.path.join(SOURCE, "deploy/helm/kgpu"), "--namespace", "kgpu-system",
                            "--create-namespace", "--set", "scheduler.enabled=true", "--set", "scheduler.mode=extender",
                            "--set", "scheduler.replicas=1", "--set", "scheduler.migPlanner.enabled=true",
                            f"--kubeconfig={c.kubeconfig}"], capture_output=True, text=True, timeout=180)
        check(r.returncode == 0, "helm install", r.stderr)
        c.add_fake_node(NODE, labels={"nvidia.com/gpu.present": "true", "nvidia.com/gpu.deploy.device-plugin": "true",
                                      "nvidia.com/gpu.deploy.dcgm": "true", "nvidia.com/gpu.deploy.client": "true",
                                      "nvidia.com/gpu.deploy.nvsm": "false", "nvidia.com/mig.capable": "true",
                                      "nvidia.com/gpu.count": "8", "nvidia.com/gpu.memory": "81559"},
                        capacity={"nvidia.com/gpu": "8"})
        c.wait_for(lambda: c.node_ready(NODE), 90, "the kwok node Ready")
        node_file = c.path("h100.yaml")
        with open(node_file, "w") as f:
            f.write("preset: hgx-h100-8\n")
        config = c.path("mig-config.yaml")
        with open(config, "w") as f:
            f.write(CONFIG)
        state = c.path("mig.state")
        env = {"KGPU_FAKE_NVML_STATE": state}
        start_agent(c, build, NODE, c.service_account_kubeconfig("kgpu-system", "kgpu-agent"), nvml_config=node_file,
                    extra=["--mig-manager=true", f"--mig-config-file={config}", "--mig-drain-timeout=3000",
                           f"--mig-lock-file={c.path('mig.lock')}", "--mig-strategy=mixed", "--health-interval=300",
                           "--node-report-interval=500"],
                    env=env)
        agent_port(c, NODE)
        agent_nvml = c.path(f"agent-{NODE}", "node.yaml")

        def labels():
            return c.get(f"/api/v1/nodes/{NODE}")["metadata"].get("labels", {})

        def annotation(key):
            return c.get(f"/api/v1/nodes/{NODE}")["metadata"].get("annotations", {}).get(key)

        def export():
            r = subprocess.run([os.path.join(build, "kgpu"), "--nvml-library",
                                os.path.join(build, "tools/fake-nvml/libnvidia-ml.so.1"), "mig", "export"],
                               env=dict(os.environ, KGPU_FAKE_NVML_CONFIG=agent_nvml, KGPU_FAKE_NVML_STATE=state),
                               capture_output=True, text=True, timeout=60)
            return r.stdout

        def label(value):
            # The state label goes with it, so that the wait below sees this change's outcome.
            c.patch(f"/api/v1/nodes/{NODE}",
                    {"metadata": {"labels": {"nvidia.com/mig.config": value, "nvidia.com/mig.config.state": None}}})

        def state_is(value):
            return labels().get("nvidia.com/mig.config.state") == value

        # --- all-balanced on every GPU --------------------------------------------------------------
        label("all-balanced")
        c.wait_for(lambda: state_is("success"), 60, "all-balanced applied")
        out = export()
        check(out.count('"1g.10gb": 2') == 8 and out.count('"3g.40gb": 1') == 8,
              "every GPU reads back as all-balanced (2 x 1g.10gb, 2g.20gb, 3g.40gb)", out)
        lb = labels()
        check(lb.get("nvidia.com/gpu.deploy.dcgm") == "true" and lb.get("nvidia.com/gpu.deploy.client") == "true"
              and lb.get("nvidia.com/gpu.deploy.nvsm") == "false",
              "the operands were restored ('false' left as it was)", lb)
        check(c.wait_for(lambda: events(c, "MigConfigApplied"), 30, "a MigConfigApplied Event"), "a MigConfigApplied Event")
        plugins = c.path(f"agent-{NODE}", "device-plugins")
        c.wait_for(lambda: all(os.path.exists(os.path.join(plugins, f"nvidia-mig-{p}.sock"))
                               for p in ("1g.10gb", "2g.20gb", "3g.40gb")) and
                   not os.path.exists(os.path.join(plugins, "nvidia-gpu.sock")), 30,
                   "the MIG device plugins served and nvidia.com/gpu gone")
        check(True, "the device plugins follow the new layout without an agent restart")
        report = c.wait_for(lambda: json.loads(annotation("kgpu.io/gpus") or "{}"), 30, "the node report")

        # --- GPU 3 held by a pod: the change waits, times out, changes nothing ----------------------
        gpu3 = [g for g in report.get("gpus", []) if g.get("index") == 3]
        uuid3 = gpu3[0]["uuid"] if gpu3 else ""
        c.create("/api/v1/namespaces", {"metadata": {"name": NS}})
        c.wait_for(lambda: c.get(f"/api/v1/namespaces/{NS}/serviceaccounts")["items"], 30, "the default ServiceAccount")
        c.create(f"/api/v1/namespaces/{NS}/pods", {
            "metadata": {"name": "infer", "annotations": {"kgpu.io/gpu-resource": "nvidia.com/gpu",
                                                          "kgpu.io/gpu-assignment": f"cuda:{uuid3}"}},
            "spec": {"nodeName": NODE, "containers": [{"name": "cuda", "image": "cuda"}]}})
        label("gpu3-split")
        c.wait_for(lambda: state_is("pending"), 30, "state pending")
        lb = labels()
        check(lb.get("nvidia.com/gpu.deploy.dcgm") == "paused-for-mig-change" and
              lb.get("nvidia.com/gpu.deploy.client") == "paused-for-mig-change" and
              lb.get("nvidia.com/gpu.deploy.nvsm") == "false",
              "while pending, the other operands that were true are paused", lb)
        check(lb.get("nvidia.com/gpu.deploy.device-plugin") == "true",
              "the agent's own gate is not paused (its DaemonSet would leave the node)", lb)
        c.wait_for(lambda: state_is("failed"), 30, "the change to time out")
        err = annotation("kgpu.io/mig-config-error") or ""
        check(f"{NS}/infer" in err and "timed out" in err, "failed with the pod named", err)
        check(labels().get("nvidia.com/gpu.deploy.dcgm") == "true" and labels().get("nvidia.com/gpu.deploy.client") == "true",
              "operands restored after the failure")
        check(export().count('"3g.40gb": 1') == 8, "nothing changed on any GPU")

        # --- the layout already there: success, nothing paused --------------------------------------
        label("all-balanced")
        c.wait_for(lambda: state_is("success"), 30, "all-balanced again")
        check(annotation("kgpu.io/mig-config-error") == "", "no error")

        # --- the pod gone: only GPU 3 changes -------------------------------------------------------
        c.request("DELETE", f"/api/v1/namespaces/{NS}/pods/infer?gracePeriodSeconds=0")
        c.wait_for(lambda: not c.get(f"/api/v1/namespaces/{NS}/pods")["items"], 30, "the pod gone")
        label("gpu3-split")
        c.wait_for(lambda: state_is("success"), 30, "gpu3-split applied")
        out = export()
        check(out.count('"3g.40gb": 2') == 1 and out.count('"3g.40gb": 1') == 7, "GPU 3 split in two, the others untouched",
              out)

        # --- a profile the GPU does not offer -----------------------------------------------------------
        label("bad-profile")
        c.wait_for(lambda: state_is("failed"), 30, "bad-profile refused")
        err = annotation("kgpu.io/mig-config-error") or ""
        check("profile 1g.5gb is not offered by this GPU" in err, "the reason names the profile", err)
        r = subprocess.run([os.path.join(build, "kgpu"), "doctor", f"--kubeconfig={c.kubeconfig}"], capture_output=True,
                           text=True, timeout=60)
        check("mig-config-failed" in r.stdout and "profile 1g.5gb is not offered by this GPU" in r.stdout,
              "kgpu doctor explains the failed MIG change with the agent's reason", r.stdout[-2000:])
        check(export().count('"3g.40gb": 2') == 1, "nothing changed")
        # --- the agent killed while a change is pending: the restarted one restores and finishes ---
        uuid5 = [g for g in report.get("gpus", []) if g.get("index") == 5]
        c.create(f"/api/v1/namespaces/{NS}/pods", {
            "metadata": {"name": "train", "annotations": {"kgpu.io/gpu-resource": "nvidia.com/gpu",
                                                          "kgpu.io/gpu-assignment": f"cuda:{uuid5[0]['uuid'] if uuid5 else ''}"}},
            "spec": {"nodeName": NODE, "containers": [{"name": "cuda", "image": "cuda"}]}})
        label("all-7g")
        c.wait_for(lambda: state_is("pending") and labels().get("nvidia.com/gpu.deploy.dcgm") == "paused-for-mig-change",
                   30, "all-7g pending with the operands paused")
        name = f"agent-{NODE}"
        proc = c.procs.pop(name)  # not a component that died: killed on purpose
        os.killpg(proc.p.pid, signal.SIGKILL)
        proc.p.wait()
        proc.out.close()
        check(labels().get("nvidia.com/gpu.deploy.dcgm") == "paused-for-mig-change",
              "killed mid-change: the node is left pending with its operands paused (as NVIDIA's manager leaves it)")
        c.request("DELETE", f"/api/v1/namespaces/{NS}/pods/train?gracePeriodSeconds=0")
        c.wait_for(lambda: not c.get(f"/api/v1/namespaces/{NS}/pods")["items"], 30, "the pod gone")
        c.procs[name] = Process(name, proc.argv, c.log(name),
                                {"KGPU_FAKE_NVML_CONFIG": agent_nvml, "NVIDIA_DRIVER_ROOT": "/", **env})
        c.wait_for(lambda: state_is("success"), 60, "the restarted agent to finish all-7g")
        check("a change was cut short; restoring its paused operands" in open(c.log(name)).read(),
              "the restarted agent restored the paused operands first")
        lb = labels()
        check(lb.get("nvidia.com/gpu.deploy.dcgm") == "true" and lb.get("nvidia.com/gpu.deploy.client") == "true",
              "operands restored after the restart", lb)
        check(export().count('"7g.80gb": 1') == 8, "the change finished on every GPU")
        # --- the planner: pending MIG requests choose the layout, --apply labels the node --------------
        for name, resource, n in (("want-1g", "nvidia.com/mig-1g.10gb", 10), ("want-2g", "nvidia.com/mig-2g.20gb", 8),
                                  ("want-3g", "nvidia.com/mig-3g.40gb", 4)):
            c.create(f"/api/v1/namespaces/{NS}/pods", {
                "metadata": {"name": name},
                "spec": {"containers": [{"name": "cuda", "image": "cuda", "resources": {"limits": {resource: str(n)}}}]}})
        r = subprocess.run([os.path.join(build, "kgpu"), "mig", "plan", f"--kubeconfig={c.kubeconfig}", "--config-file",
                            config, "--apply"], capture_output=True, text=True, timeout=60)
        check(r.returncode == 0 and f"{NODE}: all-balanced (change)" in r.stdout and
              "all-balanced: serves 22 pending, 0 eviction(s)" in r.stdout and "next best gpu3-split: serves 21" in r.stdout,
              "kgpu mig plan chooses all-balanced for 10 x 1g.10gb, 8 x 2g.20gb and 4 x 3g.40gb pending, and says why",
              r.stdout + r.stderr)
        c.wait_for(lambda: labels().get("nvidia.com/mig.config") == "all-balanced" and state_is("success"), 60,
                   "the planned layout applied by the MIG manager")
        check(export().count('"3g.40gb": 1') == 8, "the node re-laid out as planned")

        # --- planning without a person: kgpu scheduler's MIG planning labels the node itself ---------
        for name in ("want-1g", "want-2g", "want-3g"):
            c.request("DELETE", f"/api/v1/namespaces/{NS}/pods/{name}?gracePeriodSeconds=0")
        for k in range(8):
            c.create(f"/api/v1/namespaces/{NS}/pods", {
                "metadata": {"name": f"want-7g-{k}"},
                "spec": {"containers": [{"name": "cuda", "image": "cuda",
                                         "resources": {"limits": {"nvidia.com/mig-7g.80gb": "1"}}}]}})
        url = start_scheduler(c, build, c.service_account_kubeconfig("kgpu-system", "kgpu-scheduler"),
                              ["--leader-elect=false", "--mig-plan-interval-ms=300", f"--mig-plan-config-file={config}"])
        c.wait_for(lambda: labels().get("nvidia.com/mig.config") == "all-7g" and state_is("success"), 60,
                   "kgpu scheduler's MIG planning labels the node all-7g and the manager applies it")
        check(export().count('"7g.80gb": 1') == 8, "eight pending 7g.80gb requests re-laid out the node by themselves")
        planned = c.wait_for(lambda: events(c, "MigConfigPlanned"), 30, "the MigConfigPlanned Event")
        check(len(planned) == 1 and "nvidia.com/mig.config=all-7g for 8 pending MIG request(s)" in planned[0]["note"],
              "one MigConfigPlanned Event on the node says why", [e.get("note") for e in planned])
        # Several more rounds: the applied config serves the same pods, nothing changes.
        rounds = metric(url, "kgpu_scheduler_mig_plan_rounds_total") or 0
        c.wait_for(lambda: (metric(url, "kgpu_scheduler_mig_plan_rounds_total") or 0) >= rounds + 3, 30,
                   "three more MIG planning rounds")
        check(labels().get("nvidia.com/mig.config") == "all-7g" and state_is("success") and
              metric(url, "kgpu_scheduler_mig_labels_total") == 1 and len(events(c, "MigConfigPlanned")) == 1,
              "the next rounds leave the node alone")
        rbac_refusals(check, c, accounts=("kgpu-agent", "kgpu-scheduler"))


run_main(body)
