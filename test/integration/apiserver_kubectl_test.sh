#!/usr/bin/env bash
# kgpu-apiserver driven by a real kubectl (v1.35, scripts/fetch-kube-tools.sh): discovery, OpenAPI
# and strict field validation, create/get/patch (three patch types and the status subresource)/
# label/delete, `get -w`, finalizers with `delete` waiting on them, protobuf bodies (create
# namespace/configmap/secret), TLS with token, client-certificate and insecure contexts, 401,
# injected 429 with Retry-After, RBAC-style 403, and 410 for an expired watch.
# With --kubeconfig=FILE the same checks run against the server that kubeconfig names (the real
# kube-apiserver of test/kube, e2e.standin_judged), less those that need the stand-in's fault
# injection, request log or its own kubeconfig contexts.
# Usage: apiserver_kubectl_test.sh APISERVER_BINARY KUBECTL
#        apiserver_kubectl_test.sh --kubeconfig=KUBECONFIG KUBECTL
set -uo pipefail
source "$(dirname "$0")/checks.sh"
kubectl_bin=$2
source "$(dirname "$0")/standin_or_real.sh" "$1" --bookmark-interval-ms 200
k() { timeout 60 "$kubectl_bin" --cache-dir "$work/cache" "$@" 2>&1; }
# A pod needs its namespace's default ServiceAccount on a real server (admission).
real && eventually 300 k get serviceaccount default -o name > /dev/null

# Discovery and version.
expect_contains "version" "$server_version" "$(k version)"
out=$(k api-resources)
for r in "pods " "nodes " "resourceslices" "resourceclaims" "deviceclasses" "leases" "events.k8s.io"; do
  expect_contains "api-resources lists $r" "$r" "$out"
done

# Create with OpenAPI-driven strict validation; quantities served as strings.
cat > "$work/pod.yaml" <<'EOF'
apiVersion: v1
kind: Pod
metadata:
  name: trainer
  labels: {app: train}
spec:
  containers:
  - name: main
    image: nvcr.io/nvidia/pytorch:25.01-py3
    resources:
      limits: {nvidia.com/gpu: 2}
  - name: sidecar
    image: busybox:1.36
EOF
expect_contains "create" "pod/trainer created" "$(k create -f "$work/pod.yaml")"
expect_contains "create again is AlreadyExists" 'pods "trainer" already exists' "$(k create -f "$work/pod.yaml")"
expect_contains "quantity normalized" '"nvidia.com/gpu":"2"' "$(k get pod trainer -o jsonpath='{.spec.containers[0].resources.limits}')"
out=$(printf 'apiVersion: v1\nkind: Pod\nmetadata: {name: typo}\nspec:\n  containers:\n  - name: c\n    imag: x\n' | k create -f -)
expect_contains "strict validation" 'strict decoding error: unknown field "spec.containers[0].imag"' "$out"
expect_contains "uid and creationTimestamp set" "trainer" "$(k get pod trainer -o jsonpath='{.metadata.name} {.metadata.uid} {.metadata.creationTimestamp}')"

# A watch sees the changes that follow.
k get pods -w --output-watch-events > "$work/watch.out" &
watch_pid=$!
# Its first line is the list: the watch starts from the list's resourceVersion, so what follows is seen.
eventually 150 [ -s "$work/watch.out" ]
expect_contains "merge patch" "patched" "$(k patch pod trainer --type=merge -p '{"metadata":{"annotations":{"a":"1"}}}')"
expect_contains "json patch" "patched" "$(k patch pod trainer --type=json -p '[{"op":"add","path":"/metadata/labels/tier","value":"gold"}]')"
expect_contains "strategic patch" "patched" "$(k patch pod trainer -p '{"spec":{"containers":[{"name":"sidecar","image":"busybox:1.37"}]}}')"
out=$(k get pod trainer -o jsonpath='{.spec.containers[*].image}')
expect_contains "strategic patch merged by container name" "nvcr.io/nvidia/pytorch:25.01-py3 busybox:1.37" "$out"
expect_contains "generation bumped by the spec change" "2" "$(k get pod trainer -o jsonpath='{.metadata.generation}')"
expect_contains "status patch" "patched" "$(k patch pod trainer --subresource=status --type=merge -p '{"status":{"phase":"Running"}}')"
expect_contains "status changed through the subresource" "Running" "$(k get pod trainer -o jsonpath='{.status.phase}')"
k patch pod trainer --type=merge -p '{"status":{"phase":"Failed"}}' > /dev/null
expect_contains "the main resource ignores status" "Running" "$(k get pod trainer -o jsonpath='{.status.phase}')"
expect_contains "label" "labeled" "$(k label pod trainer team=ml)"
expect_contains "label selector" "trainer" "$(k get pods -l 'team=ml,tier in (gold)' -o name)"
expect_contains "field selector" "No resources found" "$(k get pods --field-selector status.phase=Pending)"
expect_contains "unsupported field selector" "field label not supported: spec.bogus" "$(k get pods --field-selector spec.bogus=1)"
expect_contains "delete" 'pod "trainer" deleted' "$(k delete pod trainer)"
eventually 200 grep -q DELETED "$work/watch.out"
kill "$watch_pid" 2>/dev/null
wait "$watch_pid" 2>/dev/null
out=$(cat "$work/watch.out")
expect_contains "watch saw the additions" "MODIFIED" "$out"
expect_contains "watch saw the deletion" "DELETED" "$out"

