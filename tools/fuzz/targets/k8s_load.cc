// Fuzz target: k8s::load_text over any bytes (YAML, or JSON when the input starts with '{' or '['),
// then every node of every loaded document through the Node accessors and the typed views.
// Contract under test (src/k8s/document.h, objects.h): loading never throws nor crashes, every
// loaded Document has a mapping root, and lines are positive.
#include "fuzz.h"
#include "k8s/document.h"
#include "k8s/objects.h"

namespace {

using kgpu::fuzz::check;

size_t walk(const kgpu::k8s::Value& n, int depth) {
  check(depth < 100000, "tree deeper than 100000");
  size_t count = 1;
  (void)n.as_int(true);
  (void)n.as_double();
  (void)n.as_bool();
  (void)n.text();
  for (const auto& e : n.entries()) {
    (void)n.find(e.key());
    count += walk(e.value(), depth + 1);
  }
  for (const auto& item : n.items()) count += walk(item, depth + 1);
  return count;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kgpu::k8s;
  LoadResult r = load_text(kgpu::fuzz::text(data, size), "<fuzz>");
  for (const auto& e : r.errors) (void)e.to_string();
  for (const auto& d : r.documents) {
    check(d.root != nullptr && d.root->is_map(), "a loaded Document's root is a mapping");
    check(d.line >= 1, "a Document's line is positive");
    walk(*d.root, 0);
    (void)d.ref();
    (void)d.where();
    (void)d.api_group();
    (void)d.api_version_only();
    (void)as_pod(d);
    (void)as_workload(d);
    (void)as_node(d);
    (void)as_event(d);
    (void)as_resource_quota(d);
    (void)as_horizontal_pod_autoscaler(d);
    (void)as_resource_claim(d);
    (void)as_resource_slice(d);
    (void)as_device_class(d);
    (void)quantity_issues(d);
  }
  return 0;
}
