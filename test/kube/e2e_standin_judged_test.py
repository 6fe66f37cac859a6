#!/usr/bin/env python3
"""The API-server stand-in's conformance suite (test/integration/apiserver_python_test.py, Debian's
python3-kubernetes) run against the real kube-apiserver: each test asserts what the stand-in
answers, so a test that fails here is a place where the stand-in and Kubernetes disagree (fixed,
or listed in tools/apiserver/README.md).

Usage: e2e_standin_judged_test.py [BUILD_DIR]   (BUILD_DIR is not used)
"""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cluster import SOURCE, Cluster  # noqa: E402
from kgpu_procs import run_main  # noqa: E402


def body(check):
    with Cluster(kwok=False) as c:
        c.wait_for(lambda: c.get("/api/v1/namespaces/default/serviceaccounts")["items"], 30, "the default ServiceAccount")
        env = dict(os.environ, KGPU_TEST_KUBECONFIG=c.kubeconfig)
        r = subprocess.run(["/usr/bin/python3", "-W", "ignore",
                            os.path.join(SOURCE, "test/integration/apiserver_python_test.py")],
                           env=env, capture_output=True, text=True, timeout=240)
        print(r.stderr[-6000:])
        check(r.returncode == 0, "the stand-in's python-client conformance tests pass against kube-apiserver v1.36.3")


run_main(body)