# Finalizers: the object stays with a deletionTimestamp; `kubectl delete` waits until the last
# finalizer goes, through a watch with sendInitialEvents.
printf 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: held\n  finalizers: [example.com/hold]\ndata: {a: b}\n' |
  k create -f - > /dev/null
standin && admin DELETE requests > /dev/null
k delete configmap held > "$work/delete.out" &
delete_pid=$!
if standin; then
  # kubectl has sent the DELETE and now watches the object (sendInitialEvents) for it to go.
  waiting_watch() { admin GET requests | grep -q 'metadata.name=held'; }
  eventually 150 waiting_watch
  waiting_watch && echo "ok: kubectl watches for the deletion" || fail "kubectl did not watch the object after DELETE"
fi
deleting() { [[ "$(k get configmap held -o jsonpath='{.metadata.deletionTimestamp}')" == *Z ]]; }
eventually 150 deleting
expect_contains "deletionTimestamp set" "Z" "$(k get configmap held -o jsonpath='{.metadata.deletionTimestamp}')"
kill -0 "$delete_pid" 2>/dev/null && echo "ok: delete waits on the finalizer" || fail "kubectl delete returned before the finalizer was removed"
k patch configmap held --type=json -p '[{"op":"remove","path":"/metadata/finalizers"}]' > /dev/null
if wait "$delete_pid"; then echo "ok: delete finished after the finalizer went"; else fail "kubectl delete: $(cat "$work/delete.out")"; fi
expect_contains "gone" 'configmaps "held" not found' "$(k get configmap held)"

# Protobuf bodies.
expect_contains "create namespace (protobuf)" "namespace/gpu-team created" "$(k create namespace gpu-team)"
expect_contains "create configmap (protobuf)" "configmap/cfg created" "$(k create configmap cfg -n gpu-team --from-literal=x=y)"
expect_contains "configmap data" "y" "$(k get configmap cfg -n gpu-team -o jsonpath='{.data.x}')"
expect_contains "create secret (protobuf)" "secret/sec created" "$(k create secret generic sec -n gpu-team --from-literal=p=q)"
expect_contains "secret data base64" "cQ==" "$(k get secret sec -n gpu-team -o jsonpath='{.data.p}')"
expect_contains "namespace delete" 'namespace "gpu-team" deleted' "$(k delete namespace gpu-team)"
expect_contains "contents deleted with the namespace" "not found" "$(k get configmap cfg -n gpu-team)"

# Authentication.
if standin; then
  expect_contains "client certificate" "default" "$(k --context standin-cert get namespaces)"
  expect_contains "insecure-skip-tls-verify" "default" "$(k --context standin-insecure get namespaces)"
fi
expect_contains "wrong token" "Unauthorized" "$(k --token wrong get pods)"

portable_done kubectl
# Injected faults (the stand-in alone from here).
admin DELETE requests > /dev/null
admin POST faults '{"status":429,"retryAfterSeconds":1,"path":"/api/v1/namespaces/default/pods","times":1}' > /dev/null
expect_contains "429 with Retry-After retried" "No resources found" "$(k get pods)"
n=$(admin GET requests | python3 -c 'import json,sys; print(sum(1 for r in json.load(sys.stdin) if r["path"]=="/api/v1/namespaces/default/pods"))')
[ "$n" -ge 2 ] && echo "ok: kubectl asked twice after the 429" || fail "expected a retry after 429, saw $n requests"
admin POST faults '{"status":403,"path":"/secrets","times":1}' > /dev/null
expect_contains "RBAC 403 wording" 'secrets is forbidden: User "kgpu-test" cannot list resource "secrets" in API group "" in the namespace "default"' "$(k get secrets)"
rv=$(api "$base/api/v1/namespaces/default/pods" | python3 -c 'import json,sys; print(json.load(sys.stdin)["metadata"]["resourceVersion"])')
admin POST faults '{"compact":true}' > /dev/null
k create configmap after-compaction > /dev/null
out=$(api -m 5 "$base/api/v1/namespaces/default/pods?watch=1&resourceVersion=$((rv - 1))")
expect_contains "expired watch gets 410" '"code":410' "$out"
expect_contains "expired watch reason" '"reason":"Expired"' "$out"

finish kubectl
