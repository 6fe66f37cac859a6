#!/usr/bin/env python3
"""Writes the kgpu doctor fixtures: test/data/doctor/<case>/snapshot.json.

Each snapshot is what `kgpu doctor --collect` writes: a kubectl List of the cluster's objects (as
`kubectl get -o json` prints them), a kgpu.io/v1 SnapshotInfo and kgpu.io/v1 ContainerLog items.
Every case starts from the same healthy cluster (no findings) and breaks one thing. Event messages,
conditions and log lines follow what Kubernetes, the kubelet, containerd and the GPU Operator
print. Run it from anywhere; it rewrites every case.
"""
import copy
import hashlib
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
NOW = "2026-10-20T10:00:00Z"


def uid(*parts):
    h = hashlib.sha1("/".join(parts).encode()).hexdigest()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def suffix(*parts, n=5):
    alphabet = "bcdfghjklmnpqrstvwxz2456789"
    h = int(hashlib.sha1("/".join(parts).encode()).hexdigest(), 16)
    out = ""
    for _ in range(n):
        out += alphabet[h % len(alphabet)]
        h //= len(alphabet)
    return out


def meta(kind, name, ns=None, created="2026-10-01T08:00:00Z", labels=None, annotations=None, owner=None):
    m = {"name": name, "uid": uid(kind, ns or "", name), "resourceVersion": str(100000 + len(name) * 37),
         "creationTimestamp": created}
    if ns:
        m["namespace"] = ns
    if labels:
        m["labels"] = labels
    if annotations:
        m["annotations"] = annotations
    if owner:
        okind, oname, ons = owner
        m["ownerReferences"] = [{"apiVersion": "apps/v1" if okind in ("ReplicaSet", "Deployment", "StatefulSet", "DaemonSet")
                                 else "batch/v1", "kind": okind, "name": oname, "uid": uid(okind, ons or "", oname),
                                 "controller": True, "blockOwnerDeletion": True}]
    return m


GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
DEFAULT_TOLERATIONS = [
    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
]


