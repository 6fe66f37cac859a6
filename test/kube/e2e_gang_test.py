#!/usr/bin/env python3
"""Gangs on a real control plane (docs/gangs.md): the chart's MutatingAdmissionPolicy (no webhook)
gates every new pod with a gang marker behind kgpu.io/gang; `kgpu scheduler`'s gang admission
reserves the whole gang on its model and only then removes the gates; the real kube-scheduler
places the members through kgpu's extender, which sends each to its planned node and GPUs. On two
kwok nodes of 8 fake H100s:

- a Kueue pod group of 4 x 4 GPUs: 3 members wait gated, the 4th completes the gang and all 4
  are bound at once;
- a second gang (2 x 8 GPUs) while the first holds every GPU: waits, nothing of it bound; placed
  whole once the first is gone;
- a gang larger than the cluster: GangUnschedulable at once, with the numbers;
- conflicting markers: GangInvalid naming the pod and both fields;
- a scheduler-plugins PodGroup (its CRD, minMember 2);
- a gang kube-scheduler cannot finish (two members on one node with one host port): the
  reservation times out, the placed member is evicted, nothing is left half-placed;
- quota queues (docs/queues.md; `helm upgrade` with scheduler.queues): team-a borrows team-b's
  idle quota, team-b's own work reclaims it (team-a's newest workload, a gang, evicted whole), a
  queue config that does not parse keeps the last good one, and the queue metrics say so.

Usage: e2e_gang_test.py BUILD_DIR
"""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cluster import SOURCE, Cluster, shipped_scheduler_config  # noqa: E402
from kgpu_procs import events, kgpu, metric, pod_or_none, rbac_refusals, run_main, start_agent, start_scheduler  # noqa: E402

build = os.path.abspath(sys.argv[1])
HELM = os.path.join(SOURCE, ".tools/kube/helm")
NODES = ["gang-a", "gang-b"]
NS = "ml"

PODGROUP_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "podgroups.scheduling.x-k8s.io"},
    "spec": {"group": "scheduling.x-k8s.io", "scope": "Namespaced",
             "names": {"plural": "podgroups", "singular": "podgroup", "kind": "PodGroup"},
             "versions": [{"name": "v1alpha1", "served": True, "storage": True,
                           "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                               "spec": {"type": "object", "properties": {
                                   "minMember": {"type": "integer"},
                                   "scheduleTimeoutSeconds": {"type": "integer"}}}}}}}]}}


