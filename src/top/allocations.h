// `kgpu allocations`: every GPU resource per node and cluster-wide (capacity, allocatable,
// requested, holders), what nobody can use and why, and the GPU quota queues, from the cluster
// (src/top/cluster.h); rendered as aligned text or JSON. docs/top.md says what every column means.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "top/cluster.h"

namespace kgpu::top {

// `kgpu allocations`.
struct AllocationRow {
  std::string node, resource;  // resource "dra:<driver>" for DRA devices
  int64_t capacity = 0, allocatable = 0, requested = 0;
  int replicas = 1;
  struct Holder {
    std::string ns, pod;
    int64_t count = 0;
  };
  std::vector<Holder> holders;
};
struct Unusable {
  std::string node, resource, reason;  // reason: unhealthy, cordoned, not-ready, fragmented, not-advertised
  double count = 0;                    // units of `resource` (fragmented: free replicas)
  std::string detail;
};
// One quota of a GPU quota queue (docs/queues.md) and its usage.
struct QueueRow {
  std::string queue, cohort, resource, model;
  int64_t nominal = 0, used = 0, borrowed = 0, pending = 0;
  size_t admitted = 0, waiting = 0;  // workloads of the queue
};

struct Allocations {
  std::vector<AllocationRow> rows;
  std::vector<Unusable> unusable;
  std::map<std::string, AllocationRow> totals;  // by resource, node ""
  std::vector<QueueRow> queues;                 // when the queue ConfigMap was read
};
Allocations allocations(const Cluster& c);
std::string allocations_text(const Allocations& a, bool wide);
nlohmann::json to_json(const Allocations& a);

}  // namespace kgpu::top
