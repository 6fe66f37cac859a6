#!/usr/bin/env python3
"""Remediation latency on a fake 8-GPU node (docs/remediation.md), against the real control plane
of test/kube (kube-apiserver, kube-controller-manager with the disruption controller, kwok).

One `kgpu agent --remediation=on` on a kwok node, with the fake NVML (examples/nodes/dgx-h100.yaml,
persistence mode off). Each round picks the next GPU (0-6; GPU 7 runs MIG), gives it a GPU pod (kgpu.io/gpu-assignment)
and a process, then injects XID 62 (PMU_HALT: reset-gpu) by appending to the fake's node file.
Measured from the outside, by polling the API every 10 ms:
  out:  from the XID's write to the node annotation showing the GPU withheld (phase draining);
  back: from the last blocker gone (the process ended, after the pod was evicted) to the GPU back
        in service (reset through NVML's drain states, validated, released).
The agent's round is --remediation-interval (default here 200 ms, as in e2e.remediation); the
figures include the API writes and the polling resolution.

Usage: bench/remediation_bench.py BUILD_DIR [--rounds 16] [--interval-ms 200] [--json OUT]
"""
import argparse
import json
import os
import sys
import time
import urllib.error

import yaml

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "test", "kube"))
from cluster import CONTROLLERS, Cluster  # noqa: E402
from kgpu_procs import agent_port, start_agent, timing_summary  # noqa: E402

NS = "bench"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("build")
    ap.add_argument("--rounds", type=int, default=16)
    ap.add_argument("--interval-ms", type=int, default=200)
    ap.add_argument("--json")
    args = ap.parse_args()
    build = os.path.abspath(args.build)
    with Cluster(controllers=CONTROLLERS + ["disruption-controller"]) as c:
        c.add_fake_node("gpu-a", labels={"nvidia.com/gpu.present": "true"}, capacity={"nvidia.com/gpu": "8"})
        c.wait_for(lambda: c.node_ready("gpu-a"), 90, "the kwok node Ready")
        boot = c.path("boot_id")
        with open(boot, "w") as f:
            f.write("boot-1\n")
        start_agent(c, build, "gpu-a", c.kubeconfig,
                    extra=["--remediation=on", f"--remediation-interval={args.interval_ms}", "--health-interval=500",
                           "--remediation-flap=1000/1h", "--remediation-namespace=default", f"--boot-id-file={boot}"])
        agent_port(c, "gpu-a")
        path = c.path("agent-gpu-a", "node.yaml")

        def edit(fn):
            with open(path) as f:
                d = yaml.safe_load(f)
            fn(d)
            with open(path + ".tmp", "w") as f:
                yaml.safe_dump(d, f)
            os.replace(path + ".tmp", path)

        def prepare(d):
            for g in d["gpus"]:
                g["persistenceMode"] = False
                g.pop("processes", None)
        edit(prepare)
        with open(path) as f:
            uuids = [g["uuid"] for g in yaml.safe_load(f)["gpus"]]
        c.create("/api/v1/namespaces", {"metadata": {"name": NS}})
        c.wait_for(lambda: c.get(f"/api/v1/namespaces/{NS}/serviceaccounts")["items"], 30, "the default ServiceAccount")

        def phase(uuid):
            a = c.get("/api/v1/nodes/gpu-a")["metadata"].get("annotations", {}).get("kgpu.io/remediation")
            r = json.loads(a)["gpus"].get(uuid) if a else None
            return (r or {}).get("phase"), (r or {}).get("message", "")

        def poll(cond, timeout=30):
            end = time.monotonic() + timeout
            while time.monotonic() < end:
                if cond():
                    return time.monotonic()
                time.sleep(0.01)
            raise TimeoutError("timed out")

        outs, backs = [], []
        for k in range(args.rounds):
            gpu = k % 7  # GPU 7 of the example node has MIG on (a process there needs its GPU instance)
            uuid = uuids[gpu]
            pod = f"job-{k}"
            c.create(f"/api/v1/namespaces/{NS}/pods", {
                "metadata": {"name": pod, "annotations": {"kgpu.io/gpu-resource": "nvidia.com/gpu",
                                                          "kgpu.io/gpu-assignment": f"cuda:{uuid}"}},
                "spec": {"nodeName": "gpu-a", "containers": [{"name": "cuda", "image": "cuda",
                                                              "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}})
            edit(lambda d: d["gpus"][gpu].update({"processes": [{"pid": 5000 + k, "usedMemoryMiB": 1024}]}))
            t0 = time.monotonic()
            edit(lambda d: d.setdefault("faults", {}).setdefault("xids", []).append({"gpu": gpu, "xid": 62}))
            t_out = poll(lambda: phase(uuid)[0] in ("draining", "resetting"))
            poll(lambda: phase(uuid)[0] == "resetting" and "process" in phase(uuid)[1])

            def gone():
                try:
                    c.get(f"/api/v1/namespaces/{NS}/pods/{pod}")
                    return False
                except urllib.error.HTTPError as e:
                    return e.code == 404
            poll(gone)
            t1 = time.monotonic()
            edit(lambda d: d["gpus"][gpu].pop("processes", None))
            t_back = poll(lambda: phase(uuid)[0] == "in-service")
            outs.append(t_out - t0)
            backs.append(t_back - t1)
            print(f"round {k}: GPU {gpu}: out {outs[-1] * 1000:.0f} ms, back {backs[-1] * 1000:.0f} ms", flush=True)

        result = {"rounds": args.rounds, "interval_ms": args.interval_ms, "xid_to_out_of_service": timing_summary(outs),
                  "fix_to_in_service": timing_summary(backs)}
        print(json.dumps(result), flush=True)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
