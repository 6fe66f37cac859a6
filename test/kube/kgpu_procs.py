"""kgpu's own processes beside a test Cluster (test/kube/cluster.py), and the check list the
end-to-end tests report through.

Contract: every process started here is registered with the Cluster (`cluster.procs`), so
`cluster.check()` reports its death with its log tail and `cluster.stop()` ends it first.
"""
import os
import re
import sys
import time
import traceback
import urllib.error
import urllib.request

from cluster import SOURCE, NotBuilt, Process, http_ok, tail

# ctest's SKIP_RETURN_CODE for these tests: the control plane is not built and CI is not set.
SKIPPED = 77


class Checks:
    """Named checks; a failed one prints its detail and fails the run at `finish()`."""

    def __init__(self):
        self.failures = []

    def __call__(self, ok, what, detail=""):
        print(("ok: " if ok else "FAIL: ") + what + ("" if ok or detail == "" else "\n    " + str(detail)[-3000:]),
              flush=True)
        if not ok:
            self.failures.append(what)
        return ok

    def finish(self):
        if self.failures:
            print(f"{len(self.failures)} check(s) failed: " + "; ".join(self.failures), flush=True)
            return 1
        print("all checks passed", flush=True)
        return 0


def run_main(body):
    """Runs body(checks) and exits with its verdict; an exception is a failure with its traceback
    (a component's death arrives as cluster.ComponentDied with the component's log tail)."""
    checks = Checks()
    try:
        body(checks)
    except NotBuilt as e:
        # Under CI a missing control plane fails the run; elsewhere the test says why it skipped.
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            print(f"FAIL: {e} (CI is set: a missing control plane is a failure)", flush=True)
            sys.exit(1)
        print(f"SKIPPED: {e}", flush=True)
        sys.exit(SKIPPED)
    except Exception:  # noqa: BLE001 - reported, then the run fails
        traceback.print_exc()
        checks.failures.append("exception")
    sys.exit(checks.finish())


def wait_listening(cluster, name, timeout=30):
    """The port kgpu process `name` logged in its "listening on host:port" line."""
    log = cluster.procs[name].log

    def port():
        m = re.search(r"listening on \S+:(\d+)", tail(log, 400))
        return int(m.group(1)) if m else 0
    return cluster.wait_for(port, timeout, f"{name} to listen")


def start_agent(cluster, build, node, kubeconfig, nvml_config="examples/nodes/dgx-h100.yaml", extra=(), env=None):
    """`kgpu agent` for kwok node `node` on the fake NVML (tools/fake-nvml) with API access through
    `kubeconfig`. No kubelet serves this node: the device-plugin directory is the agent's own and
    PodResources is off. `env` adds to the agent's environment. Returns the process name in
    cluster.procs."""
    name = f"agent-{node}"
    root = cluster.path(name)
    dev = os.path.join(root, "dev")
    os.makedirs(dev, exist_ok=True)
    os.makedirs(os.path.join(root, "device-plugins"), exist_ok=True)
    for f in [f"nvidia{i}" for i in range(8)] + ["nvidiactl"]:
        open(os.path.join(dev, f), "a").close()
    argv = [os.path.join(build, "kgpu"), "agent", f"--kubeconfig={kubeconfig}", f"--node-name={node}",
            "--address=127.0.0.1:0", "--nvml-library", os.path.join(build, "tools/fake-nvml/libnvidia-ml.so.1"),
            "--pod-resources-socket", "", "--device-plugin-dir", os.path.join(root, "device-plugins"),
            "--dev-root", root, "--cdi-root", os.path.join(root, "cdi"),
            "--output-file", os.path.join(root, "features.d", "gfd"), *extra]
    # The node's name by --node-name alone (no $NODE_NAME): it names the agent's series (Hostname) too.
    env = {"KGPU_FAKE_NVML_CONFIG": node_gpus(root, node, nvml_config), "NVIDIA_DRIVER_ROOT": "/", **(env or {})}
    cluster.procs[name] = Process(name, argv, cluster.log(name), env)
    return name


