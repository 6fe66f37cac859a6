#!/usr/bin/env python3
"""Writes a `kubectl get -o json`-style List: N objects of KIND (default ConfigMap), one GPU node
and one pod.

Usage: gen_snapshot.py OUT N [KIND]
  KIND  any kind: N tiny objects of it (~80 bytes: apiVersion, kind, metadata.name/namespace);
        RealisticPod: N pods of ~3 KB as `kubectl get pods -o json` writes them (labels,
        annotations, ownerReferences, two containers with resources, env, volumeMounts (one with
        ports and a readinessProbe), volumes, tolerations, status.conditions and containerStatuses).
"""
import json
import sys

out, n = sys.argv[1], int(sys.argv[2])
kind = sys.argv[3] if len(sys.argv) > 3 else "ConfigMap"
node = {"apiVersion": "v1", "kind": "Node",
        "metadata": {"name": "gpu-1", "labels": {"nvidia.com/gpu.product": "NVIDIA-L4", "nvidia.com/gpu.count": "1"}},
        "status": {"capacity": {"cpu": "16", "memory": "64Gi", "nvidia.com/gpu": "1"},
                   "allocatable": {"cpu": "16", "memory": "64Gi", "nvidia.com/gpu": "1"},
                   "conditions": [{"type": "Ready", "status": "True"}]}}
pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "x"},
       "spec": {"nodeName": "gpu-1", "containers": [{"name": "c", "image": "busybox:1.36",
                                                      "resources": {"limits": {"nvidia.com/gpu": "1"}}}]},
       "status": {"phase": "Running"}}


def realistic_pod(i):
    """A Running web pod of a Deployment on one of 500 CPU nodes (no GPU: doctor decodes it but
    has nothing to say)."""
    name = "web-7d9f8b6c5-%05d" % i
    node_name = "node-%03d" % (i % 500)
    ts = "2026-10-20T08:%02d:%02dZ" % (i // 60 % 60, i % 60)
    def container(cname, image, cpu, mem, full):
        c = {"name": cname, "image": image, "imagePullPolicy": "IfNotPresent",
                "ports": [{"containerPort": 8080, "name": "http", "protocol": "TCP"}],
                "env": [{"name": "APP_ENV", "value": "production"}, {"name": "LOG_LEVEL", "value": "info"},
                        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}},
                        {"name": "POD_IP", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "status.podIP"}}},
                        {"name": "CACHE_URL", "value": "redis://cache.default.svc:6379/0"}],
                "resources": {"limits": {"cpu": cpu, "memory": mem}, "requests": {"cpu": cpu, "memory": mem}},
                "volumeMounts": [{"mountPath": "/etc/app", "name": "config", "readOnly": True},
                                 {"mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                                  "name": "kube-api-access-%05d" % i, "readOnly": True}],
                "readinessProbe": {"httpGet": {"path": "/healthz", "port": 8080, "scheme": "HTTP"},
                                   "periodSeconds": 10, "timeoutSeconds": 1, "failureThreshold": 3, "successThreshold": 1},
                "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File"}
        if not full:  # a sidecar: two variables, one mount, no probe
            c["env"] = c["env"][:2]
            c["volumeMounts"] = c["volumeMounts"][1:]
            del c["readinessProbe"], c["ports"]
        return c
    def status(cname, image):
        return {"name": cname, "image": image, "containerID": "containerd://" + "%064x" % (i * 7919),
                "ready": True, "restartCount": 0,
                "started": True, "state": {"running": {"startedAt": ts}}, "lastState": {}}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "shop", "uid": "%08x-1111-2222-3333-%012x" % (i, i),
                         "resourceVersion": str(100000 + i), "creationTimestamp": ts,
                         "generateName": "web-7d9f8b6c5-",
                         "labels": {"app.kubernetes.io/name": "web", "app.kubernetes.io/instance": "web-prod",
                                    "app.kubernetes.io/component": "frontend", "pod-template-hash": "7d9f8b6c5",
                                    "team": "storefront"},
                         "annotations": {"kubectl.kubernetes.io/restartedAt": ts,
                                         "prometheus.io/scrape": "true", "prometheus.io/port": "8080"},
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-7d9f8b6c5",
                                              "uid": "aaaaaaaa-1111-2222-3333-444444444444", "controller": True,
                                              "blockOwnerDeletion": True}]},
            "spec": {"containers": [container("web", "nginx:1.27", "500m", "512Mi", True),
                                    container("sidecar", "envoyproxy/envoy:v1.31", "100m", "128Mi", False)],
                     "dnsPolicy": "ClusterFirst", "enableServiceLinks": True, "nodeName": node_name,
                     "preemptionPolicy": "PreemptLowerPriority", "priority": 0, "restartPolicy": "Always",
                     "schedulerName": "default-scheduler", "securityContext": {}, "serviceAccount": "default",
                     "serviceAccountName": "default", "terminationGracePeriodSeconds": 30,
                     "tolerations": [{"effect": "NoExecute", "key": "node.kubernetes.io/not-ready",
                                      "operator": "Exists", "tolerationSeconds": 300},
                                     {"effect": "NoExecute", "key": "node.kubernetes.io/unreachable",
                                      "operator": "Exists", "tolerationSeconds": 300}],
                     "volumes": [{"name": "config", "configMap": {"name": "web-config", "defaultMode": 420}},
                                 {"name": "kube-api-access-%05d" % i,
                                  "projected": {"defaultMode": 420, "sources": [
                                      {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                                      {"configMap": {"name": "kube-root-ca.crt",
                                                     "items": [{"key": "ca.crt", "path": "ca.crt"}]}}]}}]},
            "status": {"conditions": [{"type": t, "status": "True", "lastProbeTime": None, "lastTransitionTime": ts}
                                      for t in ("PodReadyToStartContainers", "Initialized", "Ready",
                                                "ContainersReady", "PodScheduled")],
                       "containerStatuses": [status("web", "nginx:1.27"), status("sidecar", "envoyproxy/envoy:v1.31")],
                       "hostIP": "10.0.%d.%d" % (i % 500 // 250, i % 250), "phase": "Running",
                       "podIP": "10.244.%d.%d" % (i // 250 % 250, i % 250), "qosClass": "Guaranteed",
                       "startTime": ts}}


with open(out, "w", buffering=1 << 20) as f:
    f.write('{"apiVersion":"v1","kind":"List","metadata":{"resourceVersion":""},"items":[\n')
    f.write(json.dumps(node, separators=(",", ":")) + ",\n")
    f.write(json.dumps(pod, separators=(",", ":")))
    chunk = []
    for i in range(n):
        if kind == "RealisticPod":
            chunk.append(",\n" + json.dumps(realistic_pod(i), separators=(",", ":")))
        else:
            chunk.append(',\n{"apiVersion":"v1","kind":"%s","metadata":{"name":"o-%d","namespace":"x"}}' % (kind, i))
        if len(chunk) == 10000:
            f.write("".join(chunk))
            chunk = []
    f.write("".join(chunk))
    f.write("\n]}\n")
