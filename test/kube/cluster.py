#!/usr/bin/env python3
"""A real Kubernetes control plane on loopback for kgpu's end-to-end tests and benchmarks.

etcd, kube-apiserver (TLS with a generated CA, a token file, RBAC on), kube-controller-manager,
kwok (nodes and pods without kubelets, with kwok's own Stages) and, once the caller knows where
its extender listens, kube-scheduler with one of kgpu's shipped KubeSchedulerConfigurations.
The binaries come from scripts/kube-plane.sh (built once per machine, test/kube/README.md).

Contract:
- Everything lives in one temporary directory (certificates, tokens, kubeconfigs, etcd's data,
  each component's log) that `stop()` removes; every child runs in its own process group and
  gets SIGKILL from the kernel if this process dies first (PR_SET_PDEATHSIG), so nothing is
  left behind even when the test is killed.
- Every listener is on 127.0.0.1. Ports are probed free just before start; a component that
  then loses its port to another process ("address already in use" in its log) is started once
  more on a new one.
- `check()` raises ComponentDied with the dead component's log tail; `wait_for` calls it on each
  poll, so a component that dies mid-test fails that test with its reason.
- Not thread-safe: one test drives one Cluster.

CLI (for a person): cluster.py up [--scheduler-config FILE]   starts one and prints its kubeconfig,
then waits for Ctrl-C and tears it down.
"""
import contextlib
import ctypes
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(os.path.dirname(HERE))
ADMIN_TOKEN = "kgpu-e2e-admin-token"

# The controllers kgpu's tests need: service accounts and their tokens (pods need a "default"
# one), namespaces and garbage collection (helm uninstall, owner references), Deployments and
# Jobs, ResourceClaims from templates, and node lifecycle (removes the not-ready taint once kwok
# reports a node Ready).
CONTROLLERS = [
    "serviceaccount-controller", "serviceaccount-token-controller", "namespace-controller",
    "garbage-collector-controller", "deployment-controller", "replicaset-controller", "job-controller",
    "resourceclaim-controller", "node-lifecycle-controller", "taint-eviction-controller",
]


class ComponentDied(RuntimeError):
    pass


class StartFailed(RuntimeError):
    pass


class NotBuilt(RuntimeError):
    """The control plane is not built on this machine (scripts/setup.sh builds it)."""


def plane_dir():
    """The folder scripts/kube-plane.sh built; raises NotBuilt when it is not there. Tests never
    build it themselves (a cold build takes many minutes; scripts/setup.sh does it)."""
    r = subprocess.run([os.path.join(SOURCE, "scripts/kube-plane.sh"), "--check"], capture_output=True, text=True)
    if r.returncode == 3:
        raise NotBuilt(r.stderr.strip())
    if r.returncode != 0:
        raise StartFailed("scripts/kube-plane.sh --check failed:\n" + r.stderr[-4000:])
    return r.stdout.strip().splitlines()[-1]


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


_libc = ctypes.CDLL("libc.so.6", use_errno=True)


def _die_with_parent():
    _libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    os.setpgid(0, 0)


def tail(path, lines=40, max_bytes=256 * 1024):
    """The last `lines` lines of a log, read from at most its last `max_bytes`."""
    try:
        with open(path, "rb") as f:
            f.seek(max(0, os.path.getsize(path) - max_bytes))
            return "".join(f.read().decode(errors="replace").splitlines(keepends=True)[-lines:])
    except OSError as e:
        return f"(no log: {e})"


def http_ok(url, context=None, token=None, timeout=2):
    """Whether GET `url` answers 200 (a health or readiness endpoint); False when unreachable."""
    req = urllib.request.Request(url)
    if token:
        req.add_header("Authorization", "Bearer " + token)
    try:
        with urllib.request.urlopen(req, context=context, timeout=timeout) as r:
            return r.status == 200
    except (OSError, ValueError):
        return False


