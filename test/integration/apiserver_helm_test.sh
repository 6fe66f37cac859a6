#!/usr/bin/env bash
# kgpu-apiserver driven by a real Helm v4 (scripts/fetch-kube-tools.sh) through a release's life
# cycle, with kubectl checking the objects after each step: install with server-side apply (PATCH
# application/apply-patch+yaml creating what is missing), status/list/get manifest, upgrade (an
# object changed, a removed template's object deleted), history, rollback, uninstall (objects and
# the release Secrets, which Helm writes and deletes in protobuf, gone); then the same with
# --server-side=false (POST, then three-way merge patches). Also server-side apply's rules at the
# HTTP level: fieldManager required, force only for apply, dryRun, a YAML applied configuration.
# With APISERVER_BINARY replaced by --kubeconfig=FILE the same checks run against the server FILE
# names (the real kube-apiserver of test/kube, e2e.standin_judged), with the Widget resource as a
# CustomResourceDefinition, less the checks on the stand-in's request log.
# Usage: apiserver_helm_test.sh APISERVER_BINARY|--kubeconfig=FILE HELM KUBECTL CHART_DIR
set -uo pipefail
helm_bin=$2
kubectl_bin=$3
chart=$4
source "$(dirname "$0")/checks.sh"
source "$(dirname "$0")/standin_or_real.sh" "$1" \
  --resource rbac.authorization.k8s.io/v1/clusterroles/ClusterRole/cluster \
  --resource example.kgpu.dev/v1/widgets/Widget
export HELM_CACHE_HOME=$work/helm/cache HELM_CONFIG_HOME=$work/helm/config HELM_DATA_HOME=$work/helm/data
k() { timeout 60 "$kubectl_bin" --cache-dir "$work/cache" "$@" 2>&1; }
h() { timeout 120 "$helm_bin" --namespace apps "$@" 2>&1; }
# requests FILTER: the requests logged since the last clear, one "METHOD PATH CONTENT-TYPE CODE
# QUERY" line each, kept when FILTER (a Python expression over r) holds.
requests() {
  admin GET requests | python3 -c '
import json, sys
for r in json.load(sys.stdin):
    if eval(sys.argv[1]):
        q = "&".join(k + "=" + v for k, v in sorted(r["query"].items()))
        print(r["method"], r["path"], r.get("headers", {}).get("Content-Type", "-"), r["code"], q)' "$1"
}
get() { k get "$@" 2>&1; }
release_secrets() { k get secrets -n apps -l owner=helm -o jsonpath='{range .items[*]}{.metadata.name}={.metadata.labels.status} {end}'; }

k create namespace apps > /dev/null
if real; then
  k apply -f "$(dirname "$0")/../data/helm/widget-crd.yaml" > /dev/null
  k wait --for=condition=Established --timeout=60s crd/widgets.example.kgpu.dev > /dev/null ||
    fail "the Widget CustomResourceDefinition was not established"
fi
# expect_requests DESCRIPTION NEEDLE FILTER: the stand-in's request log since the last clear holds
# NEEDLE among the requests FILTER keeps (a real server keeps no such log: nothing checked there).
expect_requests() { standin && expect_contains "$1" "$2" "$(requests "$3")"; return 0; }
clear_requests() { standin && admin DELETE requests > /dev/null; return 0; }

# --- Server-side apply (Helm 4's default) ---------------------------------------------------------
clear_requests
out=$(h install rel "$chart")
expect_contains "install (server-side)" "STATUS: deployed" "$out"
expect_requests "install applies the deployment (201 Created)" \
  "PATCH /apis/apps/v1/namespaces/apps/deployments/rel-app application/apply-patch+yaml 201 fieldManager=helm" 'r["method"] == "PATCH"'
expect_requests "install applies the custom resource" \
  "/apis/example.kgpu.dev/v1/namespaces/apps/widgets/rel-widget application/apply-patch+yaml 201" 'r["method"] == "PATCH"'
expect_requests "release Secret created in protobuf" "POST /api/v1/namespaces/apps/secrets application/vnd.kubernetes.protobuf 201" \
  '"secrets" in r["path"] and r["method"] != "GET"'
expect_requests "release Secret updated in protobuf" \
  "PUT /api/v1/namespaces/apps/secrets/sh.helm.release.v1.rel.v1 application/vnd.kubernetes.protobuf 200" \
  '"secrets" in r["path"] and r["method"] != "GET"'
expect_eq "configmap from the chart" "hello" "$(get configmap rel-config -n apps -o jsonpath='{.data.greeting}')"
expect_eq "helm's ownership metadata" "Helm rel apps" \
  "$(get configmap rel-config -n apps -o jsonpath='{.metadata.labels.app\.kubernetes\.io/managed-by} {.metadata.annotations.meta\.helm\.sh/release-name} {.metadata.annotations.meta\.helm\.sh/release-namespace}')"
