// Queue admission (docs/queues.md): the leader's rounds over the pods the scheduler's informer
// knows, against the queues of a ConfigMap (the chart's kgpu-system/kgpu-scheduler-queues; key
// queues.yaml; scheduler/queues.h).
//
// A pod in a queue (its namespace's LocalQueue named by kueue.x-k8s.io/queue-name, or a namespace
// a ClusterQueue lists) is created behind the scheduling gate kgpu.io/queue (the chart's
// MutatingAdmissionPolicy); a gang is one workload of all its members. Each round:
//   - the ConfigMap is read at most every `config_interval` and parsed again when it changed; a
//     config that does not parse keeps the last good one (a Warning Event on the ConfigMap names
//     the line and field; none ever read: nothing is admitted, the pods wait);
//   - workloads: admitted = no member gated any more; pending = the others; finished pods leave;
//   - queues::admit decides: admitted workloads lose their gate (QueueAdmitted Event), reclaimed
//     ones are evicted whole through the Eviction API (QueueReclaimed, naming the queue they make
//     room for), the others wait (QueueWaiting once per wait);
//   - a gated pod that no queue takes is let go (its gate removed, QueueNone): never stuck.
// Gangs wait for queue admission before gang admission plans them (gang_admission.h).
//
// Thread safety: round() from one thread at a time; metrics_text() from any.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "apiclient/informer.h"
#include "common/clock.h"
#include "scheduler/queues.h"

namespace kgpu::kube {
class Client;
class EventRecorder;
}  // namespace kgpu::kube

namespace kgpu::scheduler {

struct QueueAdmissionOptions {
  std::string config_namespace = "kgpu-system";
  std::string config_name = "kgpu-scheduler-queues";
  // The ConfigMap is read again at most this often (rounds run every few hundred ms).
  std::chrono::milliseconds config_interval{2'000};
  Clock* clock = &Clock::real();
};

struct QueueRound {
  std::vector<std::string> admitted, evicted;  // workload ids
  std::map<std::string, std::string> waiting;   // workload id -> why
  std::string config_error;                     // the last config refused ("" when the last read was good)
};

class QueueAdmission {
 public:
  QueueAdmission(kube::Client& client, kube::EventRecorder* events, QueueAdmissionOptions o);

  QueueRound round(const std::vector<kube::ObjectRef>& pods);

  // kgpu_queue_* families: nominal, used, borrowed and pending GPUs per queue and resource, pending
  // and admitted workloads, and whether the config in use is the last one written.
  std::string metrics_text() const;

 private:
  void reload();

  kube::Client& client_;
  kube::EventRecorder* events_;
  QueueAdmissionOptions opt_;
  std::shared_ptr<const queues::Config> config_;  // the last good one; null before any
  std::string config_version_;  // resourceVersion of the ConfigMap read
  std::optional<Clock::SteadyTime> config_read_at_;
  std::string config_error_;
  std::map<std::string, std::string> said_;  // workload id -> last reason told
  std::set<std::string> evicted_;            // pod uids evicted, until the informer drops them
  queues::PodFactsCache facts_;              // cleared when the config changes
  mutable std::mutex mu_;                    // guards usage_ and config_ok_ for metrics_text()
  std::map<std::string, queues::QueueUsage> usage_;
  std::shared_ptr<const queues::Config> metrics_config_;  // shared with config_, not copied
  bool config_ok_ = true;
};

}  // namespace kgpu::scheduler
