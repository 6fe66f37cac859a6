#include "apiclient/leader.h"

#include "common/timestamp.h"

#include <fmt/format.h>

#include <ctime>
#include <thread>

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
  const std::string now = format_rfc3339(std::chrono::system_clock::now(), 6);
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
    observed_at_ = std::chrono::steady_clock::now();
    return true;
  }
  json& spec = (*current)["spec"];
  if (!spec.is_object()) spec = json::object();
  const std::string holder = spec.value("holderIdentity", "");
  const std::string record =
      fmt::format("{}|{}|{}", holder, spec.value("renewTime", ""), spec.value("leaseTransitions", 0));
  const int64_t their_duration = spec.value("leaseDurationSeconds", duration_s);
  {
    std::lock_guard lock(mu_);
    if (record != observed_record_) {
      observed_record_ = record;
      observed_at_ = std::chrono::steady_clock::now();
    }
    if (holder != observed_holder_) {
      observed_holder_ = holder;
      if (cfg_.on_new_leader && !holder.empty()) cfg_.on_new_leader(holder);
    }
    const bool expired = std::chrono::steady_clock::now() > observed_at_ + std::chrono::seconds(their_duration);
    if (!holder.empty() && holder != cfg_.identity && !expired) return false;
  }
  if (holder != cfg_.identity) {
    spec["leaseTransitions"] = spec.value("leaseTransitions", 0) + (holder.empty() ? 0 : 1);
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
  observed_record_ = fmt::format("{}|{}|{}", cfg_.identity, now, spec.value("leaseTransitions", 0));
  observed_at_ = std::chrono::steady_clock::now();
  return true;
}

void LeaderElector::release() {
  auto current = client_.get(resources::kLeases, cfg_.ns, cfg_.name);
  if (!current || (*current)["spec"].value("holderIdentity", "") != cfg_.identity) return;
  json& spec = (*current)["spec"];
  spec["holderIdentity"] = "";
  spec["leaseDurationSeconds"] = 1;
  spec["renewTime"] = format_rfc3339(std::chrono::system_clock::now(), 6);
  client_.update(resources::kLeases, cfg_.ns, cfg_.name, *current);
}

void LeaderElector::run(const std::atomic<bool>& stop) {
  const auto sleep = [&](std::chrono::milliseconds d) {
    const auto until = std::chrono::steady_clock::now() + d;
    while (!stop && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::min<std::chrono::milliseconds>(
          std::chrono::milliseconds(50), std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now())));
    }
  };
  while (!stop) {
    // Campaign.
    while (!stop && !try_acquire_or_renew()) sleep(cfg_.retry_period);
    if (stop) break;
    leading_ = true;
    if (cfg_.on_started_leading) cfg_.on_started_leading();
    // Lead: renew every retry period; give up when no renewal succeeded within the deadline.
    auto last_renew = std::chrono::steady_clock::now();
    while (!stop) {
      sleep(cfg_.retry_period);
      if (stop) break;
      if (try_acquire_or_renew()) {
        last_renew = std::chrono::steady_clock::now();
      } else if (std::chrono::steady_clock::now() - last_renew > cfg_.renew_deadline) {
        break;
      }
    }
    leading_ = false;
    if (stop && cfg_.release_on_stop) release();
    if (cfg_.on_stopped_leading) cfg_.on_stopped_leading();
  }
}

}  // namespace kgpu::kube