def node(name, gpus=0, product=None, tainted=True, cpu="16", memory="64Gi", extra_labels=None, kernel="6.8.0-1019-aws",
         allocatable_gpu=None, replicas=None, cuda=(12, 8), driver="570.124.06"):
    labels = {
        "kubernetes.io/arch": "amd64", "kubernetes.io/os": "linux", "kubernetes.io/hostname": name,
        "node.kubernetes.io/instance-type": "g6.4xlarge" if product and "L4" in product else
        ("p4de.24xlarge" if product else "m6i.4xlarge"),
        "topology.kubernetes.io/zone": "us-east-1a",
    }
    if product:
        labels.update({
            "feature.node.kubernetes.io/pci-10de.present": "true",
            "nvidia.com/gpu.present": "true",
            "nvidia.com/gpu.product": product,
            "nvidia.com/gpu.count": str(gpus),
            "nvidia.com/gpu.memory": "23034" if "L4" in product else "81920",
            "nvidia.com/gpu.family": "ada-lovelace" if "L4" in product else "ampere",
            "nvidia.com/cuda.driver-version.major": str(cuda[0]),
            "nvidia.com/cuda.driver-version.minor": str(cuda[1]),
            "nvidia.com/cuda.driver-version.full": driver,
            "nvidia.com/gpu.deploy.driver": "true",
            "nvidia.com/gpu.deploy.device-plugin": "true",
            "nvidia.com/gpu.deploy.container-toolkit": "true",
            "nvidia.com/gpu.deploy.operator-validator": "true",
            "nvidia.com/mig.capable": "false" if "L4" in product else "true",
        })
        if replicas:
            labels["nvidia.com/gpu.replicas"] = str(replicas)
            labels["nvidia.com/gpu.sharing-strategy"] = "time-slicing"
    labels.update(extra_labels or {})
    capacity = {"cpu": cpu, "ephemeral-storage": "203070420Ki", "hugepages-1Gi": "0", "hugepages-2Mi": "0",
                "memory": memory, "pods": "110"}
    allocatable = {"cpu": str(int(cpu) * 1000 - 110) + "m", "ephemeral-storage": "186053255035",
                   "hugepages-1Gi": "0", "hugepages-2Mi": "0", "memory": memory, "pods": "110"}
    if product:
        n = gpus * (replicas or 1)
        capacity["nvidia.com/gpu"] = str(n)
        allocatable["nvidia.com/gpu"] = str(n if allocatable_gpu is None else allocatable_gpu)
        if allocatable_gpu == "absent":
            del capacity["nvidia.com/gpu"]
            del allocatable["nvidia.com/gpu"]
    spec = {"providerID": f"aws:///us-east-1a/i-0{suffix(name, n=16)}"}
    if product and tainted:
        spec["taints"] = [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
    return {
        "apiVersion": "v1", "kind": "Node", "metadata": meta("Node", name, labels=labels, created="2026-09-15T07:12:44Z"),
        "spec": spec,
        "status": {
            "capacity": capacity, "allocatable": allocatable,
            "conditions": [
                {"type": "MemoryPressure", "status": "False", "lastHeartbeatTime": NOW, "lastTransitionTime": "2026-09-15T07:13:10Z",
                 "reason": "KubeletHasSufficientMemory", "message": "kubelet has sufficient memory available"},
                {"type": "DiskPressure", "status": "False", "lastHeartbeatTime": NOW, "lastTransitionTime": "2026-09-15T07:13:10Z",
                 "reason": "KubeletHasNoDiskPressure", "message": "kubelet has no disk pressure"},
                {"type": "PIDPressure", "status": "False", "lastHeartbeatTime": NOW, "lastTransitionTime": "2026-09-15T07:13:10Z",
                 "reason": "KubeletHasSufficientPID", "message": "kubelet has sufficient PID available"},
                {"type": "Ready", "status": "True", "lastHeartbeatTime": NOW, "lastTransitionTime": "2026-09-15T07:14:02Z",
                 "reason": "KubeletReady", "message": "kubelet is posting ready status"},
            ],
            "addresses": [{"type": "InternalIP", "address": "10.0.%d.%d" % (len(name), sum(map(ord, name)) % 250)},
                          {"type": "Hostname", "address": name}],
            "nodeInfo": {"architecture": "amd64", "bootID": uid("boot", name), "containerRuntimeVersion": "containerd://2.1.4",
                         "kernelVersion": kernel, "kubeProxyVersion": "", "kubeletVersion": "v1.37.1",
                         "machineID": suffix(name, n=32), "operatingSystem": "linux",
                         "osImage": "Ubuntu 24.04.3 LTS", "systemUUID": uid("sys", name)},
        },
    }


def container_status(name, image, state="running", reason=None, message=None, restarts=0, exit_code=None,
                     started="2026-10-01T08:05:00Z", last=None):
    st = {"name": name, "image": image, "imageID": image.split(":")[0] + "@sha256:" + hashlib.sha256(image.encode()).hexdigest(),
          "containerID": "containerd://" + hashlib.sha256((name + image).encode()).hexdigest(),
          "ready": state == "running", "restartCount": restarts, "started": state == "running"}
    if state == "running":
        st["state"] = {"running": {"startedAt": started}}
    elif state == "waiting":
        st["state"] = {"waiting": {"reason": reason, **({"message": message} if message else {})}}
        st.pop("containerID")
    else:
        st["state"] = {"terminated": {"exitCode": exit_code if exit_code is not None else 0, "reason": reason or "Completed",
                                      "startedAt": started, "finishedAt": started.replace("08:05", "08:06"),
                                      **({"message": message} if message else {})}}
    st["lastState"] = last or {}
    return st


def pod(name, ns, containers, node_name=None, phase="Running", owner=None, labels=None, tolerations=None,
        node_selector=None, created="2026-10-01T08:00:00Z", statuses=None, init_containers=None, init_statuses=None,
        conditions=None, reason=None, message=None, priority_class=None, resource_claims=None, claim_statuses=None,
        restart_policy="Always"):
    spec = {"containers": containers, "dnsPolicy": "ClusterFirst", "enableServiceLinks": True,
            "preemptionPolicy": "PreemptLowerPriority", "priority": 0, "restartPolicy": restart_policy,
            "schedulerName": "default-scheduler", "securityContext": {}, "serviceAccount": "default",
            "serviceAccountName": "default", "terminationGracePeriodSeconds": 30,
            "tolerations": (tolerations or []) + DEFAULT_TOLERATIONS}
    if node_name:
        spec["nodeName"] = node_name
    if node_selector:
        spec["nodeSelector"] = node_selector
    if init_containers:
        spec["initContainers"] = init_containers
    if priority_class:
        spec["priorityClassName"] = priority_class
    if resource_claims:
        spec["resourceClaims"] = resource_claims
    status = {"phase": phase, "qosClass": "Burstable"}
    if conditions is None:
        if node_name and phase == "Running":
            conditions = [
                {"type": "PodReadyToStartContainers", "status": "True", "lastTransitionTime": created},
                {"type": "Initialized", "status": "True", "lastTransitionTime": created},
                {"type": "Ready", "status": "True", "lastTransitionTime": created},
                {"type": "ContainersReady", "status": "True", "lastTransitionTime": created},
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": created},
            ]
        else:
            conditions = []
    status["conditions"] = conditions
    if node_name:
        status["hostIP"] = "10.0.1.17"
        status["podIP"] = "192.168.%d.%d" % (len(name) % 200, sum(map(ord, name)) % 250)
        status["startTime"] = created
    if statuses is not None:
        status["containerStatuses"] = statuses
    elif node_name and phase == "Running":
        status["containerStatuses"] = [container_status(c["name"], c["image"], started=created) for c in containers]
    if init_statuses is not None:
        status["initContainerStatuses"] = init_statuses
    if reason:
        status["reason"] = reason
    if message:
        status["message"] = message
    if claim_statuses:
        status["resourceClaimStatuses"] = claim_statuses
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": meta("Pod", name, ns, created=created, labels=labels, owner=owner), "spec": spec, "status": status}


def ctr(name, image, gpu=None, cpu="1", memory="2Gi", limits_cpu=None, limits_memory=None, env=None, command=None,
        startup=False, ports=None, requests_gpu=None):
    c = {"name": name, "image": image, "imagePullPolicy": "IfNotPresent",
         "resources": {"requests": {"cpu": cpu, "memory": memory}},
         "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File"}
    limits = {}
    if limits_cpu:
        limits["cpu"] = limits_cpu
    if limits_memory:
        limits["memory"] = limits_memory
    if gpu is not None:
        limits["nvidia.com/gpu"] = gpu
        c["resources"]["requests"]["nvidia.com/gpu"] = gpu if requests_gpu is None else requests_gpu
    if limits:
        c["resources"]["limits"] = limits
    if env:
        c["env"] = env
    if command:
        c["command"] = command
    if ports:
        c["ports"] = [{"containerPort": p, "name": "http", "protocol": "TCP"} for p in ports]
    if startup:
        c["startupProbe"] = {"httpGet": {"path": "/health", "port": 8000, "scheme": "HTTP"}, "periodSeconds": 10,
                             "failureThreshold": 60, "successThreshold": 1, "timeoutSeconds": 1}
        c["readinessProbe"] = {"httpGet": {"path": "/health", "port": 8000, "scheme": "HTTP"}, "periodSeconds": 5,
                               "failureThreshold": 3, "successThreshold": 1, "timeoutSeconds": 1}
    return c


def event(ns, kind, name, reason, message, type_="Warning", count=1, first="2026-10-20T09:10:00Z",
          last="2026-10-20T09:58:00Z", component="default-scheduler", host=None, api="v1"):
    ename = f"{name}.{hashlib.sha1((reason + message).encode()).hexdigest()[:16]}"
    e = {"apiVersion": "v1", "kind": "Event", "metadata": meta("Event", ename, ns or "default", created=first),
         "involvedObject": {"apiVersion": api, "kind": kind, "name": name, "uid": uid(kind, ns or "", name),
                            "resourceVersion": "123456"},
         "reason": reason, "message": message, "type": type_, "count": count, "firstTimestamp": first,
         "lastTimestamp": last, "source": {"component": component}, "reportingComponent": component,
         "reportingInstance": host or ""}
    if ns:
        e["involvedObject"]["namespace"] = ns
    if host:
        e["source"]["host"] = host
    return e


def log(ns, pod_name, container, text, previous=False):
    return {"apiVersion": "kgpu.io/v1", "kind": "ContainerLog", "metadata": {"namespace": ns, "name": pod_name},
            "container": container, "previous": previous, "text": text}


def operator_pods(node_name, validator_fail=None, driver_state=None, plugin_waiting=False):
    """The GPU Operator's per-node pods. validator_fail: (stage, reason) of the first failing init container."""
    s = lambda comp: f"{comp}-{suffix(comp, node_name)}"
    ds = lambda comp: ("DaemonSet", comp, "gpu-operator")
    pods = []
    drv = ctr("nvidia-driver-ctr", "nvcr.io/nvidia/driver:570.124.06-ubuntu24.04", cpu="100m", memory="256Mi")
    if driver_state is None:
        pods.append(pod(s("nvidia-driver-daemonset"), "gpu-operator", [drv], node_name, owner=ds("nvidia-driver-daemonset"),
                        labels={"app": "nvidia-driver-daemonset", "app.kubernetes.io/component": "nvidia-driver"},
                        created="2026-09-15T07:20:00Z"))
    else:
        pods.append(pod(s("nvidia-driver-daemonset"), "gpu-operator", [drv], node_name, owner=ds("nvidia-driver-daemonset"),
                        labels={"app": "nvidia-driver-daemonset", "app.kubernetes.io/component": "nvidia-driver"},
                        created="2026-09-15T07:20:00Z", statuses=[driver_state],
                        conditions=[{"type": "Ready", "status": "False", "lastTransitionTime": "2026-10-20T08:40:00Z",
                                     "reason": "ContainersNotReady",
                                     "message": "containers with unready status: [nvidia-driver-ctr]"}]))
    tk = ctr("nvidia-container-toolkit-ctr", "nvcr.io/nvidia/k8s/container-toolkit:v1.17.8-ubuntu20.04", cpu="50m", memory="64Mi")
    pods.append(pod(s("nvidia-container-toolkit-daemonset"), "gpu-operator", [tk], node_name,
                    owner=ds("nvidia-container-toolkit-daemonset"), labels={"app": "nvidia-container-toolkit-daemonset"},
                    created="2026-09-15T07:20:00Z"))
    dp = ctr("nvidia-device-plugin", "nvcr.io/nvidia/k8s-device-plugin:v0.17.4", cpu="50m", memory="64Mi")
    if plugin_waiting:
        pods.append(pod(s("nvidia-device-plugin-daemonset"), "gpu-operator", [dp], node_name, phase="Pending",
                        owner=ds("nvidia-device-plugin-daemonset"), labels={"app": "nvidia-device-plugin-daemonset"},
                        created="2026-09-15T07:20:00Z",
                        init_containers=[ctr("toolkit-validation", "nvcr.io/nvidia/cloud-native/gpu-operator-validator:v26.7.2",
                                             cpu="10m", memory="16Mi")],
                        init_statuses=[container_status("toolkit-validation",
                                                        "nvcr.io/nvidia/cloud-native/gpu-operator-validator:v26.7.2",
                                                        state="running")],
                        statuses=[container_status("nvidia-device-plugin", "nvcr.io/nvidia/k8s-device-plugin:v0.17.4",
                                                   state="waiting", reason="PodInitializing")],
                        conditions=[{"type": "Initialized", "status": "False", "lastTransitionTime": "2026-10-20T08:40:00Z",
                                     "reason": "ContainersNotInitialized",
                                     "message": "containers with incomplete status: [toolkit-validation]"}]))
    else:
        pods.append(pod(s("nvidia-device-plugin-daemonset"), "gpu-operator", [dp], node_name,
                        owner=ds("nvidia-device-plugin-daemonset"), labels={"app": "nvidia-device-plugin-daemonset"},
                        created="2026-09-15T07:20:00Z"))
    val_image = "nvcr.io/nvidia/cloud-native/gpu-operator-validator:v26.7.2"
    stages = ["driver-validation", "toolkit-validation", "cuda-validation", "plugin-validation"]
    inits, init_st = [], []
    failed = False
    for st in stages:
        inits.append(ctr(st, val_image, cpu="10m", memory="16Mi"))
        if validator_fail and st == validator_fail[0]:
            init_st.append(container_status(st, val_image, state="waiting", reason=validator_fail[1], restarts=37,
                                            message=f"back-off 5m0s restarting failed container={st} pod=" + s("nvidia-operator-validator")
                                            if validator_fail[1] == "CrashLoopBackOff" else None))
            failed = True
        elif failed:
            init_st.append(container_status(st, val_image, state="waiting", reason="PodInitializing"))
        else:
            init_st.append(container_status(st, val_image, state="terminated", reason="Completed", exit_code=0,
                                            started="2026-09-15T07:25:00Z"))
    main = ctr("nvidia-operator-validator", val_image, cpu="10m", memory="16Mi")
    if failed:
        pods.append(pod(s("nvidia-operator-validator"), "gpu-operator", [main], node_name, phase="Pending",
                        owner=ds("nvidia-operator-validator"), labels={"app": "nvidia-operator-validator"},
                        created="2026-09-15T07:20:00Z", init_containers=inits, init_statuses=init_st,
                        statuses=[container_status("nvidia-operator-validator", val_image, state="waiting", reason="PodInitializing")],
                        conditions=[{"type": "Initialized", "status": "False", "lastTransitionTime": "2026-10-20T08:40:00Z",
                                     "reason": "ContainersNotInitialized",
                                     "message": f"containers with incomplete status: [{validator_fail[0]}]"}]))
    else:
        pods.append(pod(s("nvidia-operator-validator"), "gpu-operator", [main], node_name,
                        owner=ds("nvidia-operator-validator"), labels={"app": "nvidia-operator-validator"},
                        created="2026-09-15T07:20:00Z", init_containers=inits, init_statuses=init_st))
        pods.append(pod(s("nvidia-cuda-validator"), "gpu-operator",
                        [ctr("nvidia-cuda-validator", val_image, cpu="10m", memory="16Mi")], node_name, phase="Succeeded",
                        labels={"app": "nvidia-cuda-validator"}, created="2026-09-15T07:26:00Z", restart_policy="OnFailure",
                        statuses=[container_status("nvidia-cuda-validator", val_image, state="terminated", reason="Completed",
                                                   exit_code=0, started="2026-09-15T07:26:00Z")]))
    pods.append(pod(s("nvidia-dcgm-exporter"), "gpu-operator",
                    [ctr("nvidia-dcgm-exporter", "nvcr.io/nvidia/k8s/dcgm-exporter:4.2.3-4.3.1-ubuntu22.04", cpu="50m",
                         memory="128Mi", ports=[9400])], node_name, owner=ds("nvidia-dcgm-exporter"),
                    labels={"app": "nvidia-dcgm-exporter"}, created="2026-09-15T07:20:00Z"))
    return pods


def workload(kind, name, ns, template_spec, labels, replicas=1, strategy=None, extra_spec=None, created="2026-10-01T08:00:00Z"):
    spec = {"selector": {"matchLabels": labels}, "template": {"metadata": {"labels": labels}, "spec": template_spec}}
    if kind in ("Deployment", "StatefulSet", "ReplicaSet"):
        spec["replicas"] = replicas
    if kind == "Deployment":
        spec["strategy"] = strategy or {"type": "Recreate"}
    spec.update(extra_spec or {})
    return {"apiVersion": "apps/v1", "kind": kind, "metadata": meta(kind, name, ns, created=created, labels=labels),
            "spec": spec, "status": {"replicas": replicas, "observedGeneration": 1}}


VLLM_IMAGE = "vllm/vllm-openai:v0.32.0"


def vllm_template(node_selector=None):
    t = {"containers": [ctr("vllm", VLLM_IMAGE, gpu="1", cpu="2", memory="8Gi", limits_cpu="4", limits_memory="16Gi",
                            command=["vllm", "serve"], startup=True, ports=[8000])],
         "tolerations": [GPU_TOLERATION], "priorityClassName": "gpu-production"}
    if node_selector:
        t["nodeSelector"] = node_selector
    return t


def healthy():
    items = []
    items.append({"apiVersion": "kgpu.io/v1", "kind": "SnapshotInfo", "metadata": {"name": "snapshot"},
                  "collectedAt": NOW, "kubectlVersion": "v1.37.1", "context": "prod-us-east-1", "errors": []})
    for ns in ["default", "kube-system", "kube-public", "gpu-operator", "llm", "team-a", "monitoring"]:
        labels = {"kubernetes.io/metadata.name": ns}
        if ns == "gpu-operator":
            labels["pod-security.kubernetes.io/enforce"] = "privileged"
        items.append({"apiVersion": "v1", "kind": "Namespace", "metadata": meta("Namespace", ns, labels=labels),
                      "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}})
    items.append(node("ip-10-0-1-12", cpu="16", memory="64Gi"))
    items.append(node("gpu-l4-1", gpus=1, product="NVIDIA-L4"))
    items.append(node("gpu-l4-2", gpus=1, product="NVIDIA-L4"))
    items.append(node("gpu-a100-1", gpus=4, product="NVIDIA-A100-SXM4-80GB", cpu="96", memory="1152Gi"))
    for n in ["gpu-l4-1", "gpu-l4-2", "gpu-a100-1"]:
        items += operator_pods(n)
    # System workloads on the CPU node.
    items.append(pod("coredns-5d78c9869d-" + suffix("coredns"), "kube-system",
                     [ctr("coredns", "registry.k8s.io/coredns/coredns:v1.12.1", cpu="100m", memory="70Mi")], "ip-10-0-1-12",
                     owner=("ReplicaSet", "coredns-5d78c9869d", "kube-system"), labels={"k8s-app": "kube-dns"}))
    items.append(pod("gpu-operator-6b8c9d7f5-" + suffix("gpu-operator"), "gpu-operator",
                     [ctr("gpu-operator", "nvcr.io/nvidia/gpu-operator:v26.7.2", cpu="200m", memory="200Mi")],
                     "ip-10-0-1-12", owner=("ReplicaSet", "gpu-operator-6b8c9d7f5", "gpu-operator"),
                     labels={"app": "gpu-operator"}))
    # llm: the guide's vLLM Deployment, one replica on gpu-l4-1.
    lbl = {"app": "qwen-vllm"}
    dep = workload("Deployment", "qwen-vllm", "llm", vllm_template(), lbl)
    items.append(dep)
    rs_labels = dict(lbl, **{"pod-template-hash": "5d8f7c9b6"})
    rs = workload("ReplicaSet", "qwen-vllm-5d8f7c9b6", "llm", vllm_template(), rs_labels)
    rs["metadata"]["ownerReferences"] = meta("x", "x", owner=("Deployment", "qwen-vllm", "llm"))["ownerReferences"]
    items.append(rs)
    items.append(pod("qwen-vllm-5d8f7c9b6-" + suffix("qwen"), "llm", vllm_template()["containers"], "gpu-l4-1",
                     owner=("ReplicaSet", "qwen-vllm-5d8f7c9b6", "llm"), labels=rs_labels, tolerations=[GPU_TOLERATION],
                     priority_class="gpu-production", created="2026-10-18T12:00:00Z"))
    items.append({"apiVersion": "v1", "kind": "Service", "metadata": meta("Service", "qwen-vllm", "llm", labels=lbl),
                  "spec": {"selector": lbl, "ports": [{"name": "http", "port": 80, "targetPort": 8000, "protocol": "TCP"}],
                           "type": "ClusterIP", "clusterIP": "172.20.41.7"}})
    items.append({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                  "metadata": meta("PodDisruptionBudget", "qwen-vllm", "llm"),
                  "spec": {"maxUnavailable": 1, "selector": {"matchLabels": lbl}},
                  "status": {"currentHealthy": 1, "desiredHealthy": 0, "disruptionsAllowed": 1, "expectedPods": 1}})
    for ns, hard, used in [("llm", "2", "1"), ("team-a", "4", "0")]:
        items.append({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": meta("ResourceQuota", "gpu-quota", ns),
                      "spec": {"hard": {"requests.nvidia.com/gpu": hard}},
                      "status": {"hard": {"requests.nvidia.com/gpu": hard}, "used": {"requests.nvidia.com/gpu": used}}})
    # team-a: a finished training Job (its pod Completed: it holds nothing).
    job_tpl = {"containers": [ctr("train", "nvcr.io/nvidia/pytorch:25.01-py3", gpu="2", cpu="8", memory="64Gi")],
               "restartPolicy": "Never", "tolerations": [GPU_TOLERATION], "priorityClassName": "gpu-dev"}
    items.append({"apiVersion": "batch/v1", "kind": "Job",
                  "metadata": meta("Job", "train-resnet", "team-a", labels={"app": "train-resnet"}),
                  "spec": {"backoffLimit": 2, "completions": 1, "parallelism": 1, "ttlSecondsAfterFinished": 86400,
                           "activeDeadlineSeconds": 43200,
                           "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": uid("Job", "team-a", "train-resnet")}},
                           "template": {"metadata": {"labels": {"app": "train-resnet"}}, "spec": job_tpl}},
                  "status": {"succeeded": 1, "startTime": "2026-10-19T22:00:00Z", "completionTime": "2026-10-20T03:12:00Z",
                             "conditions": [{"type": "Complete", "status": "True", "lastTransitionTime": "2026-10-20T03:12:00Z"}]}})
    items.append(pod("train-resnet-" + suffix("train-resnet"), "team-a", job_tpl["containers"], "gpu-a100-1",
                     phase="Succeeded", owner=("Job", "train-resnet", "team-a"), labels={"app": "train-resnet"},
                     tolerations=[GPU_TOLERATION], created="2026-10-19T22:00:00Z", restart_policy="Never",
                     statuses=[container_status("train", "nvcr.io/nvidia/pytorch:25.01-py3", state="terminated",
                                                reason="Completed", exit_code=0, started="2026-10-19T22:00:30Z")],
                     conditions=[{"type": "Ready", "status": "False", "lastTransitionTime": "2026-10-20T03:12:00Z",
                                  "reason": "PodCompleted"}]))
    for name, value in [("gpu-production", 100000), ("gpu-dev", 1000)]:
        items.append({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                      "metadata": meta("PriorityClass", name), "value": value, "globalDefault": False,
                      "preemptionPolicy": "PreemptLowerPriority", "description": name})
    items.append({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                  "metadata": meta("PriorityClass", "system-cluster-critical"), "value": 2000000000})
    items.append({"apiVersion": "v1", "kind": "Service",
                  "metadata": meta("Service", "nvidia-dcgm-exporter", "gpu-operator", labels={"app": "nvidia-dcgm-exporter"}),
                  "spec": {"selector": {"app": "nvidia-dcgm-exporter"}, "type": "ClusterIP", "clusterIP": "172.20.9.14",
                           "ports": [{"name": "gpu-metrics", "port": 9400, "targetPort": 9400, "protocol": "TCP"}]}})
    items.append({"apiVersion": "monitoring.coreos.com/v1", "kind": "ServiceMonitor",
                  "metadata": meta("ServiceMonitor", "nvidia-dcgm-exporter", "gpu-operator", labels={"app": "nvidia-dcgm-exporter"}),
                  "spec": {"endpoints": [{"path": "/metrics", "port": "gpu-metrics"}],
                           "jobLabel": "app", "namespaceSelector": {"matchNames": ["gpu-operator"]},
                           "selector": {"matchLabels": {"app": "nvidia-dcgm-exporter"}}}})
    items.append({"apiVersion": "monitoring.coreos.com/v1", "kind": "PrometheusRule",
                  "metadata": meta("PrometheusRule", "gpu-alerts", "gpu-operator"),
                  "spec": {"groups": [{"name": "gpu.rules", "rules": [
                      {"alert": "GPUHighTemperature", "expr": "DCGM_FI_DEV_GPU_TEMP > 85", "for": "10m",
                       "labels": {"severity": "warning"}},
                      {"alert": "GPUMemoryNearlyFull",
                       "expr": "DCGM_FI_DEV_FB_USED / (DCGM_FI_DEV_FB_USED + DCGM_FI_DEV_FB_FREE) > 0.95", "for": "15m",
                       "labels": {"severity": "warning"}},
                      {"alert": "GPUXidError", "expr": "DCGM_FI_DEV_XID_ERRORS > 0", "for": "1m",
                       "labels": {"severity": "critical"}},
                      {"alert": "GPUAllocatedButIdle", "expr": "avg_over_time(DCGM_FI_DEV_GPU_UTIL{exported_pod!=\"\"}[2h]) < 5",
                       "for": "30m", "labels": {"severity": "info"}}]}]}})
    items.append(event("llm", "Pod", dep and "qwen-vllm-5d8f7c9b6-" + suffix("qwen"), "Scheduled",
                       "Successfully assigned llm/qwen-vllm-5d8f7c9b6-%s to gpu-l4-1" % suffix("qwen"), type_="Normal",
                       first="2026-10-18T12:00:00Z", last="2026-10-18T12:00:00Z"))
    return items


def find(items, kind, name):
    for it in items:
        if it["kind"] == kind and it["metadata"]["name"] == name:
            return it
    raise KeyError(name)


def find_prefix(items, kind, prefix, node_name=None):
    for it in items:
        if it["kind"] == kind and it["metadata"]["name"].startswith(prefix) and (
                node_name is None or it["spec"].get("nodeName") == node_name):
            return it
    raise KeyError(prefix)


def pending_pod(name, ns, containers, node_selector=None, tolerations=None, owner=None, labels=None, message=None,
                resource_claims=None, claim_statuses=None):
    cond = [{"type": "PodScheduled", "status": "False", "lastProbeTime": None, "lastTransitionTime": "2026-10-20T09:10:00Z",
             "reason": "Unschedulable", "message": message}]
    return pod(name, ns, containers, phase="Pending", node_selector=node_selector, tolerations=tolerations, owner=owner,
               labels=labels, created="2026-10-20T09:10:00Z", conditions=cond, resource_claims=resource_claims,
               claim_statuses=claim_statuses)


PREEMPT = " preemption: 0/4 nodes are available: 2 No preemption victims found for incoming pod, 2 Preemption is not helpful for scheduling."

CASES = {}


def case(fn):
    CASES[fn.__name__.replace("_", "-")] = fn
    return fn


@case
def insufficient_gpu():
    items = healthy()
    # A notebook holds gpu-l4-2 for nine days.
    nb_tpl = {"containers": [ctr("notebook", "quay.io/jupyter/pytorch-notebook:cuda12-2025-10-13", gpu="1", cpu="2",
                                 memory="8Gi", ports=[8888])], "tolerations": [GPU_TOLERATION]}
    items.append(workload("StatefulSet", "jupyter-alice", "team-a", nb_tpl, {"app": "jupyter-alice"}))
    items.append(pod("jupyter-alice-0", "team-a", nb_tpl["containers"], "gpu-l4-2", owner=("StatefulSet", "jupyter-alice", "team-a"),
                     labels={"app": "jupyter-alice", "statefulset.kubernetes.io/pod-name": "jupyter-alice-0"},
                     tolerations=[GPU_TOLERATION], created="2026-10-11T09:30:00Z"))
    msg = "0/4 nodes are available: 2 Insufficient nvidia.com/gpu, 2 node(s) didn't match Pod's node affinity/selector." + PREEMPT
    items.append(pending_pod("train-bert", "team-a", [ctr("train", "nvcr.io/nvidia/pytorch:25.01-py3", gpu="1", cpu="4", memory="16Gi")],
                             node_selector={"nvidia.com/gpu.product": "NVIDIA-L4"}, tolerations=[GPU_TOLERATION], message=msg))
    items.append(event("team-a", "Pod", "train-bert", "FailedScheduling", msg, count=14))
    return items


def time_sliced(items, replicas=4):
    for n in ["gpu-l4-1", "gpu-l4-2"]:
        nd = find(items, "Node", n)
        nd["metadata"]["labels"]["nvidia.com/gpu.product"] = "NVIDIA-L4-SHARED"
        nd["metadata"]["labels"]["nvidia.com/gpu.replicas"] = str(replicas)
        nd["metadata"]["labels"]["nvidia.com/gpu.sharing-strategy"] = "time-slicing"
        nd["status"]["capacity"]["nvidia.com/gpu"] = str(replicas)
        nd["status"]["allocatable"]["nvidia.com/gpu"] = str(replicas)


@case
def selector_shared():
    items = healthy()
    time_sliced(items)
    msg = "0/4 nodes are available: 4 node(s) didn't match Pod's node affinity/selector." + \
          " preemption: 0/4 nodes are available: 4 Preemption is not helpful for scheduling."
    items.append(pending_pod("gpu-smi", "default", [ctr("cuda", "nvcr.io/nvidia/cuda:12.5.0-base-ubuntu22.04", gpu="1",
                                                        command=["nvidia-smi"])],
                             node_selector={"nvidia.com/gpu.product": "NVIDIA-L4"}, tolerations=[GPU_TOLERATION],
                             labels={"app": "gpu-smi"}, message=msg))
    items.append(event("default", "Pod", "gpu-smi", "FailedScheduling", msg, count=6))
    return items


@case
def selector_mig():
    items = healthy()
    nd = find(items, "Node", "gpu-a100-1")
    nd["metadata"]["labels"].update({"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB-MIG-1g.10gb",
                                     "nvidia.com/mig.config": "all-1g.10gb", "nvidia.com/mig.config.state": "success",
                                     "nvidia.com/mig.strategy": "single", "nvidia.com/gpu.count": "28"})
    nd["status"]["capacity"]["nvidia.com/gpu"] = "28"
    nd["status"]["allocatable"]["nvidia.com/gpu"] = "28"
    msg = "0/4 nodes are available: 4 node(s) didn't match Pod's node affinity/selector." + \
          " preemption: 0/4 nodes are available: 4 Preemption is not helpful for scheduling."
    items.append(pending_pod("embed-worker", "team-a", [ctr("embed", "nvcr.io/nvidia/pytorch:25.01-py3", gpu="1")],
                             node_selector={"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}, tolerations=[GPU_TOLERATION],
                             message=msg))
    items.append(event("team-a", "Pod", "embed-worker", "FailedScheduling", msg, count=3))
    return items


@case
def taint_not_tolerated():
    items = healthy()
    msg = "0/4 nodes are available: 1 Insufficient nvidia.com/gpu, 3 node(s) had untolerated taint {nvidia.com/gpu: present}." + \
          " preemption: 0/4 nodes are available: 4 Preemption is not helpful for scheduling."
    items.append(pending_pod("cuda-vectoradd", "default",
                             [ctr("cuda-vectoradd", "nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0-ubuntu22.04", gpu="1")],
                             message=msg))
    items.append(event("default", "Pod", "cuda-vectoradd", "FailedScheduling", msg, count=9))
    # A GPU Job template without the toleration (checklist: workloads tolerate the GPU taint).
    tpl = {"containers": [ctr("render", "nvcr.io/nvidia/cuda:12.5.0-runtime-ubuntu22.04", gpu="1")], "restartPolicy": "Never"}
    items.append({"apiVersion": "batch/v1", "kind": "Job", "metadata": meta("Job", "render", "team-a"),
                  "spec": {"backoffLimit": 1, "suspend": True, "template": {"metadata": {"labels": {"app": "render"}}, "spec": tpl}},
                  "status": {}})
    return items


@case
def quota_exhausted():
    items = healthy()
    q = find([i for i in items if i["kind"] == "ResourceQuota" and i["metadata"]["namespace"] == "team-a"], "ResourceQuota", "gpu-quota")
    q["status"]["used"]["requests.nvidia.com/gpu"] = "4"
    tpl = {"containers": [ctr("finetune", "nvcr.io/nvidia/pytorch:25.01-py3", gpu="2", cpu="16", memory="128Gi")],
           "restartPolicy": "Never", "tolerations": [GPU_TOLERATION], "priorityClassName": "gpu-dev"}
    items.append({"apiVersion": "batch/v1", "kind": "Job", "metadata": meta("Job", "finetune-llama", "team-a"),
                  "spec": {"backoffLimit": 2, "completions": 1, "parallelism": 1, "activeDeadlineSeconds": 86400,
                           "template": {"metadata": {"labels": {"app": "finetune-llama"}}, "spec": tpl}},
                  "status": {"startTime": "2026-10-20T09:20:00Z"}})
    for i in range(2):
        items.append(pod(f"sweep-{i}-" + suffix("sweep", str(i)), "team-a",
                         [ctr("train", "nvcr.io/nvidia/pytorch:25.01-py3", gpu="2", cpu="8", memory="64Gi")], "gpu-a100-1",
                         owner=("Job", f"sweep-{i}", "team-a"), tolerations=[GPU_TOLERATION], created="2026-10-20T06:00:00Z"))
    msg = ('Error creating: pods "finetune-llama-%s" is forbidden: exceeded quota: gpu-quota, requested: '
           'requests.nvidia.com/gpu=2, used: requests.nvidia.com/gpu=4, limited: requests.nvidia.com/gpu=4') % suffix("ft")
    items.append(event("team-a", "Job", "finetune-llama", "FailedCreate", msg, count=7, component="job-controller", api="batch/v1"))
    return items


@case
def rolling_update():
    items = healthy()
    sel = {"nvidia.com/gpu.product": "NVIDIA-L4"}
    dep = find(items, "Deployment", "qwen-vllm")
    dep["spec"]["strategy"] = {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}}
    dep["spec"]["template"]["spec"]["nodeSelector"] = sel
    dep["spec"]["template"]["spec"]["containers"][0]["image"] = "vllm/vllm-openai:v0.32.1"
    # gpu-l4-2 runs another model.
    items.append(pod("embeddings-0", "llm", [ctr("tei", "ghcr.io/huggingface/text-embeddings-inference:1.8", gpu="1")],
                     "gpu-l4-2", owner=("StatefulSet", "embeddings", "llm"), labels={"app": "embeddings"},
                     tolerations=[GPU_TOLERATION], created="2026-10-10T10:00:00Z"))
    new_labels = {"app": "qwen-vllm", "pod-template-hash": "7f9c6d5b48"}
    rs = workload("ReplicaSet", "qwen-vllm-7f9c6d5b48", "llm", vllm_template(sel), new_labels)
    rs["metadata"]["ownerReferences"] = meta("x", "x", owner=("Deployment", "qwen-vllm", "llm"))["ownerReferences"]
    items.append(rs)
    msg = "0/4 nodes are available: 2 Insufficient nvidia.com/gpu, 2 node(s) didn't match Pod's node affinity/selector." + PREEMPT
    c = vllm_template(sel)["containers"]
    c[0]["image"] = "vllm/vllm-openai:v0.32.1"
    name = "qwen-vllm-7f9c6d5b48-" + suffix("qwen-new")
    items.append(pending_pod(name, "llm", c, node_selector=sel, tolerations=[GPU_TOLERATION],
                             owner=("ReplicaSet", "qwen-vllm-7f9c6d5b48", "llm"), labels=new_labels, message=msg))
    items.append(event("llm", "Pod", name, "FailedScheduling", msg, count=11))
    items.append(event("llm", "Deployment", "qwen-vllm", "ScalingReplicaSet",
                       "Scaled up replica set qwen-vllm-7f9c6d5b48 from 0 to 1", type_="Normal", component="deployment-controller",
                       api="apps/v1"))
    return items


@case
def fractional_request():
    items = healthy()
    tpl = {"containers": [ctr("embed", "ghcr.io/huggingface/text-embeddings-inference:1.8", gpu="500m", cpu="1",
                              memory="4Gi", startup=True, ports=[8000])], "tolerations": [GPU_TOLERATION]}
    items.append(workload("Deployment", "embeddings", "llm", tpl, {"app": "embeddings"}))
    rs = workload("ReplicaSet", "embeddings-6c8d9f7b5", "llm", tpl, {"app": "embeddings", "pod-template-hash": "6c8d9f7b5"})
    items.append(rs)
    items.append({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": meta("PodDisruptionBudget", "embeddings", "llm"),
                  "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "embeddings"}}}})
    msg = ('Error creating: Pod "embeddings-6c8d9f7b5-%s" is invalid: spec.containers[0].resources.requests[nvidia.com/gpu]: '
           'Invalid value: "500m": must be an integer') % suffix("emb")
    items.append(event("llm", "ReplicaSet", "embeddings-6c8d9f7b5", "FailedCreate", msg, count=17,
                       component="replicaset-controller", api="apps/v1"))
    return items


@case
def request_limit_mismatch():
    items = healthy()
    tpl = {"containers": [ctr("whisper", "ghcr.io/openai/whisper-server:v2.3.1", gpu="2", requests_gpu="1", cpu="2",
                              memory="8Gi", startup=True, ports=[8000])], "tolerations": [GPU_TOLERATION]}
    items.append(workload("Deployment", "whisper", "llm", tpl, {"app": "whisper"}))
    items.append(workload("ReplicaSet", "whisper-7d9f8b6c5", "llm", tpl, {"app": "whisper", "pod-template-hash": "7d9f8b6c5"}))
    items.append({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": meta("PodDisruptionBudget", "whisper", "llm"),
                  "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "whisper"}}}})
    msg = ('Error creating: Pod "whisper-7d9f8b6c5-%s" is invalid: spec.containers[0].resources.requests[nvidia.com/gpu]: '
           'Invalid value: "1": must be equal to nvidia.com/gpu limit of 2') % suffix("wh")
    items.append(event("llm", "ReplicaSet", "whisper-7d9f8b6c5", "FailedCreate", msg, count=12,
                       component="replicaset-controller", api="apps/v1"))
    return items


@case
def gpu_not_advertised():
    items = healthy()
    nd = find(items, "Node", "gpu-l4-2")
    del nd["status"]["capacity"]["nvidia.com/gpu"]
    del nd["status"]["allocatable"]["nvidia.com/gpu"]
    items = [i for i in items if not (i["kind"] == "Pod" and i["spec"].get("nodeName") == "gpu-l4-2")]
    items += operator_pods("gpu-l4-2", validator_fail=("toolkit-validation", "CrashLoopBackOff"), plugin_waiting=True)
    val = find_prefix(items, "Pod", "nvidia-operator-validator", "gpu-l4-2")["metadata"]["name"]
    items.append(log("gpu-operator", val, "toolkit-validation",
                     'time="2026-10-20T09:41:07Z" level=info msg="version: 8a1e5a4e, commit: 8a1e5a4"\n'
                     'time="2026-10-20T09:41:07Z" level=info msg="Error: error validating toolkit installation: '
                     'exec: \\"nvidia-smi\\": executable file not found in $PATH"\n'
                     'toolkit is not ready\n'))
    return items


@case
def driver_version_mismatch():
    items = healthy()
    drv = find_prefix(items, "Pod", "nvidia-driver-daemonset", "gpu-a100-1")["metadata"]["name"]
    dcgm = find_prefix(items, "Pod", "nvidia-dcgm-exporter", "gpu-a100-1")["metadata"]["name"]
    items.append(log("gpu-operator", drv, "nvidia-driver-ctr",
                     "DRIVER_ARCH is x86_64\nCreating directory NVIDIA-Linux-x86_64-570.124.06\n"
                     "Loading NVIDIA driver kernel modules...\n+ modprobe nvidia\n+ modprobe nvidia-uvm\n"
                     "Done, now waiting for signal\n"))
    items.append(log("gpu-operator", dcgm, "nvidia-dcgm-exporter",
                     'time="2026-10-20T09:30:12Z" level=info msg="Starting dcgm-exporter" Version=4.2.3-4.3.1\n'
                     'Failed to initialize NVML: Driver/library version mismatch\n'
                     'NVML library version: 570.172\n'
                     'time="2026-10-20T09:30:12Z" level=fatal msg="Error connecting to nv-hostengine: Host engine connection invalid/disconnected"\n'))
    return items


def crashing_driver(items, node_name, log_text):
    drv = find_prefix(items, "Pod", "nvidia-driver-daemonset", node_name)
    image = drv["spec"]["containers"][0]["image"]
    drv["status"]["containerStatuses"] = [container_status(
        "nvidia-driver-ctr", image, state="waiting", reason="CrashLoopBackOff", restarts=23,
        message="back-off 5m0s restarting failed container=nvidia-driver-ctr pod=" + drv["metadata"]["name"],
        last={"terminated": {"exitCode": 1, "reason": "Error", "startedAt": "2026-10-20T09:50:00Z",
                             "finishedAt": "2026-10-20T09:51:12Z"}})]
    drv["status"]["conditions"] = [{"type": "Ready", "status": "False", "lastTransitionTime": "2026-10-20T08:40:00Z",
                                    "reason": "ContainersNotReady", "message": "containers with unready status: [nvidia-driver-ctr]"}]
    items.append(log("gpu-operator", drv["metadata"]["name"], "nvidia-driver-ctr", log_text, previous=True))
    nd = find(items, "Node", node_name)
    del nd["status"]["capacity"]["nvidia.com/gpu"]
    del nd["status"]["allocatable"]["nvidia.com/gpu"]
    return drv


@case
def driver_kernel_crashloop():
    items = healthy()
    nd = find(items, "Node", "gpu-l4-1")
    nd["status"]["nodeInfo"]["kernelVersion"] = "6.14.0-1011-aws"
    crashing_driver(items, "gpu-l4-1",
                    "DRIVER_ARCH is x86_64\nCreating directory NVIDIA-Linux-x86_64-570.124.06\nVerifying archive integrity... OK\n"
                    "Uncompressing NVIDIA Accelerated Graphics Driver for Linux-x86_64 570.124.06.....\n\n"
                    "WARNING: Unable to determine the default X library path. The path /tmp/null/lib will be used, but this path was not detected in the ldconfig(8) cache, and no directory exists at this path, so it is likely that libraries installed there will not be found by the loader.\n\n"
                    "Installing 'NVIDIA Accelerated Graphics Driver for Linux-x86_64' (570.124.06):\n"
                    "Resolving Linux kernel version...\n"
                    "Proceeding with Linux kernel version 6.14.0-1011-aws\n"
                    "Installing Linux kernel headers...\n"
                    "E: Unable to locate package linux-headers-6.14.0-1011-aws\n"
                    "Could not install Linux kernel headers for 6.14.0-1011-aws\n"
                    "Stopping NVIDIA persistence daemon...\nUnloading NVIDIA driver kernel modules...\n")
    return items


@case
def driver_secure_boot():
    items = healthy()
    crashing_driver(items, "gpu-a100-1",
                    "DRIVER_ARCH is x86_64\nCreating directory NVIDIA-Linux-x86_64-570.124.06\n"
                    "Installing 'NVIDIA Accelerated Graphics Driver for Linux-x86_64' (570.124.06):\n"
                    "Loading ipmi and i2c_core kernel modules...\nLoading NVIDIA driver kernel modules...\n"
                    "+ modprobe nvidia\n"
                    "modprobe: ERROR: could not insert 'nvidia': Key was rejected by service\n"
                    "Kernel module compilation complete.\nUnloading NVIDIA driver kernel modules...\n")
    return items


@case
def toolkit_init_error():
    items = healthy()
    drv = find_prefix(items, "Pod", "nvidia-driver-daemonset", "gpu-l4-2")
    drv["status"]["containerStatuses"][0]["ready"] = False
    drv["status"]["conditions"] = [{"type": "Ready", "status": "False", "lastTransitionTime": "2026-10-20T09:40:00Z",
                                    "reason": "ContainersNotReady", "message": "containers with unready status: [nvidia-driver-ctr]"}]
    msg = ("failed to create containerd task: failed to create shim task: OCI runtime create failed: runc create failed: "
           "unable to start container process: error during container init: error running prestart hook #0: exit status 1, "
           "stdout: , stderr: Auto-detected mode as 'legacy'\nnvidia-container-cli: initialization error: nvml error: "
           "driver not loaded: unknown")
    image = "nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0-ubuntu22.04"
    items.append(pod("cuda-vectoradd", "default", [ctr("cuda-vectoradd", image, gpu="1")], "gpu-l4-2",
                     tolerations=[GPU_TOLERATION], created="2026-10-20T09:45:00Z", restart_policy="OnFailure",
                     statuses=[container_status("cuda-vectoradd", image, state="waiting", reason="RunContainerError",
                                                message=msg, restarts=4)],
                     conditions=[{"type": "Ready", "status": "False", "lastTransitionTime": "2026-10-20T09:45:00Z",
                                  "reason": "ContainersNotReady", "message": "containers with unready status: [cuda-vectoradd]"}]))
    items.append(event("default", "Pod", "cuda-vectoradd", "Failed", "Error: " + msg, count=5, component="kubelet",
                       host="gpu-l4-2"))
    return items


@case
def app_no_gpu_requested():
    items = healthy()
    image = "pytorch/pytorch:2.8.0-cuda12.8-cudnn9-runtime"
    items.append(pod("pytorch-train", "team-a", [ctr("train", image, cpu="4", memory="16Gi", command=["python", "train.py"])],
                     "ip-10-0-1-12", created="2026-10-20T09:00:00Z",
                     statuses=[container_status("train", image, state="waiting", reason="CrashLoopBackOff", restarts=6,
                                                message="back-off 2m40s restarting failed container=train pod=pytorch-train")]))
    items.append(log("team-a", "pytorch-train", "train",
                     "Traceback (most recent call last):\n  File \"/workspace/train.py\", line 14, in <module>\n"
                     "    model = model.to(\"cuda\")\n"
                     "  File \"/opt/conda/lib/python3.11/site-packages/torch/cuda/__init__.py\", line 372, in _lazy_init\n"
                     "    torch._C._cuda_init()\n"
                     "RuntimeError: Found no NVIDIA driver on your system. Please check that you have an NVIDIA GPU and "
                     "installed a driver from http://www.nvidia.com/Download/index.aspx\n", previous=True))
    return items


@case
def app_visible_devices():
    items = healthy()
    image = "nvcr.io/nvidia/pytorch:25.01-py3"
    items.append(pod("benchmark", "team-a",
                     [ctr("bench", image, cpu="8", memory="32Gi", env=[{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}],
                          command=["python", "bench.py"])], "gpu-a100-1", tolerations=[GPU_TOLERATION],
                     created="2026-10-20T08:00:00Z"))
    return items


@case
def app_cuda_newer():
    items = healthy()
    image = "nvcr.io/nvidia/pytorch:25.09-py3"
    items.append(pod("train-gpt", "team-a", [ctr("train", image, gpu="1", cpu="4", memory="16Gi")], "gpu-l4-2",
                     tolerations=[GPU_TOLERATION], created="2026-10-20T09:20:00Z",
                     statuses=[container_status("train", image, state="waiting", reason="CrashLoopBackOff", restarts=5,
                                                message="back-off 2m40s restarting failed container=train pod=train-gpt")]))
    items.append(log("team-a", "train-gpt", "train",
                     "=============\n== PyTorch ==\n=============\n\nNVIDIA Release 25.09 (build 210376511)\n"
                     "PyTorch Version 2.9.0a0\n"
                     "ERROR: This container was built for NVIDIA Driver Release 580.82 or later, but\n"
                     "       version 570.124.06 was detected and compatibility mode is UNAVAILABLE.\n"
                     "Traceback (most recent call last):\n"
                     "RuntimeError: The NVIDIA driver on your system is too old (found version 12080). Please update your "
                     "GPU driver by downloading and installing a new version from the URL: "
                     "http://www.nvidia.com/Download/index.aspx Alternatively, go to: https://pytorch.org to install a "
                     "PyTorch version that has been compiled with your version of the CUDA driver.\n", previous=True))
    return items


def mig(items, state, log_text):
    nd = find(items, "Node", "gpu-a100-1")
    nd["metadata"]["labels"].update({"nvidia.com/mig.config": "all-1g.5gb", "nvidia.com/mig.config.state": state,
                                     "nvidia.com/mig.strategy": "single"})
    mm_name = "nvidia-mig-manager-" + suffix("mig", "gpu-a100-1")
    items.append(pod(mm_name, "gpu-operator",
                     [ctr("nvidia-mig-manager", "nvcr.io/nvidia/cloud-native/k8s-mig-manager:v0.12.3-ubuntu20.04", cpu="10m",
                          memory="64Mi")], "gpu-a100-1", owner=("DaemonSet", "nvidia-mig-manager", "gpu-operator"),
                     labels={"app": "nvidia-mig-manager"}, created="2026-09-15T07:20:00Z"))
    items.append(log("gpu-operator", mm_name, "nvidia-mig-manager", log_text))


@case
def mig_failed():
    items = healthy()
    mig(items, "failed",
        'time="2026-10-20T09:12:01Z" level=info msg="Updating to MIG config: all-1g.5gb"\n'
        'time="2026-10-20T09:12:01Z" level=info msg="Asserting that the requested configuration is present in the configuration file"\n'
        'time="2026-10-20T09:12:01Z" level=error msg="error validating MIG config: selected mig-config \'all-1g.5gb\' not present: '
        'device type A100-SXM4-80GB has no MIG profile 1g.5gb"\n'
        'time="2026-10-20T09:12:01Z" level=info msg="Changing the \'nvidia.com/mig.config.state\' node label to \'failed\'"\n')
    return items


@case
def mig_pending():
    items = healthy()
    mig(items, "pending",
        'time="2026-10-20T09:58:30Z" level=info msg="Updating to MIG config: all-1g.5gb"\n'
        'time="2026-10-20T09:58:30Z" level=info msg="Shutting down all GPU clients in Kubernetes by disabling their component-specific nodeSelector labels"\n')
    return items


@case
def admission_shared():
    items = healthy()
    time_sliced(items)
    msg = ("Pod was rejected: Allocate failed due to rpc error: code = Unknown desc = request for 'nvidia.com/gpu: 2' too "
           "large: maximum request size for shared resources is 1, which is unexpected")
    items.append(pod("llama-70b", "team-a", [ctr("serve", "vllm/vllm-openai:v0.32.0", gpu="2", cpu="4", memory="32Gi")],
                     "gpu-l4-2", phase="Failed", tolerations=[GPU_TOLERATION], created="2026-10-20T09:30:00Z",
                     reason="UnexpectedAdmissionError", message=msg, statuses=[], conditions=[]))
    items.append(event("team-a", "Pod", "llama-70b", "UnexpectedAdmissionError",
                       "Allocate failed due to rpc error: code = Unknown desc = request for 'nvidia.com/gpu: 2' too large: "
                       "maximum request size for shared resources is 1, which is unexpected", component="kubelet", host="gpu-l4-2"))
    return items


@case
def admission_kubelet_restart():
    items = healthy()
    msg = ("Pod was rejected: Allocate failed due to no healthy devices present; cannot allocate unhealthy devices "
           "nvidia.com/gpu, which is unexpected")
    items.append(pod("batch-infer-" + suffix("bi"), "team-a",
                     [ctr("infer", "nvcr.io/nvidia/tritonserver:25.09-py3", gpu="1", cpu="2", memory="8Gi")], "gpu-l4-2",
                     phase="Failed", tolerations=[GPU_TOLERATION], created="2026-10-20T09:31:00Z",
                     owner=("Job", "batch-infer", "team-a"), reason="UnexpectedAdmissionError", message=msg, statuses=[],
                     conditions=[]))
    items.append(event(None, "Node", "gpu-l4-2", "Starting", "Starting kubelet.", type_="Normal", component="kubelet",
                       host="gpu-l4-2", first="2026-10-20T09:30:41Z", last="2026-10-20T09:30:41Z"))
    items.append(event(None, "Node", "gpu-l4-2", "NodeAllocatableEnforced", "Updated Node Allocatable limit across pods",
                       type_="Normal", component="kubelet", host="gpu-l4-2", first="2026-10-20T09:30:42Z",
                       last="2026-10-20T09:30:42Z"))
    return items


@case
def dra_unsatisfiable():
    items = healthy()
    items.append({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": meta("DeviceClass", "gpu.nvidia.com"),
                  "spec": {"selectors": [{"cel": {"expression": "device.driver == \"gpu.nvidia.com\" && "
                                                                 "device.attributes[\"gpu.nvidia.com\"].type == \"gpu\""}}]}})
    for n, mem, product in [("gpu-l4-1", "23034Mi", "NVIDIA L4"), ("gpu-l4-2", "23034Mi", "NVIDIA L4")]:
        items.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                      "metadata": meta("ResourceSlice", f"{n}-gpu.nvidia.com-{suffix(n, 'slice')}"),
                      "spec": {"driver": "gpu.nvidia.com", "nodeName": n,
                               "pool": {"name": n, "generation": 1, "resourceSliceCount": 1},
                               "devices": [{"name": "gpu-0", "attributes": {
                                   "type": {"string": "gpu"}, "productName": {"string": product},
                                   "architecture": {"string": "Ada Lovelace"}, "driverVersion": {"version": "570.124.6"},
                                   "uuid": {"string": "GPU-" + uid(n, "gpu0")}},
                                   "capacity": {"memory": {"value": mem}}}]}})
    items.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                  "metadata": meta("ResourceClaimTemplate", "large-gpu", "llm"),
                  "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                      "deviceClassName": "gpu.nvidia.com", "count": 1,
                      "selectors": [{"cel": {"expression":
                                             "device.capacity[\"gpu.nvidia.com\"].memory.compareTo(quantity(\"40Gi\")) >= 0"}}]}}]}}}})
    claim = "llama-dra-gpu-" + suffix("claim")
    items.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                  "metadata": meta("ResourceClaim", claim, "llm", annotations={"resource.kubernetes.io/pod-claim-name": "gpu"},
                                   owner=None),
                  "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                      "deviceClassName": "gpu.nvidia.com", "count": 1, "allocationMode": "ExactCount",
                      "selectors": [{"cel": {"expression":
                                             "device.capacity[\"gpu.nvidia.com\"].memory.compareTo(quantity(\"40Gi\")) >= 0"}}]}}]}},
                  "status": {}})
    msg = "0/4 nodes are available: 2 cannot allocate all claims, 2 node(s) didn't match Pod's node affinity/selector." + \
          " still not schedulable, preemption: 0/4 nodes are available: 4 Preemption is not helpful for scheduling."
    items.append(pending_pod("llama-dra", "llm",
                             [dict(ctr("serve", "vllm/vllm-openai:v0.32.0", cpu="4", memory="32Gi"),
                                   resources={"claims": [{"name": "gpu"}], "requests": {"cpu": "4", "memory": "32Gi"}})],
                             tolerations=[GPU_TOLERATION], message=msg,
                             resource_claims=[{"name": "gpu", "resourceClaimTemplateName": "large-gpu"}],
                             claim_statuses=[{"name": "gpu", "resourceClaimName": claim}]))
    items.append(event("llm", "Pod", "llama-dra", "FailedScheduling", msg, count=8))
    return items