class Process:
    """One child with its log file; killed (process group) by stop()."""

    def __init__(self, name, argv, log, env=None):
        self.name, self.argv, self.log = name, argv, log
        full_env = dict(os.environ)
        full_env.update(env or {})
        self.out = open(log, "ab")
        self.p = subprocess.Popen(argv, stdout=self.out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                  env=full_env, preexec_fn=_die_with_parent)

    def alive(self):
        return self.p.poll() is None

    def stop(self, grace=10):
        if self.alive():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.p.pid, signal.SIGTERM)
            try:
                self.p.wait(grace)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.p.pid, signal.SIGKILL)
                self.p.wait()
        self.out.close()

    def lost_port(self):
        return "address already in use" in tail(self.log, 200)


def _run(argv, **kw):
    r = subprocess.run(argv, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        raise StartFailed(f"{' '.join(argv)}: exit {r.returncode}\n{r.stderr[-2000:]}")
    return r.stdout


class Cluster:
    """A control plane; `start()` brings etcd, kube-apiserver, kube-controller-manager and kwok up
    and waits for each to be ready; `start_scheduler()` adds kube-scheduler."""

    def __init__(self, controllers=CONTROLLERS, apiserver_args=(), kcm_args=(), kwok=True, bins=None):
        self.bins = bins or plane_dir()
        self.dir = tempfile.mkdtemp(prefix="kgpu-kube-")
        self.controllers, self.apiserver_args, self.kcm_args, self.with_kwok = controllers, apiserver_args, kcm_args, kwok
        self.procs = {}
        self.port = 0
        self.scheduler_port = 0
        self._ctx = None

    # -- paths ------------------------------------------------------------------------------------
    def path(self, *p):
        return os.path.join(self.dir, *p)

    @property
    def url(self):
        return f"https://127.0.0.1:{self.port}"

    @property
    def kubeconfig(self):
        return self.path("admin.kubeconfig")

    @property
    def ca(self):
        return self.path("pki", "ca.crt")

    def log(self, name):
        return self.path(f"{name}.log")

    # -- life cycle -------------------------------------------------------------------------------
    def __enter__(self):
        self.start()
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is not None:  # what each process said last, before the folder goes
            for name, p in self.procs.items():
                print(f"--- the end of {name}'s log ---\n{tail(p.log, 15)}", file=sys.stderr, flush=True)
        self.stop()

    def start(self):
        try:
            self._pki()
            self._start_with_retry("etcd", self._etcd, self._etcd_ready, 60)
            self._start_with_retry("kube-apiserver", self._apiserver, self._apiserver_ready, 120)
            self._start_with_retry("kube-controller-manager", self._kcm, self._kcm_ready, 60)
            if self.with_kwok:
                self._start_with_retry("kwok", self._kwok, self._kwok_ready, 60)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self):
        for name in reversed(list(self.procs)):
            self.procs[name].stop()
        self.procs.clear()
        if os.environ.get("KGPU_E2E_KEEP"):
            print(f"cluster: kept {self.dir}", file=sys.stderr)
        else:
            shutil.rmtree(self.dir, ignore_errors=True)

    def check(self):
        """Raises ComponentDied naming the first component that exited, with its log tail."""
        for name, p in self.procs.items():
            if not p.alive():
                raise ComponentDied(f"{name} exited with {p.p.returncode}; the end of {p.log}:\n{tail(p.log)}")

    def wait_for(self, cond, timeout=60, what="condition", interval=0.1):
        """Polls `cond` until it returns a true value (returned), checking the components each time;
        raises TimeoutError naming `what`."""
        end = time.monotonic() + timeout
        while True:
            self.check()
            v = cond()
            if v:
                return v
            if time.monotonic() > end:
                raise TimeoutError(f"after {timeout} s still waiting for {what}")
            time.sleep(interval)

    def _start_with_retry(self, name, start, ready, timeout):
        for attempt in range(2):
            start()
            p = self.procs[name]
            end = time.monotonic() + timeout
            while time.monotonic() < end:
                if not p.alive():
                    break
                if ready():
                    return
                time.sleep(0.1)
            if p.alive():
                raise StartFailed(f"{name} not ready after {timeout} s; the end of {p.log}:\n{tail(p.log)}")
            if attempt == 0 and p.lost_port():
                p.stop()
                del self.procs[name]
                continue
            raise StartFailed(f"{name} exited with {p.p.returncode} while starting; the end of {p.log}:\n{tail(p.log)}")

    def _spawn(self, name, argv, env=None):
        self.procs[name] = Process(name, argv, self.log(name), env)

    # -- certificates and credentials ---------------------------------------------------------------
    def _pki(self):
        pki = self.path("pki")
        os.makedirs(pki)
        ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        _run(["openssl", "req", "-x509", *ec, "-keyout", f"{pki}/ca.key", "-out", f"{pki}/ca.crt", "-days", "2",
              "-subj", "/CN=kgpu-e2e-ca"])
        _run(["openssl", "req", *ec, "-keyout", f"{pki}/apiserver.key", "-out", f"{pki}/apiserver.csr",
              "-subj", "/CN=kube-apiserver"])
        with open(f"{pki}/san.ext", "w") as f:
            f.write("subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes.default.svc\n"
                    "extendedKeyUsage=serverAuth\n")
        _run(["openssl", "x509", "-req", "-in", f"{pki}/apiserver.csr", "-CA", f"{pki}/ca.crt", "-CAkey",
              f"{pki}/ca.key", "-CAcreateserial", "-out", f"{pki}/apiserver.crt", "-days", "2", "-extfile",
              f"{pki}/san.ext"])
        _run(["openssl", "genrsa", "-out", f"{pki}/sa.key", "2048"])
        with open(self.path("tokens.csv"), "w") as f:
            f.write(f'{ADMIN_TOKEN},kgpu-e2e-admin,kgpu-e2e-admin,"system:masters"\n')

    def write_kubeconfig(self, path, token, user="user"):
        """A kubeconfig for this server with the CA and a bearer token."""
        cfg = {
            "apiVersion": "v1", "kind": "Config", "current-context": "e2e",
            "clusters": [{"name": "e2e", "cluster": {"server": self.url, "certificate-authority": self.ca}}],
            "users": [{"name": user, "user": {"token": token}}],
            "contexts": [{"name": "e2e", "context": {"cluster": "e2e", "user": user}}],
        }
        with open(path, "w") as f:
            yaml.safe_dump(cfg, f)
        return path

    def service_account_kubeconfig(self, namespace, name, seconds=3600):
        """A kubeconfig holding a token the API issues for service account namespace/name
        (TokenRequest): what a pod of that account would present."""
        body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                "spec": {"expirationSeconds": seconds}}
        tok = self.request("POST", f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token", body)
        return self.write_kubeconfig(self.path(f"sa-{namespace}-{name}.kubeconfig"), tok["status"]["token"], name)

    # -- components ---------------------------------------------------------------------------------
    def _etcd(self):
        self.etcd_port, peer = free_port(), free_port()
        self._spawn("etcd", [
            f"{self.bins}/etcd", "--name=e2e", f"--data-dir={self.path('etcd')}",
            f"--listen-client-urls=http://127.0.0.1:{self.etcd_port}",
            f"--advertise-client-urls=http://127.0.0.1:{self.etcd_port}",
            f"--listen-peer-urls=http://127.0.0.1:{peer}",
            f"--initial-advertise-peer-urls=http://127.0.0.1:{peer}",
            f"--initial-cluster=e2e=http://127.0.0.1:{peer}",
            "--unsafe-no-fsync=true", "--log-level=warn", "--quota-backend-bytes=4294967296",
        ])

    def _etcd_ready(self):
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.etcd_port}/health", timeout=2) as r:
                return json.load(r).get("health") == "true"
        except (OSError, ValueError):
            return False

    def _apiserver(self, port=0):
        self.port = port or free_port()
        pki = self.path("pki")
        self.write_kubeconfig(self.kubeconfig, ADMIN_TOKEN, "kgpu-e2e-admin")
        self._spawn("kube-apiserver", [
            f"{self.bins}/kube-apiserver",
            f"--etcd-servers=http://127.0.0.1:{self.etcd_port}",
            "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", f"--secure-port={self.port}",
            f"--tls-cert-file={pki}/apiserver.crt", f"--tls-private-key-file={pki}/apiserver.key",
            f"--client-ca-file={pki}/ca.crt", f"--token-auth-file={self.path('tokens.csv')}",
            "--authorization-mode=Node,RBAC", "--anonymous-auth=false",
            f"--service-account-issuer=https://127.0.0.1:{self.port}",
            f"--service-account-key-file={pki}/sa.key", f"--service-account-signing-key-file={pki}/sa.key",
            "--service-cluster-ip-range=10.96.0.0/16", "--endpoint-reconciler-type=none",
            "--allow-privileged=true", "--profiling=false", f"--cert-dir={pki}",
            f"--audit-policy-file={self._audit_policy()}", f"--audit-log-path={self.path('audit.log')}",
            *self.apiserver_args,
        ])

    def _audit_policy(self):
        """Every request of a kgpu-system ServiceAccount at Metadata level, nothing else."""
        path = self.path("audit-policy.yaml")
        with open(path, "w") as f:
            f.write("apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\nrules:\n"
                    "  - level: Metadata\n    userGroups: ['system:serviceaccounts:kgpu-system']\n"
                    "  - level: None\n")
        return path

    def audit_events(self, service_account):
        """The audit log's events of ServiceAccount kgpu-system/<service_account>, one per request
        (a watch when its response starts: it completes only when it ends)."""
        user = f"system:serviceaccount:kgpu-system:{service_account}"
        out = []
        try:
            with open(self.path("audit.log")) as f:
                for line in f:
                    try:
                        ev = json.loads(line)
                    except ValueError:
                        continue
                    stage = "ResponseStarted" if ev.get("verb") == "watch" else "ResponseComplete"
                    if ev.get("user", {}).get("username") == user and ev.get("stage") == stage:
                        out.append(ev)
        except OSError:
            pass
        return out

    def audit(self, service_account):
        """What ServiceAccount kgpu-system/<service_account> asked the API: a list of (verb, group,
        resource, subresource, status code), one per request."""
        return [(ev.get("verb", ""), ev.get("objectRef", {}).get("apiGroup", ""),
                 ev.get("objectRef", {}).get("resource", ""), ev.get("objectRef", {}).get("subresource", ""),
                 ev.get("responseStatus", {}).get("code", 0)) for ev in self.audit_events(service_account)]

    def _ssl(self):
        """The TLS context that trusts this cluster's CA (kube-apiserver's certificate)."""
        if self._ctx is None:
            self._ctx = ssl.create_default_context(cafile=self.ca)
        return self._ctx

    def _https_ready(self, port, path, token=None):
        # kube-apiserver's certificate is ours; the other components serve self-signed ones.
        ctx = self._ssl() if token else ssl._create_unverified_context()
        return http_ok(f"https://127.0.0.1:{port}{path}", ctx, token)

    def restart_apiserver(self):
        """Stops kube-apiserver (SIGTERM, as a rolling upgrade does) and starts it again on the same
        port and storage: every client's connections and watches break, and a watch resumed from a
        resourceVersion older than the new server's cache may get 410 Gone."""
        self.procs["kube-apiserver"].stop()
        # The new process takes the old one's key, so its place in the stop order stays.
        self._apiserver(self.port)
        self.wait_for(self._apiserver_ready, 120, "kube-apiserver to be ready again", interval=0.2)

    def _apiserver_ready(self):
        return self._https_ready(self.port, "/readyz", ADMIN_TOKEN)

    def _kcm(self):
        self.kcm_port = free_port()
        self._spawn("kube-controller-manager", [
            f"{self.bins}/kube-controller-manager", f"--kubeconfig={self.kubeconfig}",
            "--leader-elect=false", "--controllers=" + ",".join(self.controllers),
            f"--service-account-private-key-file={self.path('pki', 'sa.key')}",
            f"--root-ca-file={self.ca}", "--bind-address=127.0.0.1", f"--secure-port={self.kcm_port}",
            "--kube-api-qps=500", "--kube-api-burst=1000", "--node-monitor-grace-period=60s",
            "--concurrent-job-syncs=10",
            *self.kcm_args,
        ])

    def _kcm_ready(self):
        return self._https_ready(self.kcm_port, "/healthz")

    def _kwok(self):
        self.kwok_port = free_port()
        stages = sorted(os.path.join(self.bins, "kwok-stages", f) for f in os.listdir(os.path.join(self.bins, "kwok-stages")))
        self._spawn("kwok", [
            f"{self.bins}/kwok", f"--kubeconfig={self.kubeconfig}", *[f"--config={s}" for s in stages],
            "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
            "--cidr=10.244.0.0/16", "--node-ip=10.0.0.1", f"--server-address=127.0.0.1:{self.kwok_port}",
        ])

    def _kwok_ready(self):
        return http_ok(f"http://127.0.0.1:{self.kwok_port}/healthz")

    def start_scheduler(self, config, extender_url=None, extra=()):
        """Starts kube-scheduler on `config` (a KubeSchedulerConfiguration as a dict, e.g. from
        shipped_scheduler_config) with this cluster's kubeconfig, no leader election, and every
        extender's urlPrefix set to `extender_url` when given; waits for /readyz."""
        config = json.loads(json.dumps(config))
        config.setdefault("clientConnection", {})["kubeconfig"] = self.kubeconfig
        config["clientConnection"].setdefault("qps", 500)
        config["clientConnection"].setdefault("burst", 1000)
        config["leaderElection"] = {"leaderElect": False}
        for e in config.get("extenders", []):
            if extender_url:
                e["urlPrefix"] = extender_url
        path = self.path("scheduler-config.yaml")
        with open(path, "w") as f:
            yaml.safe_dump(config, f)

        def start():
            self.scheduler_port = free_port()
            self._spawn("kube-scheduler", [
                f"{self.bins}/kube-scheduler", f"--config={path}", "--bind-address=127.0.0.1",
                f"--secure-port={self.scheduler_port}",
                # /metrics readable without delegated authorization (tests and bench/kube_sched_bench.py).
                "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics", *extra,
            ])
        try:
            self._start_with_retry("kube-scheduler", start,
                                   lambda: self._https_ready(self.scheduler_port, "/readyz"), 60)
        except BaseException:
            self.stop()
            raise

    def scheduler_metrics(self):
        """kube-scheduler's /metrics text (read with the admin token)."""
        return _get_text(f"https://127.0.0.1:{self.scheduler_port}/metrics", ssl._create_unverified_context())

    # -- the API ------------------------------------------------------------------------------------
    def request(self, method, path, body=None, content_type="application/json", token=ADMIN_TOKEN, ok=(200, 201, 202)):
        """One API call as the admin; the decoded JSON answer. Raises urllib.error.HTTPError
        (with the server's Status body in .body) for a status outside `ok`."""
        data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
        req = urllib.request.Request(self.url + path, data=data, method=method)
        req.add_header("Authorization", "Bearer " + token)
        req.add_header("Accept", "application/json")
        if data is not None:
            req.add_header("Content-Type", content_type)
        try:
            with urllib.request.urlopen(req, context=self._ssl(), timeout=30) as r:
                raw = r.read()
                if r.status not in ok:
                    raise urllib.error.HTTPError(req.full_url, r.status, raw.decode(errors="replace"), r.headers, None)
                return json.loads(raw) if raw else None
        except urllib.error.HTTPError as e:
            e.body = e.read().decode(errors="replace") if e.fp else ""
            raise

    def get(self, path):
        return self.request("GET", path)

    def request_text(self, path):
        """GET of a non-JSON path (e.g. /metrics) as the admin."""
        return _get_text(self.url + path, self._ssl())

    def create(self, path, obj):
        return self.request("POST", path, obj)

    def patch(self, path, patch, kind="merge"):
        return self.request("PATCH", path, patch, content_type=f"application/{kind}-patch+json")

    def add_fake_node(self, name, labels=None, capacity=None, annotations=None):
        """A Node kwok keeps Ready (heartbeats and a Lease) with `capacity` as its capacity and
        allocatable; the not-ready taint is removed by the controller-manager once kwok reports
        Ready."""
        cap = {"cpu": "64", "memory": "512Gi", "pods": "110"}
        cap.update(capacity or {})
        ann = {"kwok.x-k8s.io/node": "fake"}
        ann.update(annotations or {})
        node = {"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                                                      "type": "kwok", **(labels or {})},
                             "annotations": ann},
                "status": {"capacity": cap, "allocatable": cap}}
        self.create("/api/v1/nodes", node)
        # The API drops status on create; kwok's node-initialize keeps what is set here.
        self.patch(f"/api/v1/nodes/{name}/status", {"status": {"capacity": cap, "allocatable": cap}})

    def node_ready(self, name):
        n = self.get(f"/api/v1/nodes/{name}")
        ready = any(c["type"] == "Ready" and c["status"] == "True" for c in n["status"].get("conditions", []))
        return ready and not any(t["key"].startswith("node.kubernetes.io/") for t in n["spec"].get("taints", []))

    def kubectl(self, *args, input=None, check=True):
        """kubectl from .tools/kube (never one on PATH) as the admin."""
        r = subprocess.run([os.path.join(SOURCE, ".tools/kube/kubectl"), f"--kubeconfig={self.kubeconfig}", *args],
                           input=input, capture_output=True, text=True, timeout=120)
        if check and r.returncode != 0:
            raise RuntimeError(f"kubectl {' '.join(args)}: exit {r.returncode}\n{r.stderr}")
        return r