expect_eq "optional configmap" "only while extra.enabled" "$(get configmap rel-extra -n apps -o jsonpath='{.data.note}')"
expect_eq "deployment" "1 hello rel-agent" \
  "$(get deployment rel-app -n apps -o jsonpath='{.spec.replicas} {.spec.template.spec.containers[0].env[0].value} {.spec.template.spec.serviceAccountName}')"
expect_contains "GPU limit served as a quantity string" '"nvidia.com/gpu": "1"' "$(get deployment rel-app -n apps -o json)"
expect_eq "service account" "rel-agent" "$(get serviceaccount rel-agent -n apps -o jsonpath='{.metadata.name}')"
expect_eq "cluster role (cluster-scoped)" "configmaps" "$(get clusterrole rel-reader -o jsonpath='{.rules[0].resources[0]}')"
expect_eq "custom resource" "3" "$(get widgets.example.kgpu.dev rel-widget -n apps -o jsonpath='{.spec.size}')"
expect_eq "release Secret" "sh.helm.release.v1.rel.v1=deployed " "$(release_secrets)"
expect_eq "release Secret type" "helm.sh/release.v1" "$(get secret sh.helm.release.v1.rel.v1 -n apps -o jsonpath='{.type}')"

out=$(h status rel)
expect_contains "status" "STATUS: deployed" "$out"
expect_contains "status revision" "REVISION: 1" "$out"
expect_contains "list" "deployed" "$(h list | grep '^rel[[:space:]]')"
out=$(h get manifest rel)
expect_contains "get manifest" "name: rel-widget" "$out"
expect_contains "get manifest (values)" 'greeting: "hello"' "$out"

clear_requests
out=$(h upgrade rel "$chart" --set greeting=bonjour --set extra.enabled=false --set widget.size=5)
expect_contains "upgrade" "STATUS: deployed" "$out"
expect_contains "upgrade revision" "REVISION: 2" "$out"
expect_requests "upgrade applies to existing objects (200)" \
  "PATCH /api/v1/namespaces/apps/configmaps/rel-config application/apply-patch+yaml 200" 'r["method"] == "PATCH"'
expect_eq "configmap updated" "bonjour" "$(get configmap rel-config -n apps -o jsonpath='{.data.greeting}')"
expect_eq "deployment updated, generation bumped" "bonjour 2" \
  "$(get deployment rel-app -n apps -o jsonpath='{.spec.template.spec.containers[0].env[0].value} {.metadata.generation}')"
expect_eq "service ports merged by port" "http:8080 " \
  "$(get service rel-svc -n apps -o jsonpath='{range .spec.ports[*]}{.name}:{.port} {end}')"
expect_eq "custom resource updated" "5" "$(get widgets.example.kgpu.dev rel-widget -n apps -o jsonpath='{.spec.size}')"
expect_contains "removed template's object deleted" 'configmaps "rel-extra" not found' "$(get configmap rel-extra -n apps)"
expect_eq "release Secrets after upgrade" "sh.helm.release.v1.rel.v1=superseded sh.helm.release.v1.rel.v2=deployed " "$(release_secrets)"
out=$(h history rel)
expect_eq "history has two revisions" "2" "$(echo "$out" | grep -cE '^[0-9]+[[:space:]]')"
expect_contains "history: revision 1 superseded" "superseded" "$(echo "$out" | grep -E '^1[[:space:]]')"
expect_contains "history: revision 2 deployed" "Upgrade complete" "$(echo "$out" | grep -E '^2[[:space:]]')"

out=$(h rollback rel 1)
expect_contains "rollback" "Rollback was a success" "$out"
expect_eq "rollback restored the configmap" "hello" "$(get configmap rel-config -n apps -o jsonpath='{.data.greeting}')"
expect_eq "rollback recreated the removed object" "only while extra.enabled" "$(get configmap rel-extra -n apps -o jsonpath='{.data.note}')"
expect_eq "rollback restored the custom resource" "3" "$(get widgets.example.kgpu.dev rel-widget -n apps -o jsonpath='{.spec.size}')"
out=$(h history rel)
expect_contains "history: revision 3 is the rollback" "Rollback to 1" "$(echo "$out" | grep -E '^3[[:space:]]')"
expect_contains "status after rollback" "REVISION: 3" "$(h status rel)"

clear_requests
out=$(h uninstall rel)
expect_contains "uninstall" 'release "rel" uninstalled' "$out"
expect_requests "release Secrets deleted with a protobuf DeleteOptions" \
  "DELETE /api/v1/namespaces/apps/secrets/sh.helm.release.v1.rel.v1 application/vnd.kubernetes.protobuf 200" 'r["method"] == "DELETE"'