@case
def gpu_node_cpu_full():
    items = healthy()
    nd = find(items, "Node", "gpu-l4-2")
    nd["spec"].pop("taints", None)
    for i in range(3):
        items.append(pod(f"etl-worker-{i}-" + suffix("etl", str(i)), "team-a",
                         [ctr("etl", "ghcr.io/acme/etl-worker:2.14.0", cpu="5", memory="16Gi")], "gpu-l4-2",
                         owner=("ReplicaSet", "etl-worker-7b9d8c6f4", "team-a"), labels={"app": "etl-worker"},
                         created="2026-10-19T10:00:00Z"))
    msg = ("0/4 nodes are available: 1 Insufficient cpu, 1 Insufficient nvidia.com/gpu, 2 node(s) didn't match Pod's node "
           "affinity/selector." + PREEMPT)
    items.append(pending_pod("notebook-bob", "team-a",
                             [ctr("notebook", "quay.io/jupyter/pytorch-notebook:cuda12-2025-10-13", gpu="1", cpu="2", memory="8Gi")],
                             node_selector={"nvidia.com/gpu.product": "NVIDIA-L4"}, tolerations=[GPU_TOLERATION], message=msg))
    items.append(event("team-a", "Pod", "notebook-bob", "FailedScheduling", msg, count=4))
    return items


