#!/usr/bin/env python3
"""The control-plane fixture's own promises (test/kube/cluster.py): a component that dies while a
test waits fails the wait with its name, exit status and log tail; stop() leaves no process and no
folder behind; a cluster whose component cannot start says which and cleans up too.

Usage: e2e_fixture_test.py [BUILD_DIR]   (BUILD_DIR is not used)
"""
import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cluster import Cluster, ComponentDied, StartFailed  # noqa: E402
from kgpu_procs import run_main  # noqa: E402


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie not yet reaped by its parent counts as gone.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][0] != "Z"
    except OSError:
        return False


def body(check):
    c = Cluster(kwok=False)
    c.start()
    folder = c.dir
    pids = {n: p.p.pid for n, p in c.procs.items()}
    os.kill(pids["kube-controller-manager"], signal.SIGKILL)
    try:
        c.wait_for(lambda: False, 20, "something that never comes")
        died = None
    except ComponentDied as e:
        died = str(e)
    check(died is not None and "kube-controller-manager exited with -9" in died and "the end of" in died,
          "a component killed mid-test fails the wait, naming it with its exit status and log", died)
    c.stop()
    time.sleep(0.2)
    check(not any(alive(p) for p in pids.values()), "stop() leaves none of the components running",
          {n: alive(p) for n, p in pids.items()})
    check(not os.path.exists(folder), "stop() removes the cluster's folder", folder)

    # A component that cannot start: kube-apiserver given a flag it refuses.
    before = set(os.listdir("/tmp"))
    try:
        Cluster(kwok=False, apiserver_args=["--no-such-flag"]).start()
        failed = None
    except StartFailed as e:
        failed = str(e)
    check(failed is not None and "kube-apiserver exited" in failed and "no-such-flag" in failed,
          "a component that cannot start is named with its log", failed)
    left = [d for d in set(os.listdir("/tmp")) - before if d.startswith("kgpu-kube-")]
    check(not left, "a failed start leaves no folder behind", left)


run_main(body)