for o in "configmap rel-config" "configmap rel-extra" "deployment rel-app" "serviceaccount rel-agent" \
  "service rel-svc" "widgets.example.kgpu.dev rel-widget"; do
  expect_contains "uninstall deleted $o" "not found" "$(get $o -n apps)"
done
expect_contains "uninstall deleted the cluster role" "not found" "$(get clusterrole rel-reader)"
expect_eq "no release Secrets left" "" "$(release_secrets)"
expect_eq "list is empty" "" "$(h list -q)"

# --- Client-side (--server-side=false): POST, then three-way merge patches -----------------------
clear_requests
out=$(h install rel2 "$chart" --server-side=false)
expect_contains "install (client-side)" "STATUS: deployed" "$out"
expect_requests "client-side install creates with POST" "POST /apis/apps/v1/namespaces/apps/deployments application/json 201" \
  'r["method"] == "POST"'
expect_eq "client-side configmap" "hello" "$(get configmap rel2-config -n apps -o jsonpath='{.data.greeting}')"
expect_eq "client-side custom resource" "3" "$(get widgets.example.kgpu.dev rel2-widget -n apps -o jsonpath='{.spec.size}')"
clear_requests
out=$(h upgrade rel2 "$chart" --server-side=false --set greeting=hola --set extra.enabled=false --set widget.size=7)
expect_contains "upgrade (client-side)" "REVISION: 2" "$out"
expect_requests "client-side upgrade: strategic merge patch" \
  "PATCH /api/v1/namespaces/apps/configmaps/rel2-config application/strategic-merge-patch+json 200" 'r["method"] == "PATCH"'
expect_requests "client-side upgrade: merge patch for the custom resource" \
  "PATCH /apis/example.kgpu.dev/v1/namespaces/apps/widgets/rel2-widget application/merge-patch+json 200" 'r["method"] == "PATCH"'
expect_eq "client-side configmap updated" "hola" "$(get configmap rel2-config -n apps -o jsonpath='{.data.greeting}')"
expect_eq "client-side deployment updated" "hola" \
  "$(get deployment rel2-app -n apps -o jsonpath='{.spec.template.spec.containers[0].env[0].value}')"
expect_eq "client-side custom resource updated" "7" "$(get widgets.example.kgpu.dev rel2-widget -n apps -o jsonpath='{.spec.size}')"
expect_contains "client-side: removed template's object deleted" "not found" "$(get configmap rel2-extra -n apps)"
out=$(h uninstall rel2)
expect_contains "uninstall (client-side)" 'release "rel2" uninstalled' "$out"
expect_contains "client-side uninstall deleted the deployment" "not found" "$(get deployment rel2-app -n apps)"
expect_contains "client-side uninstall deleted the cluster role" "not found" "$(get clusterrole rel2-reader)"
expect_eq "no release Secrets left (client-side)" "" "$(release_secrets)"

# --- Server-side apply's rules over HTTP -----------------------------------------------------------
cms="$base/api/v1/namespaces/apps/configmaps"
cm='{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"ssa"},"data":{"a":"1"}}'
apply() { api -X PATCH -H "Content-Type: application/apply-patch+yaml" "$@"; }
expect_contains "apply without fieldManager is 422" \
  'PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch' \
  "$(apply "$cms/ssa" -d "$cm")"
expect_contains "force on a merge patch is 422" "force: Forbidden: may not be specified for non-apply patch" \
  "$(api -X PATCH -H "Content-Type: application/merge-patch+json" "$cms/ssa?fieldManager=m&force=true" -d '{}')"
out=$(apply -w ' %{http_code}' "$cms/ssa?fieldManager=m&dryRun=All" -d "$cm")
expect_contains "dry-run apply of a missing object answers 201" " 201" "$out"
expect_contains "dry-run apply stores nothing" 'configmaps \"ssa\" not found' "$(api "$cms/ssa")"
expect_contains "apply with a mismatched name is 400" "does not match the name on the URL" \
  "$(apply "$cms/other?fieldManager=m" -d "$cm")"
out=$(apply -w ' %{http_code}' "$cms/ssa?fieldManager=m" --data-binary $'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ssa\ndata:\n  a: "2"\n')
expect_contains "YAML applied configuration creates" " 201" "$out"
expect_eq "YAML applied configuration stored" "2" "$(get configmap ssa -n apps -o jsonpath='{.data.a}')"
out=$(apply -w ' %{http_code}' "$cms/ssa?fieldManager=m&force=true" -d "$cm")
expect_contains "forced apply of an existing object answers 200" " 200" "$out"
expect_eq "forced apply changed the object" "1" "$(get configmap ssa -n apps -o jsonpath='{.data.a}')"

finish helm
