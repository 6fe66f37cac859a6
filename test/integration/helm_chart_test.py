#!/usr/bin/env python3
"""The Helm chart (deploy/helm/kgpu) with the real tools: `helm lint --strict` and `helm template`
over the default values and NVIDIA-style values files (deploy/helm/kgpu/ci/), every rendered
manifest through `kgpu lint` and kubectl v1.35's client- and server-side dry runs against the
API-server stand-in, the schema and the chart's own checks refusing bad values with the value's
name, what the values turn into, deploy/ being current with the chart, and the agent binary
started with the rendered DaemonSet's arguments and environment on a fake-NVML node.

Usage: helm_chart_test.py SOURCE_DIR BUILD_DIR HELM KUBECTL
"""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

import yaml

source, build, helm, kubectl = sys.argv[1:5]
chart = os.path.join(source, "deploy/helm/kgpu")
kgpu = os.path.join(build, "kgpu")
apiserver = os.path.join(build, "tools/apiserver/kgpu-apiserver")
fake_nvml = os.path.join(build, "tools/fake-nvml/libnvidia-ml.so.1")
work = tempfile.mkdtemp(prefix="kgpu-helm-")
APIS = ["--api-versions", "monitoring.coreos.com/v1", "--api-versions", "nfd.k8s-sigs.io/v1alpha1"]
failures = []


def check(ok, what, detail=""):
    """Records one check; `detail` is shown only when it fails."""
    print(("ok: " if ok else "FAIL: ") + what + ("" if ok or not detail else "\n    " + str(detail)), flush=True)
    if not ok:
        failures.append(what)


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, **kw)


def template(*args, apis=True):
    r = run([helm, "template", "kgpu", chart, "--namespace", "kgpu-system", *(APIS if apis else []), *args])
    return r


def docs(text):
    return [d for d in yaml.safe_load_all(text) if d]


def find(objs, kind, suffix=""):
    return [o for o in objs if o["kind"] == kind and o["metadata"]["name"].endswith(suffix)]


def container_env(ds):
    c = ds["spec"]["template"]["spec"]["containers"][0]
    return {e["name"]: e.get("value") for e in c.get("env", [])}


values_files = [None] + sorted(
    os.path.join(chart, "ci", f) for f in os.listdir(os.path.join(chart, "ci")) if f.endswith(".yaml"))
rendered = {}

# --- lint and template over every values file ------------------------------------------------------
for vf in values_files:
    name = os.path.basename(vf) if vf else "default values"
    extra = ["-f", vf] if vf else []
    r = run([helm, "lint", "--strict", chart, *extra])
    check(r.returncode == 0, f"helm lint --strict ({name})", r.stdout[-300:] + r.stderr[-300:])
    r = template(*extra)
    check(r.returncode == 0, f"helm template ({name})", r.stderr[-300:])
    path = os.path.join(work, (os.path.basename(vf) if vf else "default.yaml"))
    with open(path, "w") as f:
        f.write(r.stdout)
    rendered[name] = (path, docs(r.stdout))
    r = run([kgpu, "lint", path])
    check(r.returncode == 0 and "no findings" in r.stdout, f"kgpu lint ({name})", r.stdout.strip()[-400:])

# --- kubectl against the stand-in: discovery maps every kind, the server accepts every object --------
os.environ["KUBECONFIG"] = os.path.join(work, "kubeconfig")
server = subprocess.Popen(
    [apiserver, "--kubeconfig", os.environ["KUBECONFIG"], "--port-file", os.path.join(work, "port"),
     "--resource", "rbac.authorization.k8s.io/v1/clusterroles/ClusterRole/cluster",
     "--resource", "rbac.authorization.k8s.io/v1/clusterrolebindings/ClusterRoleBinding/cluster",
     "--resource", "rbac.authorization.k8s.io/v1/roles/Role",
     "--resource", "rbac.authorization.k8s.io/v1/rolebindings/RoleBinding",
     "--resource", "monitoring.coreos.com/v1/servicemonitors/ServiceMonitor",
     "--resource", "monitoring.coreos.com/v1/prometheusrules/PrometheusRule",
     "--resource", "nfd.k8s-sigs.io/v1alpha1/nodefeaturerules/NodeFeatureRule/cluster"],
    stdout=subprocess.DEVNULL, stderr=open(os.path.join(work, "apiserver.log"), "w"))
