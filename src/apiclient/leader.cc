#include "apiclient/leader.h"

#include <fmt/format.h>

#include <condition_variable>
#include <mutex>

#include "common/timestamp.h"
#include "k8s/api/json.h"

namespace kgpu::kube {

using nlohmann::json;

LeaderElector::LeaderElector(Client& client, LeaderElectionConfig config) : client_(client), cfg_(std::move(config)) {}

std::string LeaderElector::observed_holder() const {
  std::lock_guard lock(mu_);
  return observed_holder_;
}

bool LeaderElector::try_acquire_or_renew() {
  const auto& leases = resources::kLeases;
  const int64_t duration_s = std::max<int64_t>(1, std::chrono::duration_cast<std::chrono::seconds>(cfg_.lease_duration).count());
  const std::string now = format_rfc3339(cfg_.clock->system_now(), 6);
  auto current = client_.get(leases, cfg_.ns, cfg_.name);
  if (!current) {
    if (!current.error().not_found()) return false;
    json lease{{"metadata", {{"name", cfg_.name}, {"namespace", cfg_.ns}}},
               {"spec",
                {{"holderIdentity", cfg_.identity},
                 {"leaseDurationSeconds", duration_s},
                 {"acquireTime", now},
                 {"renewTime", now},
                 {"leaseTransitions", 0}}}};
    if (!client_.create(leases, cfg_.ns, lease)) return false;
    std::lock_guard lock(mu_);
    observed_holder_ = cfg_.identity;
    observed_record_.clear();
    observed_at_ = cfg_.clock->steady_now();
    return true;
  }
  json& spec = (*current)["spec"];
  if (!spec.is_object()) spec = json::object();
  // Another writer's lease may hold anything: fields of the wrong type read as absent.
  const std::string holder = k8s::api::text(spec, {"holderIdentity"});
  const json& transitions_field = k8s::api::at(spec, {"leaseTransitions"});
  const int64_t transitions = transitions_field.is_number_integer() ? transitions_field.get<int64_t>() : 0;
  const std::string record = fmt::format("{}|{}|{}", holder, k8s::api::text(spec, {"renewTime"}), transitions);
  const json& duration_field = k8s::api::at(spec, {"leaseDurationSeconds"});
  const int64_t their_duration = duration_field.is_number_integer() ? duration_field.get<int64_t>() : duration_s;
  {
    std::lock_guard lock(mu_);
    if (record != observed_record_) {
      observed_record_ = record;
      observed_at_ = cfg_.clock->steady_now();
    }
    if (holder != observed_holder_) {
      observed_holder_ = holder;
      if (cfg_.on_new_leader && !holder.empty()) cfg_.on_new_leader(holder);
    }
    const bool expired = cfg_.clock->steady_now() > observed_at_ + std::chrono::seconds(their_duration);
    if (!holder.empty() && holder != cfg_.identity && !expired) return false;
  }
  if (holder != cfg_.identity) {
    spec["leaseTransitions"] = transitions + (holder.empty() ? 0 : 1);
    spec["acquireTime"] = now;
  }
  spec["holderIdentity"] = cfg_.identity;
  spec["leaseDurationSeconds"] = duration_s;
  spec["renewTime"] = now;
  // The update carries the resourceVersion read above: a concurrent writer makes it a Conflict.
  auto updated = client_.update(leases, cfg_.ns, cfg_.name, *current);
  if (!updated) return false;
  std::lock_guard lock(mu_);
  if (observed_holder_ != cfg_.identity && cfg_.on_new_leader) cfg_.on_new_leader(cfg_.identity);
  observed_holder_ = cfg_.identity;
  observed_record_ = fmt::format("{}|{}|{}", cfg_.identity, now, spec["leaseTransitions"].get<int64_t>());
  observed_at_ = cfg_.clock->steady_now();
  return true;
}

void LeaderElector::release() {
  auto current = client_.get(resources::kLeases, cfg_.ns, cfg_.name);
  if (!current || k8s::api::text(*current, {"spec", "holderIdentity"}) != cfg_.identity) return;
  json& spec = (*current)["spec"];
  spec["holderIdentity"] = "";
  spec["leaseDurationSeconds"] = 1;
  spec["renewTime"] = format_rfc3339(cfg_.clock->system_now(), 6);
  client_.update(resources::kLeases, cfg_.ns, cfg_.name, *current);
}

void LeaderElector::run(const std::atomic<bool>& stop) {
  // `stop` is a plain flag nobody notifies on: the wait re-reads it every 50 ms of the clock's time
  // (a FakeClock's waiter also re-reads it while it waits for an advance).
  std::mutex mu;
  std::condition_variable never;
  const auto sleep = [&](std::chrono::milliseconds d) {
    const auto until = cfg_.clock->steady_now() + d;
    std::unique_lock lock(mu);
    while (!stop && cfg_.clock->steady_now() < until) {
      const auto slice = std::min<Clock::SteadyTime>(until, cfg_.clock->steady_now() + std::chrono::milliseconds(50));
      cfg_.clock->wait_until(never, lock, slice, [&] { return stop.load(); });
    }
  };
  while (!stop) {
    // Campaign.
    while (!stop && !try_acquire_or_renew()) sleep(cfg_.retry_period);
    if (stop) break;
    leading_ = true;
    if (cfg_.on_started_leading) cfg_.on_started_leading();
    // Lead: renew every retry period; give up when no renewal succeeded within the deadline.
    auto last_renew = cfg_.clock->steady_now();
    while (!stop) {
      sleep(cfg_.retry_period);
      if (stop) break;
      if (try_acquire_or_renew()) {
        last_renew = cfg_.clock->steady_now();
      } else if (cfg_.clock->steady_now() - last_renew > cfg_.renew_deadline) {
        break;
      }
    }
    leading_ = false;
    if (stop && cfg_.release_on_stop) release();
    if (cfg_.on_stopped_leading) cfg_.on_stopped_leading();
  }
}

}  // namespace kgpu::kube