def _get_text(url, context):
    """GET `url` with the admin token; the body as text."""
    req = urllib.request.Request(url, headers={"Authorization": "Bearer " + ADMIN_TOKEN})
    with urllib.request.urlopen(req, context=context, timeout=30) as r:
        return r.read().decode()


def shipped_scheduler_config(name="main-scheduler-extender.yaml"):
    """A KubeSchedulerConfiguration from deploy/scheduler/: the file itself for the main-scheduler
    merge-in, or the one inside second-scheduler.yaml's ConfigMap."""
    with open(os.path.join(SOURCE, "deploy/scheduler", name)) as f:
        docs = [d for d in yaml.safe_load_all(f) if d]
    for d in docs:
        if d.get("kind") == "KubeSchedulerConfiguration":
            return d
        if d.get("kind") == "ConfigMap" and "config.yaml" in d.get("data", {}):
            return yaml.safe_load(d["data"]["config.yaml"])
    raise ValueError(f"deploy/scheduler/{name}: no KubeSchedulerConfiguration")


def kgpu_allocator_config():
    """deploy/scheduler/second-scheduler.yaml's profile sending every pod to kgpu, with
    kube-scheduler's DynamicResources plugin off: DRA claims allocated by kgpu's allocator alone."""
    cfg = shipped_scheduler_config("second-scheduler.yaml")
    for e in cfg["extenders"]:
        e.pop("managedResources", None)
    for p in cfg["profiles"]:
        p["plugins"] = {"multiPoint": {"disabled": [{"name": "DynamicResources"}]}}
    return cfg


def main():
    import argparse
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("command", choices=["up"])
    ap.add_argument("--scheduler-config", help="deploy/scheduler file name, or 'none'", default="none")
    ap.add_argument("--extender-url")
    a = ap.parse_args()
    with Cluster() as c:
        if a.scheduler_config != "none":
            c.start_scheduler(shipped_scheduler_config(a.scheduler_config), a.extender_url)
        print(f"cluster up: KUBECONFIG={c.kubeconfig} ({c.url}); logs in {c.dir}; Ctrl-C ends it", flush=True)
        try:
            while True:
                c.check()
                time.sleep(1)
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