@case
def checklist_gaps():
    items = healthy()
    # Untainted GPU nodes, no quota in team-b, no PriorityClasses, no PDB, no ServiceMonitor, no alerts,
    # :latest image, no startup probe, CPU HPA, a GKE-installed driver next to the Operator's, a failed CUDA validator.
    for n in ["gpu-l4-1", "gpu-l4-2", "gpu-a100-1"]:
        find(items, "Node", n)["spec"].pop("taints", None)
    find(items, "Node", "gpu-l4-1")["metadata"]["labels"]["cloud.google.com/gke-gpu-driver-version"] = "latest"
    items = [i for i in items if i["kind"] not in ("PriorityClass", "ServiceMonitor", "PrometheusRule", "PodDisruptionBudget")
             or i["metadata"]["name"].startswith("system-")]
    items.append({"apiVersion": "v1", "kind": "Namespace", "metadata": meta("Namespace", "team-b"), "status": {"phase": "Active"}})
    tpl = {"containers": [ctr("tgi", "ghcr.io/huggingface/text-generation-inference:latest", gpu="1", cpu="2", memory="8Gi",
                              ports=[8080])], "tolerations": [GPU_TOLERATION]}
    items.append(workload("Deployment", "chat", "team-b", tpl, {"app": "chat"}))
    items.append({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
                  "metadata": meta("HorizontalPodAutoscaler", "chat", "team-b"),
                  "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "chat"},
                           "minReplicas": 1, "maxReplicas": 4,
                           "metrics": [{"type": "Resource", "resource": {"name": "cpu",
                                                                         "target": {"type": "Utilization", "averageUtilization": 70}}}]}})
    val = find_prefix(items, "Pod", "nvidia-operator-validator", "gpu-a100-1")
    for st in val["status"]["initContainerStatuses"]:
        if st["name"] == "cuda-validation":
            st["state"] = {"terminated": {"exitCode": 1, "reason": "Error", "startedAt": "2026-10-20T09:00:00Z",
                                          "finishedAt": "2026-10-20T09:00:05Z"}}
    val["status"]["phase"] = "Pending"
    return items