def node_gpus(root, node, nvml_config):
    """The fake node `nvml_config` (a file under examples/nodes) with GPU UUIDs of its own: the fake
    derives UUIDs from model, bus and index, so two nodes of one preset would share them, which no
    real cluster does (and kgpu keys GPUs by UUID)."""
    import hashlib
    import yaml
    with open(os.path.join(SOURCE, nvml_config)) as f:
        desc = yaml.safe_load(f)
    by_index = {g.get("index"): g for g in desc.get("gpus", [])}
    for i in range(8):
        h = hashlib.sha256(f"{node}/{i}".encode()).hexdigest()
        g = by_index.setdefault(i, {"index": i})
        g["uuid"] = f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"
    desc["gpus"] = [by_index[i] for i in sorted(by_index)]
    path = os.path.join(root, "node.yaml")
    with open(path, "w") as f:
        yaml.safe_dump(desc, f)
    return path


def agent_port(cluster, node):
    """The metrics port of the agent of `node` (start_agent)."""
    return wait_listening(cluster, f"agent-{node}")


def start_prometheus(cluster, targets):
    """Debian's Prometheus on 127.0.0.1 scraping `targets` ("host:port") every second; its URL once
    ready. Registered with the cluster like every other process."""
    d = cluster.path("prometheus")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "prometheus.yml"), "w") as f:
        f.write("global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
                "scrape_configs:\n  - job_name: kgpu-agent\n    static_configs:\n"
                f"      - targets: [{', '.join(repr(t) for t in targets)}]\n")
    cluster.procs["prometheus"] = Process("prometheus", [
        "/usr/bin/prometheus", f"--config.file={d}/prometheus.yml", f"--storage.tsdb.path={d}/data",
        "--web.listen-address=127.0.0.1:0", "--log.level=info"], cluster.log("prometheus"))
    pid = cluster.procs["prometheus"].p.pid

    def port():
        # The port it bound: Prometheus logs the address it was given, so read the socket table.
        try:
            inodes = {os.readlink(f"/proc/{pid}/fd/{fd}")[8:-1] for fd in os.listdir(f"/proc/{pid}/fd")
                      if os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:")}
            with open("/proc/net/tcp") as t:
                for line in t.readlines()[1:]:
                    f = line.split()
                    if f[3] == "0A" and f[9] in inodes:
                        return int(f[1].split(":")[1], 16)
        except OSError:
            return 0
        return 0
    url = f"http://127.0.0.1:{cluster.wait_for(port, 30, 'prometheus to listen')}"
    cluster.wait_for(lambda: http_ok(url + "/-/ready"), 60, "prometheus to be ready")
    return url


def start_scheduler(cluster, build, kubeconfig, extra=(), name="kgpu-scheduler"):
    """`kgpu scheduler` on 127.0.0.1 (a free port) with API access through `kubeconfig`; returns
    its URL once it listens. A second one (after the first stopped) needs another `name`: the port
    is read from the process's own log."""
    argv = [os.path.join(build, "kgpu"), "scheduler", f"--kubeconfig={kubeconfig}", "--address=127.0.0.1:0",
            *extra]
    cluster.procs[name] = Process(name, argv, cluster.log(name))
    return f"http://127.0.0.1:{wait_listening(cluster, name)}"


def kgpu(build, *args, kubeconfig, timeout=60):
    """One kgpu CLI run; (exit status, stdout, stderr)."""
    import subprocess
    r = subprocess.run([os.path.join(build, "kgpu"), *args, f"--kubeconfig={kubeconfig}"],
                       capture_output=True, text=True, timeout=timeout)
    return r.returncode, r.stdout, r.stderr


def rbac_refusals(check, cluster, accounts=("kgpu-agent", "kgpu-scheduler")):
    """Checks in kube-apiserver's audit log that no request of kgpu's ServiceAccounts was refused
    (403) for a verb their ClusterRoles do not grant: a verb missing from the chart fails the test
    even where the process tolerates the refusal. A refusal of a granted verb happens while a
    restarted kube-apiserver's authorizer has not read the roles yet; it is printed, not failed.
    Also prints the verbs granted but not used in this test (other tests use others)."""
    roles = {r["metadata"]["name"]: r.get("rules", [])
             for r in cluster.get("/apis/rbac.authorization.k8s.io/v1/clusterroles")["items"]}
    bindings = cluster.get("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings")["items"]
    for sa in accounts:
        used = cluster.audit(sa)
        rules = [rule for b in bindings
                 if any(x.get("name") == sa and x.get("namespace") == "kgpu-system" for x in b.get("subjects", []))
                 for rule in roles.get(b["roleRef"]["name"], [])]
        granted = {(v, g, r) for rule in rules for v in rule["verbs"] for g in rule.get("apiGroups", [""])
                   for r in rule.get("resources", [])}
        key = lambda u: (u[0], u[1], u[2] + ("/" + u[3] if u[3] else ""))
        refused = sorted({key(u) for u in used if u[4] == 403})
        missing = [r for r in refused if r not in granted]
        check(used and not missing, f"the audit log: {len(used)} requests of {sa}, none refused for a verb its "
              "ClusterRoles lack", missing)
        if refused:
            print(f"info: {sa}: refused while the authorizer was not ready, granted: {refused}", flush=True)
        print(f"info: {sa}: granted, not used in this test: {sorted(granted - {key(u) for u in used})}", flush=True)


def parallel(items, fn, threads=4):
    """Calls fn(item) for every item on `threads` threads; raises RuntimeError naming how many
    calls failed and the first error."""
    import queue
    import threading
    q = queue.Queue()
    for it in items:
        q.put(it)
    errors = []

    def work():
        while True:
            try:
                it = q.get_nowait()
            except queue.Empty:
                return
            try:
                fn(it)
            except Exception as e:  # noqa: BLE001 - collected, raised below
                errors.append(str(e))
    ts = [threading.Thread(target=work) for _ in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    if errors:
        raise RuntimeError(f"{len(errors)} of {len(items)} calls failed, first: {errors[0]}")


def eventually(cond, timeout=30, interval=0.1):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = cond()
        if v:
            return v
        time.sleep(interval)
    return cond()


def allocated_claim(cluster, ns, pod):
    """The ResourceClaim of `pod`'s first claim once the pod is bound and the claim allocated
    (the claim a template made, named in pod.status.resourceClaimStatuses); None before."""
    p = cluster.get(f"/api/v1/namespaces/{ns}/pods/{pod}")
    st = p.get("status", {}).get("resourceClaimStatuses", [])
    if not st or not p["spec"].get("nodeName"):
        return None
    claim = cluster.get(f"/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims/{st[0]['resourceClaimName']}")
    return claim if claim.get("status", {}).get("allocation") else None


def dra_peer(build, *args):
    """test/kubelet-dra-peer (the kubelet's side of a DRA driver): (exit status, its JSON answer or
    its error text)."""
    import json
    import subprocess
    r = subprocess.run([os.path.join(build, "test/kubelet-dra-peer"), *args], capture_output=True, text=True,
                       timeout=60)
    return r.returncode, (json.loads(r.stdout) if r.returncode == 0 else r.stderr)


def timing_summary(seconds):
    """{"min_ms", "median_ms", "max_ms"} of a list of durations in seconds (the benches' JSON)."""
    import statistics
    return {"min_ms": round(min(seconds) * 1000, 1), "median_ms": round(statistics.median(seconds) * 1000, 1),
            "max_ms": round(max(seconds) * 1000, 1)}


def metric(url, family, labels=""):
    """The sum of `family`'s samples at `url`/metrics whose labels contain `labels`, or None when
    the page cannot be read."""
    try:
        with urllib.request.urlopen(url + "/metrics", timeout=5) as r:
            text = r.read().decode()
    except OSError:
        return None
    total = 0.0
    for line in text.splitlines():
        if line.startswith(family) and (line[len(family)] in "{ ") and labels in line:
            total += float(line.rsplit(" ", 1)[1])
    return total


def events(cluster, reason, ns=None):
    """The events.k8s.io Events of `reason`, in namespace `ns` (all namespaces when None)."""
    where = f"/namespaces/{ns}" if ns else ""
    return [e for e in cluster.get(f"/apis/events.k8s.io/v1{where}/events")["items"] if e.get("reason") == reason]


def pod_or_none(cluster, ns, name):
    """The pod, or None when the API server says it does not exist (other errors raise)."""
    try:
        return cluster.get(f"/api/v1/namespaces/{ns}/pods/{name}")
    except urllib.error.HTTPError as e:
        if e.code == 404:
            return None
        raise