def body(check):
    with Cluster() as c:
        r = subprocess.run([HELM, "install", "kgpu", os.path.join(SOURCE, "deploy/helm/kgpu"), "--namespace",
                            "kgpu-system", "--create-namespace", "--set", "scheduler.enabled=true", "--set",
                            "scheduler.mode=extender", "--set", "scheduler.replicas=1",
                            f"--kubeconfig={c.kubeconfig}"], capture_output=True, text=True, timeout=180)
        check(r.returncode == 0, "helm install: kube-apiserver accepts the gang gate MutatingAdmissionPolicy", r.stderr)
        c.create("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", PODGROUP_CRD)
        for n in NODES:
            c.add_fake_node(n, labels={"nvidia.com/gpu.present": "true"}, capacity={"nvidia.com/gpu": "8"})
        c.wait_for(lambda: all(c.node_ready(n) for n in NODES), 90, "the kwok nodes Ready")
        agent_kc = c.service_account_kubeconfig("kgpu-system", "kgpu-agent")
        for n in NODES:
            start_agent(c, build, n, agent_kc)
        c.wait_for(lambda: all(c.get(f"/api/v1/nodes/{n}")["metadata"].get("annotations", {}).get("kgpu.io/gpus")
                               for n in NODES), 60, "the agents' GPU reports")
        url = start_scheduler(c, build, c.service_account_kubeconfig("kgpu-system", "kgpu-scheduler"),
                              ["--leader-elect=false", "--serialize-admission=false", "--gang-interval-ms=200",
                               "--gang-timeout-ms=4000"])
        c.start_scheduler(shipped_scheduler_config("main-scheduler-extender.yaml"), url)
        c.create("/api/v1/namespaces", {"metadata": {"name": NS}})
        c.wait_for(lambda: c.get(f"/api/v1/namespaces/{NS}/serviceaccounts")["items"], 30, "the default ServiceAccount")

        def create_pod(name, gpus, labels=None, annotations=None, host_port=None):
            container = {"name": "cuda", "image": "nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04",
                         "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}
            if host_port:
                container["ports"] = [{"containerPort": host_port, "hostPort": host_port}]
            return c.create(f"/api/v1/namespaces/{NS}/pods", {
                "metadata": {"name": name, "labels": labels or {}, "annotations": annotations or {}},
                "spec": {"containers": [container]}})

        def kueue(group, total):
            return {"kueue.x-k8s.io/pod-group-name": group}, {"kueue.x-k8s.io/pod-group-total-count": str(total)}

        def pod(name):
            return pod_or_none(c, NS, name)

        def bound(name):
            p = pod(name)
            return bool(p and p["spec"].get("nodeName"))

        def gated(name):
            p = pod(name)
            return bool(p) and any(g["name"] == "kgpu.io/gang" for g in p["spec"].get("schedulingGates", []))

        def ns_events(reason):
            return events(c, reason, NS)

        def rounds():
            return metric(url, "kgpu_scheduler_admission_rounds_total") or 0

        def after_rounds(n):
            """Waits until `n` more admission rounds have run: what they did not do, they will not do."""
            start = rounds()
            c.wait_for(lambda: rounds() >= start + n, 30, f"{n} more admission rounds")

        def delete(name):
            c.request("DELETE", f"/api/v1/namespaces/{NS}/pods/{name}?gracePeriodSeconds=0")

        # kube-apiserver loads a new admission policy within a moment: a dry-run create says when.
        def policy_active():
            probe = c.request("POST", f"/api/v1/namespaces/{NS}/pods?dryRun=All", {
                "metadata": {"name": "probe", "labels": {"kueue.x-k8s.io/pod-group-name": "probe"}},
                "spec": {"containers": [{"name": "c", "image": "x"}]}})
            return any(g["name"] == "kgpu.io/gang" for g in probe["spec"].get("schedulingGates", []))
        c.wait_for(policy_active, 30, "the gang gate policy active in kube-apiserver")

        # --- a Kueue pod group of 4 x 4 GPUs --------------------------------------------------------
        labels, ann = kueue("train", 4)
        for i in range(3):
            created = create_pod(f"train-{i}", 4, labels, ann)
            check(any(g["name"] == "kgpu.io/gang" for g in created["spec"].get("schedulingGates", [])),
                  f"the MutatingAdmissionPolicy gated train-{i} at creation", created["spec"].get("schedulingGates"))
        waiting = c.wait_for(lambda: (lambda w: w if len(w) == 3 else None)(
            [e for e in ns_events("GangWaiting") if "ml/train: 3 of its 4 members exist" in e.get("note", "")]), 30,
            "GangWaiting Events on the 3 members")
        after_rounds(2)
        check(all(gated(f"train-{i}") and not bound(f"train-{i}") for i in range(3)),
              "3 of 4 members: all still gated and unbound")
        check(len(waiting) == 3, "a GangWaiting Event on each member says 3 of 4 exist", [e.get("note") for e in waiting])
        create_pod("train-3", 4, labels, ann)
        c.wait_for(lambda: all(bound(f"train-{i}") for i in range(4)), 60, "the whole gang bound")
        nodes = {pod(f"train-{i}")["spec"]["nodeName"] for i in range(4)}
        assigned = [pod(f"train-{i}")["metadata"].get("annotations", {}).get("kgpu.io/gpu-assignment", "") for i in range(4)]
        check(nodes == set(NODES) and all(a.count(",") == 3 for a in assigned),
              "the 4th member completes the gang: all 4 bound, 4 GPUs each over both nodes", (nodes, assigned))
        c.wait_for(lambda: ns_events("GangAdmitted"), 30, "GangAdmitted Events")

        # --- a second gang while the first holds every GPU --------------------------------------------
        labels, ann = kueue("second", 2)
        for i in range(2):
            create_pod(f"second-{i}", 8, labels, ann)
        c.wait_for(lambda: any("gang ml/second does not fit now" in e.get("note", "") for e in ns_events("GangWaiting")), 30,
                   "the second gang told it does not fit now")
        after_rounds(2)
        check(not any(bound(f"second-{i}") for i in range(2)) and all(gated(f"second-{i}") for i in range(2)),
              "nothing of the second gang is bound while the first holds the GPUs")
        for i in range(4):
            delete(f"train-{i}")
        c.wait_for(lambda: all(bound(f"second-{i}") for i in range(2)), 60, "the second gang placed once the first is gone")
        check({pod(f"second-{i}")["spec"]["nodeName"] for i in range(2)} == set(NODES),
              "the second gang placed whole, one 8-GPU member per node")

        # --- larger than the cluster; conflicting markers ------------------------------------------
        labels, ann = kueue("huge", 3)
        for i in range(3):
            create_pod(f"huge-{i}", 8, labels, ann)
        ev = c.wait_for(lambda: [e for e in ns_events("GangUnschedulable") if "ml/huge" in e.get("note", "")], 30,
                        "GangUnschedulable for the gang larger than the cluster")
        check("the gang asks 24.00 GPUs of nvidia.com/gpu and the cluster has 16" in ev[0]["note"] and
              ev[0]["type"] == "Warning", "a gang larger than the cluster is unschedulable at once, with the numbers",
              ev[0]["note"])
        create_pod("confused", 1, {"kueue.x-k8s.io/pod-group-name": "g1", "scheduling.x-k8s.io/pod-group": "g2"},
                   {"kueue.x-k8s.io/pod-group-total-count": "1"})
        ev = c.wait_for(lambda: ns_events("GangInvalid"), 30, "GangInvalid for conflicting markers")
        check("pod ml/confused: label kueue.x-k8s.io/pod-group-name names gang \"g1\" but label "
              "scheduling.x-k8s.io/pod-group names \"g2\"" in ev[0]["note"],
              "conflicting gang markers name the pod and both fields", ev[0]["note"])
        for n in ["second-0", "second-1", "huge-0", "huge-1", "huge-2", "confused"]:
            delete(n)

        # --- a scheduler-plugins PodGroup -----------------------------------------------------------
        c.create(f"/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{NS}/podgroups",
                 {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup", "metadata": {"name": "pg"},
                  "spec": {"minMember": 2}})
        create_pod("pg-0", 2, {"scheduling.x-k8s.io/pod-group": "pg"})
        c.wait_for(lambda: any("gang ml/pg: 1 of its 2 members exist" in e.get("note", "") for e in ns_events("GangWaiting")),
                   30, "the PodGroup's first member told it waits for the second")
        held = gated("pg-0") and not bound("pg-0")
        create_pod("pg-1", 2, {"scheduling.x-k8s.io/pod-group": "pg"})
        c.wait_for(lambda: all(bound(f"pg-{i}") for i in range(2)), 60, "the PodGroup's two members bound")
        check(held, "a Coscheduling PodGroup's minMember makes the gang: one member of two is held, then both bound")
        for i in range(2):
            delete(f"pg-{i}")

        # --- kube-scheduler cannot finish a gang: the reservation times out --------------------------
        # Two 1-GPU members with one host port: kgpu packs them on one node, kube-scheduler's
        # NodePorts filter refuses the second there.
        labels, ann = kueue("ports", 2)
        for i in range(2):
            create_pod(f"ports-{i}", 1, labels, ann, host_port=7777)
        ev = c.wait_for(lambda: [e for e in ns_events("GangTimedOut") if "ml/ports" in e.get("note", "")], 60,
                        "the reservation timing out")
        check("1 of 2 members not placed within 4000 ms; the reservation is released and the 1 placed are evicted"
              in ev[0]["note"], "the timeout says what it releases", ev[0]["note"])
        c.wait_for(lambda: sum(1 for i in range(2) if pod(f"ports-{i}")) == 1, 30, "the placed member evicted")
        left = [f"ports-{i}" for i in range(2) if pod(f"ports-{i}")]
        check(len(left) == 1 and not bound(left[0]), "nothing of the gang is left placed: the other member waits unbound",
              left)
        for n in left:
            delete(n)

        # --- quota queues ----------------------------------------------------------------------------
        queues_yaml = """version: v1
clusterQueues:
  - name: team-a
    cohort: lab
    namespaces: [qa]
    quotas: [{resource: nvidia.com/gpu, nominalQuota: 8}]
  - name: team-b
    cohort: lab
    namespaces: [qb]
    quotas: [{resource: nvidia.com/gpu, nominalQuota: 8}]
"""
        values = c.path("queues-values.yaml")
        with open(values, "w") as f:
            f.write("scheduler:\n  enabled: true\n  mode: extender\n  replicas: 1\n  queues:\n    enabled: true\n"
                    "    config: |\n" + "".join("      " + line + "\n" for line in queues_yaml.splitlines()))
        r = subprocess.run([HELM, "upgrade", "kgpu", os.path.join(SOURCE, "deploy/helm/kgpu"), "--namespace", "kgpu-system",
                            "-f", values, f"--kubeconfig={c.kubeconfig}"], capture_output=True, text=True, timeout=180)
        check(r.returncode == 0, "helm upgrade with scheduler.queues: the ConfigMap, its Role and the queue gate policy",
              r.stderr)
        c.procs.pop("kgpu-scheduler").stop()
        url = start_scheduler(c, build, c.service_account_kubeconfig("kgpu-system", "kgpu-scheduler"),
                              ["--leader-elect=false", "--serialize-admission=false", "--gang-interval-ms=200",
                               "--gang-timeout-ms=10000", "--queue-config=kgpu-system/kgpu-scheduler-queues"],
                              name="kgpu-scheduler-queues")
        c.procs.pop("kube-scheduler").stop()
        c.start_scheduler(shipped_scheduler_config("main-scheduler-extender.yaml"), url)
        for team in ("qa", "qb"):
            c.create("/api/v1/namespaces", {"metadata": {"name": team, "labels": {"kgpu.io/queues": "enabled"}}})
            c.wait_for(lambda: c.get(f"/api/v1/namespaces/{team}/serviceaccounts")["items"], 30, "a ServiceAccount")

        def qpod(ns, name, gpus, labels=None, annotations=None):
            return c.create(f"/api/v1/namespaces/{ns}/pods", {
                "metadata": {"name": name, "labels": labels or {}, "annotations": annotations or {}},
                "spec": {"containers": [{"name": "cuda", "image": "cuda", "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}]}})

        def qget(ns, name):
            return pod_or_none(c, ns, name)

        def qbound(ns, name):
            p = qget(ns, name)
            return bool(p and p["spec"].get("nodeName"))

        def queue_gate_active():
            probe = c.request("POST", "/api/v1/namespaces/qa/pods?dryRun=All",
                              {"metadata": {"name": "probe"}, "spec": {"containers": [{"name": "c", "image": "x"}]}})
            return any(g["name"] == "kgpu.io/queue" for g in probe["spec"].get("schedulingGates", []))
        c.wait_for(queue_gate_active, 30, "the queue gate policy active")
        # team-a: 8 GPUs of its own, then a gang of 2 x 4 borrowing team-b's idle quota.
        qpod("qa", "a-own", 8)
        created = qget("qa", "a-own")
        check(any(g["name"] == "kgpu.io/queue" for g in created["spec"].get("schedulingGates", [])),
              "a pod of a queue's namespace is gated by kgpu.io/queue at creation")
        c.wait_for(lambda: qbound("qa", "a-own"), 60, "team-a's own 8 GPUs admitted and placed")
        # Reclaim takes the newest first; created in the same second as a-own, the gang still goes
        # first (ties go by workload id, and gang ids sort after pod uids).
        for i in range(2):
            qpod("qa", f"a-borrow-{i}", 4, {"kueue.x-k8s.io/pod-group-name": "borrow"},
                 {"kueue.x-k8s.io/pod-group-total-count": "2"})
        c.wait_for(lambda: all(qbound("qa", f"a-borrow-{i}") for i in range(2)), 60,
                   "team-a's gang admitted on borrowed quota and placed whole")

        c.wait_for(lambda: metric(url, "kgpu_queue_borrowed", 'queue="team-a"') == 8, 10,
                   "team-a borrowing 8 GPUs in the metrics")
        check(metric(url, "kgpu_queue_used", 'queue="team-a"') == 16, "kgpu_queue_used: team-a uses 16, 8 of them borrowed")
        # team-b's own work reclaims its quota: team-a's gang goes whole.
        qpod("qb", "b-own", 8)
        # One Event per evicted member, written by the recorder's thread: wait for as many as the gang has.
        ev = c.wait_for(lambda: (lambda e: e if len(e) >= 2 else None)(events(c, "QueueReclaimed", "qa")), 30,
                        "QueueReclaimed Events")
        check(len(ev) == 2 and all("gang qa/borrow borrows in its cohort and is evicted so that queue team-b" in e["note"]
                                   for e in ev), "the borrowing gang is evicted whole for team-b", [e["note"] for e in ev])
        c.wait_for(lambda: qbound("qb", "b-own"), 60, "team-b's pod admitted and placed once the borrowers left")
        check(qbound("qa", "a-own"), "team-a's own pod within its nominal quota keeps running")
        # A config that does not parse keeps the last good one.
        c.patch("/api/v1/namespaces/kgpu-system/configmaps/kgpu-scheduler-queues",
                {"data": {"queues.yaml": queues_yaml.replace("nominalQuota: 8}]\n  - name: team-b", "nominalQuota: -1}]\n  - name: team-b")}})
        ev = c.wait_for(lambda: events(c, "QueueConfigInvalid", "kgpu-system"), 30, "QueueConfigInvalid")
        check("nominalQuota: -1 is negative; the last good config stays" in ev[0]["note"] and
              ev[0]["note"].startswith("ConfigMap kgpu-system/kgpu-scheduler-queues queues.yaml:6: "
                                         "clusterQueues[0].quotas[0].nominalQuota"),
              "a bad queue config is refused with its line and field, the last good one stays", ev[0]["note"])
        c.wait_for(lambda: metric(url, "kgpu_queue_config_ok") == 0, 10, "kgpu_queue_config_ok 0")
        qpod("qa", "a-more", 4)
        c.wait_for(lambda: any("queue team-a" in e.get("note", "") for e in events(c, "QueueWaiting", "qa")), 30, "team-a's next pod waiting under the old config")
        rc, out, err = kgpu(build, "top", "namespaces", kubeconfig=c.kubeconfig)
        check("queues not shown: ConfigMap kgpu-system/kgpu-scheduler-queues queues.yaml:6:" in err,
              "kgpu top says why it shows no queues while the config does not parse", err)
        c.patch("/api/v1/namespaces/kgpu-system/configmaps/kgpu-scheduler-queues", {"data": {"queues.yaml": queues_yaml}})
        rc, out, err = kgpu(build, "top", "namespaces", "-o", "json", kubeconfig=c.kubeconfig)
        rows = {r["name"]: r for r in json.loads(out)} if out.strip().startswith("[") else {}
        check(rows.get("qa", {}).get("queue") == {"name": "team-a", "usage": ["gpu 8/8, 0 borrowed, 4 pending"]} and
              rows.get("qb", {}).get("queue", {}).get("usage") == ["gpu 8/8, 0 borrowed, 0 pending"],
              "kgpu top namespaces shows each namespace's queue: used of nominal, borrowed, pending",
              {k: v.get("queue") for k, v in rows.items()} if rows else out + err)
        rc, out, err = kgpu(build, "allocations", "-o", "json", kubeconfig=c.kubeconfig)
        queues = {q["queue"]: q for q in json.loads(out).get("queues", [])} if rc == 0 else {}
        check(queues.get("team-a", {}).get("pending") == 4 and queues.get("team-a", {}).get("admitted") == 1 and
              queues.get("team-b", {}).get("used") == 8 and queues.get("team-b", {}).get("cohort") == "lab",
              "kgpu allocations lists the queues with used, borrowed and pending", queues or out + err)
        rbac_refusals(check, c)


run_main(body)