@case
def probe_killed_loading():
    # The guide's vLLM Deployment without its startupProbe: the livenessProbe kills vLLM while it loads.
    items = healthy()
    liveness = {"httpGet": {"path": "/health", "port": 8000, "scheme": "HTTP"}, "periodSeconds": 15,
                "failureThreshold": 3, "successThreshold": 1, "timeoutSeconds": 1}
    dep = find(items, "Deployment", "qwen-vllm")
    rs = find(items, "ReplicaSet", "qwen-vllm-5d8f7c9b6")
    name = "qwen-vllm-5d8f7c9b6-" + suffix("qwen")
    p = find(items, "Pod", name)
    for c in [dep["spec"]["template"]["spec"]["containers"][0], rs["spec"]["template"]["spec"]["containers"][0],
              p["spec"]["containers"][0]]:
        c.pop("startupProbe")
        c["livenessProbe"] = liveness
    p["status"]["conditions"] = [
        {"type": "Initialized", "status": "True", "lastTransitionTime": "2026-10-20T09:00:00Z"},
        {"type": "Ready", "status": "False", "lastTransitionTime": "2026-10-20T09:00:00Z", "reason": "ContainersNotReady",
         "message": "containers with unready status: [vllm]"},
        {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-10-20T09:00:00Z"}]
    image = p["spec"]["containers"][0]["image"]
    last = {"terminated": {"exitCode": 137, "reason": "Error", "startedAt": "2026-10-20T09:55:10Z",
                           "finishedAt": "2026-10-20T09:56:02Z"}}
    p["status"]["containerStatuses"] = [container_status("vllm", image, state="waiting", reason="CrashLoopBackOff",
                                                         message="back-off 2m40s restarting failed container=vllm pod=" + name,
                                                         restarts=6, last=last)]
    k = dict(component="kubelet", host="gpu-l4-1")
    items.append(event("llm", "Pod", name, "Unhealthy",
                       'Liveness probe failed: Get "http://192.168.3.17:8000/health": dial tcp 192.168.3.17:8000: '
                       "connect: connection refused", count=18, **k))
    items.append(event("llm", "Pod", name, "Killing", "Container vllm failed liveness probe, will be restarted",
                       type_="Normal", count=6, **k))
    items.append(event("llm", "Pod", name, "BackOff", "Back-off restarting failed container vllm in pod " + name,
                       count=11, **k))
    items.append(log("llm", name, "vllm",
                     "INFO 10-20 09:55:14 [api_server.py:1090] vLLM API server version 0.32.0\n"
                     "INFO 10-20 09:55:31 [gpu_model_runner.py:1843] Starting to load model Qwen/Qwen2.5-1.5B-Instruct...\n"
                     "INFO 10-20 09:55:58 [default_loader.py:262] Loading safetensors checkpoint shards:  50% Completed | 1/2\n",
                     previous=True))
    return items


@case
def gpu_limit_missing():
    items = healthy()
    tpl = {"containers": [ctr("rerank", "ghcr.io/huggingface/text-embeddings-inference:1.8", cpu="1", memory="4Gi",
                              startup=True, ports=[8000])], "tolerations": [GPU_TOLERATION]}
    tpl["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] = "1"
    items.append(workload("Deployment", "reranker", "llm", tpl, {"app": "reranker"}))
    rs = workload("ReplicaSet", "reranker-5b6c7d8f9", "llm", tpl, {"app": "reranker", "pod-template-hash": "5b6c7d8f9"})
    rs["metadata"]["ownerReferences"] = meta("x", "x", owner=("Deployment", "reranker", "llm"))["ownerReferences"]
    items.append(rs)
    items.append({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": meta("PodDisruptionBudget", "reranker", "llm"),
                  "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "reranker"}}}})
    msg = ('Error creating: Pod "reranker-5b6c7d8f9-%s" is invalid: spec.containers[0].resources.limits: Required value: '
           'Limit must be set for non overcommitable resources') % suffix("rr")
    items.append(event("llm", "ReplicaSet", "reranker-5b6c7d8f9", "FailedCreate", msg, count=8,
                       component="replicaset-controller", api="apps/v1"))
    return items


def main():
    for name, fn in CASES.items():
        items = fn()
        if name == "healthy":
            pass
        d = os.path.join(HERE, name)
        os.makedirs(d, exist_ok=True)
        doc = {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": items}
        with open(os.path.join(d, "snapshot.json"), "w") as f:
            json.dump(doc, f, indent=4)
            f.write("\n")
    # The cluster the collector tests serve from the API-server stand-in (live-cluster/): the
    # gpu-not-advertised case, logs apart.
    items = CASES["gpu-not-advertised"]()
    d = os.path.join(HERE, "live-cluster")
    os.makedirs(os.path.join(d, "logs"), exist_ok=True)
    objects = [i for i in items if i["kind"] not in ("ContainerLog", "SnapshotInfo")]
    with open(os.path.join(d, "core.json"), "w") as f:
        json.dump({"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": objects}, f, indent=4)
        f.write("\n")
    for i in items:
        if i["kind"] == "ContainerLog":
            name = f"{i['metadata']['namespace']}_{i['metadata']['name']}_{i['container']}.log"
            with open(os.path.join(d, "logs", name), "w") as f:
                f.write(i["text"])
            if i["container"] == "toolkit-validation":
                # Container logs are arbitrary bytes: invalid UTF-8 and terminal escapes must not break
                # --collect's JSON (doctor_live_test DoctorLive).
                with open(os.path.join(d, "logs", name), "ab") as f:
                    f.write(b"toolkit probe output: \xff\xfe\x1b[0m (raw bytes)\n")
    print(f"wrote {len(CASES)} cases", file=sys.stderr)


CASES = {"healthy": healthy, **CASES}

# Hand-written snapshots next to the generated ones (not rewritten here): evidence-control-bytes,
# gpu-request-overflow, huge-allocatable, huge-memory, multi-file, node-cordoned,
# node-cordoned-no-taint, node-not-ready, scale-out, toolkit-recovered and the later regression
# cases; see doctor_test.cc.

if __name__ == "__main__":
    main()
