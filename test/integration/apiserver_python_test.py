#!/usr/bin/python3
"""kgpu-apiserver driven by Debian's python3-kubernetes: paged lists, label and field selectors,
watch from a resourceVersion (ADDED/MODIFIED/DELETED, an object leaving a selector), bindings
(both the `bindings` collection and pods/<name>/binding, the 409 for a bound pod, the uid
precondition, annotations copied to the pod), stale updates (409), delete preconditions, Leases and
events.k8s.io Events. Usage: apiserver_python_test.py APISERVER_BINARY

With $KGPU_TEST_KUBECONFIG set, the same tests run against the server that kubeconfig names (the real
kube-apiserver of test/kube/e2e_standin_judged_test.py) and no stand-in is started: what the
stand-in answers is checked against what Kubernetes answers."""
import os
import subprocess
import sys
import tempfile
import threading
import time
import unittest

from kubernetes import client, config, watch

SERVER = sys.argv.pop(1) if len(sys.argv) > 1 else "build/tools/apiserver/kgpu-apiserver"


def body_text(exc):
    """An ApiException's body as text (bytes when the call did not preload content)."""
    return exc.body.decode() if isinstance(exc.body, bytes) else exc.body


class ApiServerPythonTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.proc = None
        if os.environ.get("KGPU_TEST_KUBECONFIG"):
            config.load_kube_config(config_file=os.environ["KGPU_TEST_KUBECONFIG"])
            cls.v1 = client.CoreV1Api()
            return
        cls.tmp = tempfile.TemporaryDirectory()
        d = cls.tmp.name
        cls.proc = subprocess.Popen([SERVER, "--tls", "--cert-dir", d + "/certs", "--token", "py-token",
                                     "--kubeconfig", d + "/kubeconfig", "--port-file", d + "/port"],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.time() + 10
        while not (os.path.exists(d + "/port") and os.path.getsize(d + "/port") > 0):
            if time.time() > deadline or cls.proc.poll() is not None:
                raise RuntimeError("kgpu-apiserver did not start: " + cls.proc.stderr.read().decode())
            time.sleep(0.05)
        config.load_kube_config(config_file=d + "/kubeconfig")
        cls.v1 = client.CoreV1Api()

    @classmethod
    def tearDownClass(cls):
        if cls.proc is None:
            return
        cls.proc.terminate()
        cls.proc.wait(10)
        cls.proc.stderr.close()
        cls.tmp.cleanup()

    def pod(self, name, labels=None, ns="default"):
        return self.v1.create_namespaced_pod(ns, client.V1Pod(
            metadata=client.V1ObjectMeta(name=name, labels=labels or {}),
            spec=client.V1PodSpec(containers=[client.V1Container(name="c", image="img:1")])))

    def test_paged_list_and_selectors(self):
        for i in range(5):
            self.pod(f"page-{i}", {"suite": "paging", "odd": str(i % 2)})
        names, token, pages = [], None, 0
        while True:
            r = self.v1.list_namespaced_pod("default", label_selector="suite=paging", limit=2, _continue=token)
            names += [p.metadata.name for p in r.items]
            pages += 1
            token = r.metadata._continue
            if not token:
                break
        self.assertEqual(names, [f"page-{i}" for i in range(5)])
        self.assertEqual(pages, 3)
        odd = self.v1.list_namespaced_pod("default", label_selector="suite=paging,odd!=0")
        self.assertEqual([p.metadata.name for p in odd.items], ["page-1", "page-3"])
        one = self.v1.list_namespaced_pod("default", field_selector="metadata.name=page-2")
        self.assertEqual([p.metadata.name for p in one.items], ["page-2"])
        with self.assertRaises(client.ApiException) as e:
            self.v1.list_namespaced_pod("default", field_selector="spec.nope=1")
        self.assertEqual(e.exception.status, 400)

    def test_watch_from_resource_version(self):
        self.pod("w-keep", {"suite": "watch"})
        self.pod("w-leave", {"suite": "watch"})
        rv = self.v1.list_namespaced_pod("default", label_selector="suite=watch").metadata.resource_version

        def changes():
            time.sleep(0.3)
            self.v1.patch_namespaced_pod("w-keep", "default", {"metadata": {"annotations": {"x": "1"}}})
            self.v1.patch_namespaced_pod("w-leave", "default", {"metadata": {"labels": {"suite": "other"}}})
            self.pod("w-new", {"suite": "watch"})
            self.v1.delete_namespaced_pod("w-keep", "default")

        threading.Thread(target=changes).start()
        seen = []
        w = watch.Watch()
        for ev in w.stream(self.v1.list_namespaced_pod, "default", label_selector="suite=watch",
                           resource_version=rv, timeout_seconds=10):
            o = ev["object"].metadata
            seen.append((ev["type"], o.name, o.deletion_timestamp is not None, o.deletion_grace_period_seconds))
            if len(seen) == 5:
                w.stop()
        # A pod is deleted gracefully: first marked (deletionTimestamp; grace 0 as it was never
        # scheduled), then gone.
        self.assertEqual(seen, [("MODIFIED", "w-keep", False, None), ("DELETED", "w-leave", False, None),
                                ("ADDED", "w-new", False, None), ("MODIFIED", "w-keep", True, 0),
                                ("DELETED", "w-keep", True, 0)])

    def test_binding(self):
        created = self.pod("bind-me")
        self.v1.create_namespaced_binding("default", client.V1Binding(
            metadata=client.V1ObjectMeta(name="bind-me", annotations={"kgpu.io/gpus": "0,1"}),
            target=client.V1ObjectReference(kind="Node", name="gpu-node-1")), _preload_content=False)
        p = self.v1.read_namespaced_pod("bind-me", "default")
        self.assertEqual(p.spec.node_name, "gpu-node-1")
        self.assertEqual(p.metadata.annotations["kgpu.io/gpus"], "0,1")
        self.assertIn(("PodScheduled", "True"), [(c.type, c.status) for c in p.status.conditions])
        with self.assertRaises(client.ApiException) as e:
            self.v1.create_namespaced_pod_binding("bind-me", "default", client.V1Binding(
                metadata=client.V1ObjectMeta(name="bind-me"),
                target=client.V1ObjectReference(kind="Node", name="gpu-node-2")), _preload_content=False)
        self.assertEqual(e.exception.status, 409)
        self.assertIn('is already assigned to node \\"gpu-node-1\\"', body_text(e.exception))
        self.pod("bind-uid")
        with self.assertRaises(client.ApiException) as e:
            self.v1.create_namespaced_pod_binding("bind-uid", "default", client.V1Binding(
                metadata=client.V1ObjectMeta(name="bind-uid", uid="not-" + created.metadata.uid),
                target=client.V1ObjectReference(kind="Node", name="gpu-node-2")), _preload_content=False)
        self.assertEqual(e.exception.status, 409)
        self.assertIn("Precondition failed: UID in precondition", body_text(e.exception))

    def test_conflicts_and_preconditions(self):
        p = self.pod("stale")
        p.metadata.labels = {"v": "1"}
        self.v1.replace_namespaced_pod("stale", "default", p)
        p.metadata.labels = {"v": "2"}  # still the old resourceVersion
        with self.assertRaises(client.ApiException) as e:
            self.v1.replace_namespaced_pod("stale", "default", p)
        self.assertEqual(e.exception.status, 409)
        self.assertIn("the object has been modified", body_text(e.exception))
        with self.assertRaises(client.ApiException) as e:
            self.v1.delete_namespaced_pod("stale", "default", body=client.V1DeleteOptions(
                preconditions=client.V1Preconditions(uid="wrong")))
        self.assertEqual(e.exception.status, 409)
        self.v1.delete_namespaced_pod("stale", "default")
        with self.assertRaises(client.ApiException) as e:
            self.v1.read_namespaced_pod("stale", "default")
        self.assertEqual(e.exception.status, 404)

    def test_lease_and_events(self):
        coord = client.CoordinationV1Api()
        lease = coord.create_namespaced_lease("kube-system", client.V1Lease(
            metadata=client.V1ObjectMeta(name="kgpu-scheduler"),
            spec=client.V1LeaseSpec(holder_identity="a", lease_duration_seconds=15)))
        lease.spec.holder_identity = "b"
        coord.replace_namespaced_lease("kgpu-scheduler", "kube-system", lease)
        self.assertEqual(coord.read_namespaced_lease("kgpu-scheduler", "kube-system").spec.holder_identity, "b")
        ev = client.EventsV1Api()
        ev.create_namespaced_event("default", client.EventsV1Event(
            metadata=client.V1ObjectMeta(name="e1"), event_time="2026-12-01T00:00:00.000000Z",
            reason="Scheduled", action="Binding", reporting_controller="kgpu.io/scheduler",
            reporting_instance="kgpu-0", type="Normal", note="placed",
            regarding=client.V1ObjectReference(kind="Pod", name="x", namespace="default")))
        listed = ev.list_namespaced_event("default", field_selector="reason=Scheduled")
        self.assertEqual([e.metadata.name for e in listed.items], ["e1"])


if __name__ == "__main__":
    unittest.main(verbosity=2)
