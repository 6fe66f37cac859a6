#!/usr/bin/env python3
"""MIG manager latency on a fake 8-GPU node (docs/mig.md), against the real control plane of
test/kube: from the node label nvidia.com/mig.config changing to nvidia.com/mig.config.state =
success, no pods to wait for (eviction waits excluded, as the issue asks).

One `kgpu agent --mig-manager` on a kwok node with eight fake H100s (the fake NVML keeps its MIG
layout in a state file). Rounds cycle through all-balanced, all-1g.10gb, all-3g.40gb and
all-7g.80gb (every round changes all eight GPUs: instances destroyed and created), with one
all-disabled -> all-balanced first (the mode change). The label is patched with the state label
removed, and the state polled every 10 ms.

Usage: bench/mig_bench.py BUILD_DIR [--rounds 12] [--json OUT]
"""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "test", "kube"))
from cluster import Cluster  # noqa: E402
from kgpu_procs import agent_port, start_agent, timing_summary  # noqa: E402

NODE = "gpu-m"
CYCLE = ["all-1g.10gb", "all-3g.40gb", "all-7g.80gb", "all-balanced"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("build")
    ap.add_argument("--rounds", type=int, default=12)
    ap.add_argument("--json")
    args = ap.parse_args()
    build = os.path.abspath(args.build)
    with Cluster() as c:
        c.add_fake_node(NODE, labels={"nvidia.com/gpu.present": "true"}, capacity={"nvidia.com/gpu": "8"})
        c.wait_for(lambda: c.node_ready(NODE), 90, "the kwok node Ready")
        node_file = c.path("h100.yaml")
        with open(node_file, "w") as f:
            f.write("preset: hgx-h100-8\n")
        start_agent(c, build, NODE, c.kubeconfig, nvml_config=node_file,
                    extra=["--mig-manager=true", f"--mig-lock-file={c.path('mig.lock')}", "--mig-strategy=mixed"],
                    env={"KGPU_FAKE_NVML_STATE": c.path("mig.state")})
        agent_port(c, NODE)

        def apply(name):
            t0 = time.monotonic()
            c.patch(f"/api/v1/nodes/{NODE}",
                    {"metadata": {"labels": {"nvidia.com/mig.config": name, "nvidia.com/mig.config.state": None}}})
            end = t0 + 60
            while time.monotonic() < end:
                state = c.get(f"/api/v1/nodes/{NODE}")["metadata"]["labels"].get("nvidia.com/mig.config.state")
                if state in ("success", "failed"):
                    if state == "failed":
                        raise RuntimeError(f"{name} failed")
                    return time.monotonic() - t0
                time.sleep(0.01)
            raise TimeoutError(name)

        mode = apply("all-balanced")  # MIG off -> on on every GPU, and the layout
        print(f"all-disabled -> all-balanced (mode change): {mode * 1000:.0f} ms", flush=True)
        times = []
        for k in range(args.rounds):
            name = CYCLE[k % len(CYCLE)]
            times.append(apply(name))
            print(f"round {k}: {name}: {times[-1] * 1000:.0f} ms", flush=True)
        result = {"gpus": 8, "rounds": args.rounds, "mode_change_ms": round(mode * 1000, 1),
                  "label_to_success": timing_summary(times)}
        print(json.dumps(result), flush=True)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
