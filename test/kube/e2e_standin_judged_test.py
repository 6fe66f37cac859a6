#!/usr/bin/env python3
"""The API-server stand-in's conformance suites run against the real kube-apiserver: each asserts
what the stand-in answers, so a check that fails here is a place where the stand-in and Kubernetes
disagree (fixed, or listed in tools/apiserver/README.md). The suites:
- test/integration/apiserver_python_test.py (Debian's python3-kubernetes), every test;
- test/integration/apiserver_kubectl_test.sh (kubectl from .tools/kube), all but the checks that
  need the stand-in's fault injection, request log or its own kubeconfig contexts;
- test/integration/apiserver_helm_test.sh (Helm and kubectl from .tools/kube, its test chart with
  the Widget as a CustomResourceDefinition), all but the checks on the stand-in's request log.

Usage: e2e_standin_judged_test.py [BUILD_DIR]   (BUILD_DIR is not used)
"""
import os
import subprocess
import sys

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cluster import SOURCE, Cluster  # noqa: E402
from kgpu_procs import run_main  # noqa: E402

TOOLS = os.path.join(SOURCE, ".tools/kube")
INTEGRATION = os.path.join(SOURCE, "test/integration")


def suite(check, name, argv, env):
    r = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=240)
    failed = [line for line in (r.stdout + r.stderr).splitlines() if line.startswith("FAIL")]
    print(f"--- {name}: exit {r.returncode}\n" + "\n".join(failed) + "\n" + r.stderr[-3000:], flush=True)
    check(r.returncode == 0, f"the stand-in's {name} conformance checks pass against kube-apiserver v1.36.3")


def namespaced_kubeconfig(c, namespace):
    """The admin kubeconfig with NAMESPACE (created) as its context's namespace: each suite starts
    from an empty namespace, as it does on a fresh stand-in."""
    c.kubectl("create", "namespace", namespace)
    c.wait_for(lambda: c.get(f"/api/v1/namespaces/{namespace}/serviceaccounts")["items"], 30,
               f"namespace {namespace}'s default ServiceAccount")
    with open(c.kubeconfig) as f:
        cfg = yaml.safe_load(f)
    cfg["contexts"][0]["context"]["namespace"] = namespace
    path = c.path(f"{namespace}.kubeconfig")
    with open(path, "w") as f:
        yaml.safe_dump(cfg, f)
    return path


def body(check):
    with Cluster(kwok=False) as c:
        c.wait_for(lambda: c.get("/api/v1/namespaces/default/serviceaccounts")["items"], 30, "the default ServiceAccount")
        env = dict(os.environ, KGPU_TEST_KUBECONFIG=c.kubeconfig)
        suite(check, "python-client", ["/usr/bin/python3", "-W", "ignore",
                                       os.path.join(INTEGRATION, "apiserver_python_test.py")], env)
        kubectl, helm = os.path.join(TOOLS, "kubectl"), os.path.join(TOOLS, "helm")
        suite(check, "kubectl", [os.path.join(INTEGRATION, "apiserver_kubectl_test.sh"),
                                 f"--kubeconfig={namespaced_kubeconfig(c, 'kubectl-suite')}", kubectl], env)
        real = f"--kubeconfig={c.kubeconfig}"
        suite(check, "helm", [os.path.join(INTEGRATION, "apiserver_helm_test.sh"), real, helm, kubectl,
                              os.path.join(SOURCE, "test/data/helm/standin-chart")], env)


run_main(body)