agent_runs = []  # every agent process started, killed at exit if still running
try:
    for _ in range(100):
        if os.path.exists(os.path.join(work, "port")) and os.path.getsize(os.path.join(work, "port")):
            break
        time.sleep(0.05)

    def k(*args):
        return run([kubectl, "--cache-dir", os.path.join(work, "cache"), *args])

    for ns in ("kgpu-system", "monitoring"):
        r = k("create", "namespace", ns)
        check(r.returncode == 0, f"kubectl create namespace {ns}", r.stderr.strip())
    for name, (path, objs) in rendered.items():
        for mode in ("client", "server"):
            r = k("create", f"--dry-run={mode}", "-f", path)
            created = len(re.findall(r"created \((server )?dry run\)", r.stdout))
            check(r.returncode == 0 and created == len(objs),
                  f"kubectl create --dry-run={mode} ({name}): {created}/{len(objs)} objects", r.stderr.strip()[-300:])
    # The plain manifests in deploy/ for real: namespace first, then the rest.
    plain = [os.path.join(source, "deploy", f) for f in ("daemonset.yaml", "sharing-config.yaml", "service.yaml",
                                                           "servicemonitor.yaml", "prometheus-rule.yaml",
                                                           "grafana-dashboard.yaml", "node-feature-rule.yaml",
                                                           "scheduler/second-scheduler.yaml", "dra/rbac.yaml",
                                                           "dra/deviceclasses.yaml")]
    r = k("apply", *sum((["-f", p] for p in plain), []))
    check(r.returncode == 0, "kubectl apply deploy/", r.stderr.strip()[-300:])
    r = k("get", "daemonset", "-n", "kgpu-system", "kgpu-agent", "-o", "json")
    check(r.returncode == 0 and json.loads(r.stdout)["metadata"]["name"] == "kgpu-agent", "the agent DaemonSet is served")

    # --- a release's life with the real Helm: install, upgrade, uninstall -------------------------------
    def h(*args):
        return run([helm, *args, "--namespace", "kgpu-helm"])

    def get(kind, name, ns="kgpu-helm"):
        r = k("get", kind, name, "-o", "json", *(["-n", ns] if ns else []))
        return json.loads(r.stdout) if r.returncode == 0 else None

    nvidia_values = os.path.join(chart, "ci/nvidia-device-plugin-values.yaml")
    r = h("install", "gpu", chart, "--create-namespace", "-f", nvidia_values, "--set",
          "serviceMonitor.enabled=true,prometheusRule.enabled=true")
    check(r.returncode == 0, "helm install", r.stdout[-300:] + r.stderr[-300:])
    ds = get("daemonset", "gpu-kgpu-agent")
    check(ds is not None and container_env(ds).get("MIG_STRATEGY") == "mixed", "helm install: the agent DaemonSet")
    check(get("nodefeaturerule", "gpu-kgpu-gpu-present", None) is not None and
          get("servicemonitor", "gpu-kgpu-agent") is not None and get("clusterrole", "gpu-kgpu-agent", None) is not None,
          "helm install: the NodeFeatureRule (NFD's API is served), ServiceMonitor and ClusterRole")
    r = h("upgrade", "gpu", chart, "-f", nvidia_values, "--set", "migStrategy=single")
    check(r.returncode == 0, "helm upgrade", r.stdout[-300:] + r.stderr[-300:])
    ds2 = get("daemonset", "gpu-kgpu-agent")
    check(ds2 is not None and container_env(ds2).get("MIG_STRATEGY") == "single" and
          ds2["metadata"]["uid"] == ds["metadata"]["uid"], "helm upgrade: the same DaemonSet, changed")
    check(get("servicemonitor", "gpu-kgpu-agent") is None and get("prometheusrule", "gpu-kgpu-gpu-alerts") is None,
          "helm upgrade: switched-off objects are deleted")
    r = h("uninstall", "gpu")
    check(r.returncode == 0, "helm uninstall", r.stdout[-300:] + r.stderr[-300:])
    r = k("get", "daemonsets,configmaps,secrets,serviceaccounts", "-n", "kgpu-helm", "-o", "name")
    left = [o for o in r.stdout.split() if "gpu" in o or "helm" in o]
    check(r.returncode == 0 and not left and get("clusterrole", "gpu-kgpu-agent", None) is None and
          get("nodefeaturerule", "gpu-kgpu-gpu-present", None) is None, "helm uninstall: nothing left", left)

    # --- bad values are refused, naming the value ----------------------------------------------------
    for args, needle in [
        (["--set", "migStrategy=mixd"], "/migStrategy"),
        (["--set", "devicePlugn.enabled=true"], "devicePlugn"),
        (["--set", "scheduler.mode=primary"], "/scheduler/mode"),
        (["--set", "scheduler.policy=Packing"], "/scheduler/policy"),
        (["--set", "draDriver.nodes=some"], "/draDriver/nodes"),
        (["--set", "draDriver.enabled=true,draDriver.nodes=all"], "one GPU API per node"),
        (["--set", "draDriver.enabled=true,cdi.root="], "draDriver.enabled needs cdi.root"),
        (["--set", "draDriver.driverName=GPU_nvidia"], "/draDriver/driverName"),
        (["--set", "config.name=x", "--set-string", "config.map.a=version: v1"], "config.name and config.map are exclusive"),
        (["--set-string", "config.map.bad/name=version: v1"], "'bad/name' does not match"),
        (["--set", "devicePlugin.enabled=false,gfd.enabled=false,dcgmExporter.enabled=false"], "nothing to install"),
        (["--set", "serviceMonitor.interval=15 seconds"], "/serviceMonitor/interval"),
        (["--set", "webConfig.probeScheme=https"], "/webConfig/probeScheme"),
        (["--set", "webConfig.secretName=Bad_Name"], "/webConfig/secretName"),
    ]:
        r = template(*args)
        check(r.returncode != 0 and needle in r.stderr, f"refused {args}, naming {needle!r}", r.stderr.strip()[-300:])

    # NVIDIA values with no meaning for kgpu install, and are named as ignored.
    r = run([helm, "install", "--dry-run=client", "kgpu", chart, "-n", "kgpu-system", "--set",
             "allowDefaultNamespace=true,compatWithCPUManager=true,gfd.securityContext.privileged=true",
             "--set", "nfd.master.config.extraLabelNs={nvidia.com}"])
    check(r.returncode == 0 and "Ignored (NVIDIA chart values with no meaning for kgpu; see the chart's README): "
          "allowDefaultNamespace, compatWithCPUManager, nfd, gfd.securityContext" in r.stdout,
          "NVIDIA's no-op values are accepted and listed as ignored", r.stdout[-400:] + r.stderr[-400:])

    # --- what the values turn into -----------------------------------------------------------------
    objs = rendered["default values"][1]
    ds = find(objs, "DaemonSet")[0]
    spec = ds["spec"]["template"]["spec"]
    terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]

    def selects(terms, labels):
        """Kubernetes' nodeSelectorTerms: any term whose expressions all hold (NotIn holds for a missing label)."""
        def holds(e):
            v = labels.get(e["key"])
            if e["operator"] == "In":
                return v in e["values"]
            if e["operator"] == "NotIn":
                return v not in e["values"]
            raise ValueError(e["operator"])
        return any(all(holds(e) for e in t["matchExpressions"]) for t in terms)

    gpu = {"nvidia.com/gpu.present": "true"}
    for labels, want in [
        ({}, False),
        (gpu, True),
        ({**gpu, "nvidia.com/gpu.deploy.device-plugin": "true", "nvidia.com/gpu.deploy.dcgm-exporter": "true"}, True),
        ({**gpu, "nvidia.com/gpu.deploy.operands": "false"}, False),
        ({**gpu, "nvidia.com/gpu.deploy.dcgm-exporter": "false"}, False),
        ({**gpu, "nvidia.com/gpu.deploy.gpu-feature-discovery": "paused-for-mig-change"}, False),
        ({**gpu, "kgpu.io/agent": "false"}, False),
        # Moving a node from NVIDIA's components to kgpu's: theirs off, kgpu's on.
        ({**gpu, "kgpu.io/agent": "true", "nvidia.com/gpu.deploy.device-plugin": "false",
          "nvidia.com/gpu.deploy.gpu-feature-discovery": "false", "nvidia.com/gpu.deploy.dcgm-exporter": "false"}, True),
        ({"kgpu.io/agent": "true"}, True),
        ({**gpu, "kgpu.io/agent": "true", "nvidia.com/gpu.deploy.device-plugin": "paused-for-mig-change"}, False),
    ]:
        check(selects(terms, labels) == want, f"default: a node labelled {labels} {'gets' if want else 'gets no'} agent")
    check(not find(objs, "ServiceMonitor") and not find(objs, "PrometheusRule") and not find(objs, "Deployment"),
          "default: no ServiceMonitor, PrometheusRule or scheduler")
    check(len(find(objs, "NodeFeatureRule")) == 1, "default: the NodeFeatureRule where NFD's API is served")
    r = template(apis=False)
    check(r.returncode == 0 and not find(docs(r.stdout), "NodeFeatureRule"), "no NodeFeatureRule where NFD's API is not served")
    nfr = find(objs, "NodeFeatureRule")[0]["spec"]["rules"][0]
    check(nfr["labels"] == {"nvidia.com/gpu.present": "true"} and
          nfr["matchFeatures"][0]["matchExpressions"]["vendor"]["value"] == ["10de"], "NodeFeatureRule: vendor 10de -> gpu.present")

    check(not find(rendered["default values"][1], "DeviceClass") and
          not find(rendered["default values"][1], "ClusterRole", "-dra"), "default: no DRA objects")
    objs = rendered["dra-values.yaml"][1]
    ds = find(objs, "DaemonSet")[0]
    c = ds["spec"]["template"]["spec"]["containers"][0]
    mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
    vols = {v["name"]: v for v in ds["spec"]["template"]["spec"]["volumes"]}
    check({"--gpu-api=dra", "--device-plugin=false", "--dra-driver-name=gpu.nvidia.com",
           "--dra-registry-dir=/var/lib/kubelet/plugins_registry", "--dra-plugins-dir=/var/lib/kubelet/plugins"}
          <= set(c["args"]), "draDriver: the agent's DRA flags", c["args"])
    check(all(mounts[n] == vols[n]["hostPath"]["path"] for n in ("dra-registry", "dra-plugins")) and
          "device-plugins" not in mounts, "draDriver: the kubelet's plugin directories at the host's paths", mounts)
    classes = {d["metadata"]["name"]: d["spec"] for d in find(objs, "DeviceClass")}
    check(sorted(classes) == ["gpu.nvidia.com", "mig.nvidia.com"] and
          all("extendedResourceName" not in v for v in classes.values()) and
          'device.attributes["gpu.nvidia.com"].type == "mig"' in classes["mig.nvidia.com"]["selectors"][0]["cel"]["expression"],
          "draDriver: NVIDIA's DeviceClasses", classes)
    role = find(objs, "ClusterRole", "-dra")[0]
    check(any("resourceslices" in r["resources"] and "create" in r["verbs"] for r in role["rules"]) and
          find(objs, "ClusterRoleBinding", "-dra")[0]["subjects"][0]["name"] == ds["spec"]["template"]["spec"]["serviceAccountName"],
          "draDriver: the slices' RBAC, bound to the agent's ServiceAccount")

    objs = rendered["nvidia-device-plugin-values.yaml"][1]
    ds = find(objs, "DaemonSet")[0]
    env = container_env(ds)
    spec = ds["spec"]["template"]["spec"]
    check(env.get("MIG_STRATEGY") == "mixed" and env.get("FAIL_ON_INIT_ERROR") == "false" and
          env.get("DEVICE_LIST_STRATEGY") == "cdi-cri" and env.get("DEVICE_ID_STRATEGY") == "uuid" and
          env.get("NVIDIA_DRIVER_ROOT") == "/run/nvidia/driver" and env.get("GFD_NO_TIMESTAMP") == "true" and
          env.get("GFD_SLEEP_INTERVAL") == "30s", "NVIDIA's values become NVIDIA's variables", env)
    check(env.get("CONFIG_FILE_SRCDIR") == "/available-configs" and env.get("DEFAULT_CONFIG") == "default" and
          env.get("FALLBACK_STRATEGIES") == "named" and env.get("NODE_LABEL") == "nvidia.com/device-plugin.config",
          "config.map: the agent chooses among the named configs by node label")
    cm = find(objs, "ConfigMap", "-configs")[0]
    check(sorted(cm["data"]) == ["default", "mig-mixed", "ts-8"], "config.map: one key per named config")
    check(spec.get("runtimeClassName") == "nvidia" and spec["nodeSelector"] == {"node-role.kubernetes.io/gpu": ""} and
          any(t.get("key") == "dedicated" for t in spec["tolerations"]), "runtimeClassName, nodeSelector, tolerations")
    vols = {v["name"]: v for v in spec["volumes"]}
    check(vols["driver-root"]["hostPath"]["path"] == "/run/nvidia/driver", "nvidiaDriverRoot mounts the driver root")
    check(vols["available-configs"]["configMap"]["name"] == cm["metadata"]["name"], "the configs are mounted")

    objs = rendered["external-config-values.yaml"][1]
    check(not find(objs, "ConfigMap"), "config.name: no ConfigMap of ours")
    ds = find(objs, "DaemonSet")[0]
    vols = {v["name"]: v for v in ds["spec"]["template"]["spec"]["volumes"]}
    check(vols["available-configs"]["configMap"]["name"] == "gpu-sharing-configs" and
          container_env(ds).get("DEFAULT_CONFIG") == "a100-ts", "config.name: the user's ConfigMap is mounted")

    objs = rendered["dcgm-exporter-values.yaml"][1]
    ds = find(objs, "DaemonSet")[0]
    args = ds["spec"]["template"]["spec"]["containers"][0]["args"]
    env = container_env(ds)
    mounts = {m["mountPath"] for m in ds["spec"]["template"]["spec"]["containers"][0]["volumeMounts"]}
    check("--device-plugin=false" in args and "--labels=false" in args and "--collect-interval=30000" in args,
          "metrics only: no device plugin, no labels", args)
    check("/var/lib/kubelet/device-plugins" not in mounts and
          "/etc/kubernetes/node-feature-discovery/features.d" not in mounts, "metrics only: no device-plugin or NFD mounts")
    check(env.get("DCGM_EXPORTER_COLLECTORS") == "/etc/kgpu/collectors/collectors.csv" and
          env.get("DCGM_EXPORTER_KUBERNETES_ENABLE_POD_LABELS") == "true" and env.get("KGPU_LOG_FORMAT") == "json",
          "collectors, pod labels and extraEnv")
    terms = ds["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    check(selects(terms, {**gpu, "nvidia.com/gpu.deploy.device-plugin": "false"}) and
          not selects(terms, {**gpu, "nvidia.com/gpu.deploy.dcgm-exporter": "false"}),
          "metrics only: only the dcgm-exporter opt-out applies")
    sm = find(objs, "ServiceMonitor")[0]
    ep = sm["spec"]["endpoints"][0]
    check(ep["interval"] == "30s" and ep["honorLabels"] is True and sm["metadata"]["labels"]["monitoring"] == "prometheus"
          and ep["relabelings"][-1]["targetLabel"] == "kubernetes_node", "serviceMonitor values")
    c = ds["spec"]["template"]["spec"]["containers"][0]
    vols = {v["name"]: v for v in ds["spec"]["template"]["spec"]["volumes"]}
    check(env.get("DCGM_EXPORTER_WEB_CONFIG_FILE") == "/etc/kgpu/web-config/web-config.yaml" and
          {"name": "web-config", "mountPath": "/etc/kgpu/web-config", "readOnly": True} in c["volumeMounts"] and
          vols["web-config"]["secret"]["secretName"] == "dcgm-exporter-web-config",
          "webConfig: the Secret is mounted and named to the agent")
    probe = c["livenessProbe"]["httpGet"]
    check(probe["scheme"] == "HTTPS" and probe["httpHeaders"][0]["name"] == "Authorization" and
          c["readinessProbe"]["httpGet"] == probe, "webConfig: the probes speak HTTPS with the given headers", probe)
    check(ep["scheme"] == "https" and ep["tlsConfig"]["ca"]["secret"]["key"] == "ca.crt" and
          ep["basicAuth"]["username"]["name"] == "prometheus-scrape", "webConfig: the ServiceMonitor scrapes over TLS")
    r = template("-f", os.path.join(chart, "ci/dcgm-exporter-values.yaml"), "--set", "webConfig.probeScheme=TCP")
    c = find(docs(r.stdout), "DaemonSet")[0]["spec"]["template"]["spec"]["containers"][0]
    check(c["livenessProbe"].get("tcpSocket") == {"port": "metrics"} and "httpGet" not in c["readinessProbe"],
          "webConfig.probeScheme=TCP: the probes only open the port")
    ds = find(rendered["default values"][1], "DaemonSet")[0]
    c = ds["spec"]["template"]["spec"]["containers"][0]
    check(c["livenessProbe"]["httpGet"] == {"path": "/health", "port": "metrics"} and
          "DCGM_EXPORTER_WEB_CONFIG_FILE" not in container_env(ds), "default: plain HTTP probes, no web config")

    objs = rendered["monitoring-scheduler-values.yaml"][1]
    dep = find(objs, "Deployment")[0]
    kc = dep["spec"]["template"]["spec"]["containers"]
    check([c["name"] for c in kc] == ["kgpu"] and dep["spec"]["replicas"] == 3 and "--policy=FGD" in kc[0]["args"] and
          kc[0]["image"].startswith("registry.example.com/kgpu/kgpu@sha256:"), "scheduler as an extender, image by digest")
    ext = find(objs, "ConfigMap", "-scheduler-extender")[0]
    conf = yaml.safe_load(ext["data"]["config.yaml"])
    check(conf["extenders"][0]["urlPrefix"] == "http://kgpu-scheduler.kgpu-system.svc:8888" and
          conf["extenders"][0]["nodeCacheCapable"] is True, "the main scheduler's extender configuration")
    dash = find(objs, "ConfigMap", "-grafana-dashboard")[0]
    check(dash["metadata"]["namespace"] == "monitoring" and dash["metadata"]["labels"]["grafana_dashboard"] == "1" and
          json.loads(dash["data"]["kgpu-gpu-dashboard.json"])["title"], "dashboard ConfigMap for the Grafana sidecar")
    pr = find(objs, "PrometheusRule")[0]
    with open(os.path.join(chart, "files/gpu-alerts.rules.yaml")) as f:
        check(pr["spec"] == yaml.safe_load(f) and pr["metadata"]["labels"]["release"] == "kube-prometheus-stack",
              "PrometheusRule: the promtool-tested rules, release label")

    # --- deploy/ is the chart's rendering --------------------------------------------------------------
    r = run([os.path.join(source, "scripts/render-deploy.sh"), "--check"], env={**os.environ, "HELM": helm})
    check(r.returncode == 0, "deploy/ matches the chart", r.stderr.strip()[-500:])

    # --- the agent accepts the rendered DaemonSet's arguments and environment ------------------------
    # Host paths are the DaemonSet's mount paths, moved under a temporary root; the port is any free one.
    root = os.path.join(work, "node")
    features = os.path.join(root, "etc/kubernetes/node-feature-discovery/features.d/gfd")

    def start_agent(ds, configs, extra_env=None, extra_args=()):
        """Starts kgpu as the DaemonSet's container would run; returns (process, port or None, log text)."""
        c = ds["spec"]["template"]["spec"]["containers"][0]
        moved = {m["mountPath"]: root + m["mountPath"] for m in c["volumeMounts"]}
        for path in moved.values():
            os.makedirs(path, exist_ok=True)
        for name, text in configs.items():
            with open(os.path.join(moved["/available-configs"], name), "w") as f:
                f.write(text)

        def relocate(v):
            for mount in sorted(moved, key=len, reverse=True):
                if v == mount or v.startswith(mount + "/"):
                    return moved[mount] + v[len(mount):]
            return v

        args = []
        for a in c["args"]:
            if a.startswith("--address="):
                a = "--address=127.0.0.1:0"
            elif "=" in a:
                flag, v = a.split("=", 1)
                a = flag + "=" + relocate(v)
            args.append(a)
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"),
               "KGPU_FAKE_NVML_CONFIG": os.path.join(source, "examples/nodes/dgx-h100.yaml"),
               "NODE_NAME": "gpu-node-1"}
        for e in c["env"]:
            if "value" in e:
                env[e["name"]] = relocate(str(e["value"]))
        env["NVIDIA_DRIVER_ROOT"] = "/"  # the host's driver root: the fake driver here
        env.update(extra_env or {})
        # Stand-ins for the GPUs' device nodes: a CDI spec is written only for devices whose node exists.
        dev_root = os.path.join(work, "devroot")
        os.makedirs(os.path.join(dev_root, "dev"), exist_ok=True)
        for name in [f"nvidia{i}" for i in range(8)] + ["nvidiactl"]:
            open(os.path.join(dev_root, "dev", name), "a").close()
        extra = ["--nvml-library", fake_nvml, "--pod-resources-socket", "", "--output-file", features,
                 "--device-plugin-dir", moved["/var/lib/kubelet/device-plugins"], "--dev-root", dev_root, *extra_args]
        log_path = os.path.join(work, f"agent-{len(agent_runs)}.log")
        log = open(log_path, "w")
        proc = subprocess.Popen([kgpu, *args, *extra], env=env, stdout=log, stderr=subprocess.STDOUT)
        agent_runs.append(proc)
        port = None
        deadline = time.time() + 20
        while time.time() < deadline and port is None and proc.poll() is None:
            m = re.search(r"listening on \S+ .*?port=(\d+)", open(log_path).read())
            if m:
                port = int(m.group(1))
            time.sleep(0.05)
        return proc, port, lambda: open(log_path).read()

    def stop_agent(proc):
        proc.send_signal(signal.SIGTERM)
        return proc.wait(timeout=10)

    def wait_for(predicate, seconds=20):
        deadline = time.time() + seconds
        while time.time() < deadline and not predicate():
            time.sleep(0.05)
        return predicate()

    objs = rendered["nvidia-device-plugin-values.yaml"][1]
    configs = find(objs, "ConfigMap", "-configs")[0]["data"]
    proc, port, log = start_agent(find(objs, "DaemonSet")[0], configs)
    check(port is not None, "the agent starts with the rendered arguments and environment", log()[-800:])
    if port:
        page = [""]

        def scraped():
            try:
                page[0] = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
            except OSError:
                pass
            return "DCGM_FI_DEV_GPU_TEMP{" in page[0]
        wait_for(scraped)
        # GPU 7 is MIG-enabled: one series per GPU instance, as dcgm-exporter, so GPUs are counted by index.
        check(len(set(re.findall(r'^DCGM_FI_DEV_GPU_TEMP\{gpu="(\d)"', page[0], re.M))) == 8, "the agent serves all 8 GPUs")
        check(wait_for(lambda: os.path.exists(features)) and "nvidia.com/gpu.product=" in open(features).read(),
              "the labels reach the features.d mount")
    check(stop_agent(proc) == 0, "the agent stops cleanly on SIGTERM")
    text = log()
    check(re.search(r"config selected.* config=default selected_by=default", text) is not None,
          "the agent chose the default named config (config.default, no API access here)", text[-600:])
    bad = [l for l in text.splitlines() if re.search(r"level=(error)|unknown (option|flag)", l)]
    check(not bad, "no errors in the agent's log", "\n".join(bad[:5]))

    # --- node labels across helm upgrade (kept) and helm uninstall (removed) ----------------------------
    # The release's DaemonSet as installed by Helm, a pod it owns (the stand-in runs no controllers),
    # and the agent with API access as that pod.
    r = h("install", "life", chart, "-f", nvidia_values)
    check(r.returncode == 0, "helm install (labels' life)", r.stderr[-300:])
    ds = get("daemonset", "life-kgpu-agent")
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "gpu-node-1"}}
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "life-kgpu-agent-7xk2p", "namespace": "kgpu-helm",
                        "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "life-kgpu-agent",
                                             "uid": ds["metadata"]["uid"], "controller": True}]},
           "spec": {"nodeName": "gpu-node-1", "containers": [{"name": "agent", "image": "kgpu"}]}}
    for obj in (node, pod):
        with open(os.path.join(work, "obj.json"), "w") as f:
            json.dump(obj, f)
        r = k("create", "-f", os.path.join(work, "obj.json"))
        check(r.returncode == 0, f"create {obj['kind']}", r.stderr[-300:])
    as_pod = {"POD_NAME": "life-kgpu-agent-7xk2p", "POD_NAMESPACE": "kgpu-helm"}
    api = ["--kubeconfig", os.environ["KUBECONFIG"]]
    live = "the agent can read its pod and its DaemonSet"
    proc, port, log = start_agent(ds, configs, as_pod, api)
    check(port is not None and wait_for(lambda: live in log()), "the agent runs as the release's pod", log()[-600:])
    r = h("upgrade", "life", chart, "-f", nvidia_values, "--set", "migStrategy=single")
    check(r.returncode == 0, "helm upgrade (labels' life)", r.stderr[-300:])
    check(stop_agent(proc) == 0 and os.path.exists(features), "helm upgrade: the node labels are kept", log()[-400:])
    check("node labels kept: DaemonSet kgpu-helm/life-kgpu-agent exists" in log(), "... and the agent says why")
    proc, port, log = start_agent(get("daemonset", "life-kgpu-agent"), configs, as_pod, api)
    check(port is not None and wait_for(lambda: live in log()) and os.path.exists(features),
          "the upgraded agent starts with the labels still there", log()[-600:])
    r = h("uninstall", "life")
    check(r.returncode == 0, "helm uninstall (labels' life)", r.stderr[-300:])
    check(stop_agent(proc) == 0 and not os.path.exists(features), "helm uninstall: the node labels are removed",
          log()[-400:])
    check("uninstall: DaemonSet kgpu-helm/life-kgpu-agent is gone" in log(), "... and the agent says why")
finally:
    for p in agent_runs:
        if p.poll() is None:
            p.kill()
    server.terminate()
    server.wait(timeout=10)
    if not failures:
        shutil.rmtree(work, ignore_errors=True)

if failures:
    print(f"{len(failures)} failure(s); files kept in {work}", file=sys.stderr)
    sys.exit(1)
print("all helm chart checks passed")
