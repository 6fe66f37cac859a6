// Leader election with a coordination.k8s.io/v1 Lease, with client-go's rules and default timings
// (lease 15 s, renew deadline 10 s, retry 2 s).
//
// A candidate takes the lease when it does not exist, when it is released (no holder), or when its
// holder has not renewed it for leaseDurationSeconds as observed on this machine's clock since the
// record last changed (so clock skew between machines does not matter). The leader renews every
// retry period; if it cannot renew within the renew deadline it stops leading. Writes carry the
// lease's resourceVersion, so two candidates never both win. On stop, a leader releases the lease
// (holder cleared, duration 1 s) so a successor takes over at once.
//
// Threads: run() blocks on the caller's thread and calls the callbacks on it.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <string>

#include "apiclient/client.h"
#include "common/clock.h"

namespace kgpu::kube {

struct LeaderElectionConfig {
  std::string ns = "kube-system";
  std::string name;      // the Lease
  std::string identity;  // this candidate (hostname_uid by convention)
  std::chrono::milliseconds lease_duration{15'000};
  std::chrono::milliseconds renew_deadline{10'000};
  std::chrono::milliseconds retry_period{2'000};
  bool release_on_stop = true;
  // Steady time for the lease's expiry and the renew deadline, system time for renewTime, and the
  // waits between attempts (common/clock.h); a FakeClock moves a whole election in no time.
  Clock* clock = &Clock::real();
  std::function<void()> on_started_leading;
  std::function<void()> on_stopped_leading;
  std::function<void(const std::string& identity)> on_new_leader;  // every change of holder seen
};

class LeaderElector {
 public:
  LeaderElector(Client& client, LeaderElectionConfig config);
  // Campaigns and leads until `stop`; may lead several times (after losing the lease it campaigns
  // again). Returns when `stop` is set, after releasing the lease if leading.
  void run(const std::atomic<bool>& stop);
  bool is_leader() const { return leading_.load(); }
  std::string observed_holder() const;

 private:
  // One attempt to acquire or renew; true when this candidate holds the lease afterwards.
  bool try_acquire_or_renew();
  void release();

  Client& client_;
  LeaderElectionConfig cfg_;
  std::atomic<bool> leading_{false};
  mutable std::mutex mu_;
  std::string observed_record_;  // holder + renewTime + transitions, as last read
  std::string observed_holder_;
  std::chrono::steady_clock::time_point observed_at_;
};

}  // namespace kgpu::kube
