// Gang admission (docs/gangs.md): the leader's rounds over the pods the scheduler's informer
// knows. A gang's members wait behind the scheduling gate kgpu.io/gang (or, ungated, are refused
// by filter: scheduler.h reserve_gang) until the gang has its minimum count of members; then the
// whole gang is planned at once on the model and reserved, and only then are the gates removed,
// so kube-scheduler places the members, the extender filters each to its planned node and binds
// it to its planned GPUs.
//
// Per round, gangs in the order of their oldest member (BestEffortFIFO: a gang that does not fit
// does not hold back a later one that does):
//   - not reserved, fewer members than the minimum: waits (a GangWaiting Event once per reason);
//   - not reserved, enough: reserve_gang; reserved -> gates removed (ungated members get the
//     kgpu.io/gang-reservation annotation, so kube-scheduler retries them at once), a GangReserved
//     Event; not reserved -> waits, GangUnschedulable (Warning) when it would not fit even an empty
//     cluster, said at once and once;
//   - reserved, every member bound: admitted (GangAdmitted);
//   - reserved, a member deleted: the reservation is released whole (GangReleased); the members
//     that remain wait for the gang to be complete again;
//   - reserved past `timeout` with members unbound: released whole, and the members already bound
//     are evicted (a half-placed gang holds GPUs and makes no progress): GangTimedOut.
// Only one gang is planned at a time (rounds are serial), so two gangs can never each hold part
// of what the other needs: no deadlock. A restarted scheduler starts with no reservations; members
// bound stay charged as bound pods, the others are planned again (no double booking).
//
// Thread safety: round() from one thread at a time.
#pragma once

#include <chrono>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "apiclient/informer.h"
#include "common/clock.h"
#include "scheduler/gang.h"
#include "scheduler/scheduler.h"

namespace kgpu::kube {
class Client;
class EventRecorder;
}  // namespace kgpu::kube

namespace kgpu::scheduler {

struct GangAdmissionOptions {
  std::chrono::milliseconds timeout{60'000};  // reserved -> every member bound
  Clock* clock = &Clock::real();
};

struct GangRound {
  std::vector<std::string> reserved, admitted, released, timed_out;
  std::map<std::string, std::string> waiting;  // gang -> why
};

class GangAdmission {
 public:
  // `scheduler`, `client` and `events` (may be null) are not owned and must outlive this.
  GangAdmission(GpuScheduler& scheduler, kube::Client& client, kube::EventRecorder* events, GangAdmissionOptions o);

  GangRound round(const std::vector<kube::ObjectRef>& pods);

  // Gangs reserved now (for metrics and tests).
  size_t reserved() const { return gangs_.size(); }

 private:
  struct Reservation {
    std::set<std::string> members;  // uids
    Clock::SteadyTime deadline;
  };
  void event(const nlohmann::json& pod, bool warning, const std::string& reason, const std::string& note);
  bool admit(const nlohmann::json& pod);  // removes the gate or marks the reservation; false on an API error

  GpuScheduler& sched_;
  kube::Client& client_;
  kube::EventRecorder* events_;
  GangAdmissionOptions opt_;
  std::map<std::string, Reservation> gangs_;
  std::map<std::string, std::string> said_;  // gang (or pod uid for a bad pod) -> the last reason told
  std::set<std::string> evicted_;  // uids this evicted: no longer members, until the informer drops them
  // gang_of by pod uid, while its resourceVersion stays: rounds read again only changed pods.
  std::map<std::string, std::pair<std::string, Result<std::optional<GangRef>>>> gang_of_;
  // The minimum read from a gang's PodGroup and when: read again after kPodGroupTtl, not every round.
  std::map<std::string, std::pair<Clock::SteadyTime, int64_t>> podgroup_min_;
};

}  // namespace kgpu::scheduler
