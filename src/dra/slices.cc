#include "dra/slices.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <random>

#include "common/log.h"
#include "common/strings.h"
#include "common/timestamp.h"
#include "k8s/api/json.h"

namespace kgpu::dra {

using nlohmann::json;

namespace {

constexpr const char* kContentAnnotation = "kgpu.io/slice-content";
constexpr int kRacesPerPass = 3;  // conflicts with another writer re-read at once before backing off

// A label value from free text: [A-Za-z0-9._-], starting and ending alphanumeric, at most 63.
std::string label_value(std::string_view text) {
  std::string out;
  for (const char c : text) {
    const bool ok = std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
    if (ok) {
      out += c;
    } else if (!out.empty() && out.back() != '-') {
      out += '-';
    }
    if (out.size() >= 63) break;
  }
  while (!out.empty() && !std::isalnum(static_cast<unsigned char>(out.back()))) out.pop_back();
  size_t start = 0;
  while (start < out.size() && !std::isalnum(static_cast<unsigned char>(out[start]))) ++start;
  return out.substr(start);
}

using k8s::api::at;
using k8s::api::list;
using k8s::api::text;

int64_t generation_of(const json& slice) {
  const json& g = at(slice, {"spec", "pool", "generation"});
  return g.is_number_integer() ? g.get<int64_t>() : 0;
}

bool owned_by(const json& slice, const std::string& uid) {
  for (const auto& r : list(slice, {"metadata", "ownerReferences"}))
    if (text(r, {"kind"}) == "Node" && text(r, {"uid"}) == uid) return true;
  return false;
}

// The device names of a slice spec, in order (what the API server never rewrites).
std::vector<std::string> device_names(const json& spec) {
  std::vector<std::string> out;
  for (const auto& d : list(spec, {"devices"})) out.push_back(text(d, {"name"}));
  return out;
}

// Errors another writer causes: re-read and try again at once.
bool race(const kube::ApiError& e) { return e.conflict() || e.already_exists() || e.not_found(); }

}  // namespace

json health_taints(std::string_view driver, const DeviceHealth& h) {
  json taints = json::array();
  if (h.healthy) return taints;
  json t;
  if (h.lost) {
    t = json{{"key", fmt::format("{}/unreachable", driver)}, {"effect", "NoExecute"}};
  } else if (h.needs_reset) {
    t = json{{"key", fmt::format("{}/reset-required", driver)}, {"effect", "NoSchedule"}};
  } else {
    t = json{{"key", fmt::format("{}/not-ready", driver)}, {"effect", "NoSchedule"}};
  }
  if (const std::string v = label_value(h.reason); !v.empty()) t["value"] = v;
  if (h.since.time_since_epoch().count() != 0) t["timeAdded"] = format_rfc3339(h.since);
  taints.push_back(std::move(t));
  return taints;
}

std::string slice_name(const PublisherOptions& o, size_t index) {
  std::string base = o.node_name + "-" + o.driver;
  if (base.size() > 230) base = base.substr(0, 200) + fmt::format("-{:016x}", fnv1a(base));
  while (!base.empty() && (base.back() == '-' || base.back() == '.')) base.pop_back();
  return fmt::format("{}-{}", base, index);
}

std::vector<json> slice_specs(const PublisherOptions& o, std::span<const PublishedDevice> devices,
                              std::span<const CounterSet> counter_sets) {
  bool advanced = false;
  for (const auto& d : devices) advanced |= !d.health.healthy || d.device.contains("consumesCounters");
  const size_t limit = std::max<size_t>(1, advanced ? std::min(o.max_devices, o.max_tainted_devices) : o.max_devices);
  const size_t count = std::max<size_t>(1, (devices.size() + limit - 1) / limit);  // an empty pool: one empty slice
  const size_t counter_slices = (counter_sets.size() + kMaxCounterSetsPerSlice - 1) / kMaxCounterSetsPerSlice;
  const json pool{{"name", o.node_name}, {"generation", 0}, {"resourceSliceCount", count + counter_slices}};
  std::vector<json> out;
  for (size_t i = 0; i < counter_slices; ++i) {
    json sets = json::array();
    for (size_t k = i * kMaxCounterSetsPerSlice; k < std::min(counter_sets.size(), (i + 1) * kMaxCounterSetsPerSlice); ++k)
      sets.push_back(counter_set_json(counter_sets[k]));
    out.push_back(json{{"driver", o.driver}, {"nodeName", o.node_name}, {"pool", pool}, {"sharedCounters", std::move(sets)}});
  }
  for (size_t i = 0; i < count; ++i) {
    json list = json::array();
    for (size_t k = i * limit; k < std::min(devices.size(), (i + 1) * limit); ++k) {
      json d = devices[k].device;
      if (json t = health_taints(o.driver, devices[k].health); !t.empty()) d["taints"] = std::move(t);
      list.push_back(std::move(d));
    }
    out.push_back(json{{"driver", o.driver}, {"nodeName", o.node_name}, {"pool", pool}, {"devices", std::move(list)}});
  }
  return out;
}

SlicePublisher::SlicePublisher(kube::Client& client, PublisherOptions options)
    : client_(client), options_(std::move(options)) {}

SlicePublisher::~SlicePublisher() { stop(); }

void SlicePublisher::start() {
  std::lock_guard lock(mu_);
  if (thread_.joinable()) return;
  stopping_ = false;
  thread_ = std::thread([this] { run(); });
}

void SlicePublisher::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

uint64_t SlicePublisher::update(std::vector<PublishedDevice> devices, std::vector<CounterSet> counter_sets) {
  uint64_t v = 0;
  {
    std::lock_guard lock(mu_);
    devices_ = std::move(devices);
    if (counter_sets.empty()) stats_.counters_dropped = false;
    counter_sets_ = std::move(counter_sets);
    v = ++version_;
    stats_.wanted = v;
    dirty_ = true;
  }
  cv_.notify_all();
  return v;
}

bool SlicePublisher::wait_published(uint64_t version, std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  return cv_.wait_for(lock, timeout, [&] { return stats_.published >= version; });
}

PublisherStats SlicePublisher::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

void SlicePublisher::run() {
  Clock& clock = *options_.clock;
  std::mt19937_64 rng{std::random_device{}()};
  auto backoff = options_.initial_backoff;
  Clock::SteadyTime next_resync = clock.steady_now() + options_.resync;
  Clock::SteadyTime retry_at{};
  bool retrying = false;
  std::unique_lock lock(mu_);
  while (!stopping_) {
    const auto due = [&] {
      if (stopping_) return true;
      const auto now = clock.steady_now();
      if (retrying) return now >= retry_at;
      return dirty_ || (options_.resync.count() > 0 && now >= next_resync);
    };
    Clock::SteadyTime deadline = retrying ? retry_at : next_resync;
    if (!retrying && options_.resync.count() == 0) deadline = clock.steady_now() + std::chrono::hours(24);
    clock.wait_until(cv_, lock, deadline, due);
    if (stopping_) break;
    if (!due()) continue;
    dirty_ = false;
    const std::vector<PublishedDevice> devices = devices_;
    const std::vector<CounterSet> counter_sets = counter_sets_;
    lock.unlock();
    const auto r = pass(devices, counter_sets);
    lock.lock();
    if (r) {
      retrying = false;
      backoff = options_.initial_backoff;
      next_resync = clock.steady_now() + options_.resync;
    } else {
      // Exponential back-off with up to 20% jitter; a newer update() waits for the retry too.
      const auto jitter = std::chrono::milliseconds(rng() % (backoff.count() / 5 + 1));
      retry_at = clock.steady_now() + backoff + jitter;
      retrying = true;
      log::warn(fmt::format("ResourceSlices of node {}: {}; retrying in {} ms", options_.node_name, r.error().message,
                            (backoff + jitter).count()));
      backoff = std::min(backoff * 2, options_.max_backoff);
    }
  }
}

Result<void> SlicePublisher::sync_once() {
  std::vector<PublishedDevice> devices;
  std::vector<CounterSet> counter_sets;
  {
    std::lock_guard lock(mu_);
    devices = devices_;
    counter_sets = counter_sets_;
    dirty_ = false;
  }
  return pass(devices, counter_sets);
}

Result<std::string> SlicePublisher::node_uid() {
  // Read at every pass: a Node deleted and created again has a new uid, and slices owned by the
  // old one would be garbage-collected.
  auto node = client_.get(kube::resources::kNodes, "", options_.node_name);
  if (!node) return std::unexpected(node.error().to_error());
  const std::string uid = text(*node, {"metadata", "uid"});
  if (uid.empty()) return fail(ErrorCode::kInternal, "node {} has no metadata.uid", options_.node_name);
  return uid;
}

Result<std::vector<json>> SlicePublisher::list_slices() {
  kube::ListOptions lo;
  lo.field_selector = fmt::format("spec.nodeName={},spec.driver={}", options_.node_name, options_.driver);
  auto items = client_.list_all(kube::resources::kResourceSlices, "", lo);
  if (!items) return std::unexpected(items.error().to_error());
  return std::move(*items);
}

Result<void> SlicePublisher::pass(const std::vector<PublishedDevice>& devices,
                                  const std::vector<CounterSet>& counter_sets) {
  uint64_t version = 0;
  {
    std::lock_guard lock(mu_);
    version = version_;
    ++stats_.syncs;
  }
  const auto failed = [&](Error e) -> Result<void> {
    std::lock_guard lock(mu_);
    ++stats_.failures;
    stats_.last_error = e.message;
    return std::unexpected(std::move(e));
  };
  if (options_.node_name.empty()) return failed(Error{ErrorCode::kInvalidArgument, "no node name"});
  auto uid = node_uid();
  if (!uid) return failed(uid.error());

  std::vector<json> specs = slice_specs(options_, devices, counter_sets);
  std::vector<std::string> hashes;
  for (const auto& s : specs) hashes.push_back(fmt::format("{:016x}", fnv1a(s.dump())));

  for (int attempt = 0;; ++attempt) {
    auto listed = list_slices();
    if (!listed) return failed(listed.error());
    std::map<std::string, json> existing;
    for (auto& s : *listed) {
      std::string name = text(s, {"metadata", "name"});  // before s is moved from
      existing.emplace(std::move(name), std::move(s));
    }

    // Up to date: every slice of the pool there with our content and one generation, and the
    // others (stale) of a lower generation or another pool — they only need deleting.
    bool current = true;
    int64_t generation = -1, highest = 0;
    for (const auto& [name, s] : existing) highest = std::max(highest, generation_of(s));
    for (size_t i = 0; i < specs.size() && current; ++i) {
      const auto it = existing.find(slice_name(options_, i));
      if (it == existing.end() || text(it->second, {"metadata", "annotations", kContentAnnotation}) != hashes[i] ||
          text(it->second, {"spec", "pool", "name"}) != options_.node_name || !owned_by(it->second, *uid) ||
          device_names(it->second.value("spec", json::object())) != device_names(specs[i]) ||
          (generation >= 0 && generation_of(it->second) != generation)) {
        current = false;
        break;
      }
      generation = generation_of(it->second);
    }
    std::vector<std::string> stale;
    for (const auto& [name, s] : existing) {
      bool ours = false;
      for (size_t i = 0; i < specs.size(); ++i) ours |= name == slice_name(options_, i);
      if (ours) continue;
      stale.push_back(name);
      if (text(s, {"spec", "pool", "name"}) == options_.node_name && generation_of(s) >= generation) current = false;
    }

    std::optional<kube::ApiError> error;
    int64_t wrote_generation = generation;
    if (!current) {
      wrote_generation = highest + 1;
      for (size_t i = 0; i < specs.size() && !error; ++i) {
        const std::string name = slice_name(options_, i);
        json spec = specs[i];
        spec["pool"]["generation"] = wrote_generation;
        json obj{{"apiVersion", "resource.k8s.io/v1"}, {"kind", "ResourceSlice"}, {"spec", std::move(spec)}};
        json meta{{"name", name},
                  {"ownerReferences", json::array({json{{"apiVersion", "v1"},
                                                        {"kind", "Node"},
                                                        {"name", options_.node_name},
                                                        {"uid", *uid},
                                                        {"controller", true}}})}};
        const auto it = existing.find(name);
        if (it != existing.end()) {
          // Keep what others put in metadata (labels, annotations, finalizers).
          const json& old = it->second["metadata"];
          for (const char* k : {"labels", "annotations", "finalizers"}) {
            if (old.contains(k)) meta[k] = old[k];
          }
          meta["resourceVersion"] = old.value("resourceVersion", "");
        }
        meta["annotations"][kContentAnnotation] = hashes[i];
        obj["metadata"] = std::move(meta);
        auto r = it != existing.end() ? client_.update(kube::resources::kResourceSlices, "", name, obj)
                                      : client_.create(kube::resources::kResourceSlices, "", obj);
        if (!r) {
          error = r.error();
          break;
        }
        {
          std::lock_guard lock(mu_);
          ++(it != existing.end() ? stats_.updates : stats_.creates);
        }
        if (specs[i].contains("sharedCounters") && !at(*r, {"spec"}).contains("sharedCounters")) {
          {
            std::lock_guard lock(mu_);
            stats_.counters_dropped = true;
          }
          return failed(Error{ErrorCode::kNotSupported,
                              fmt::format("the API server dropped spec.sharedCounters of ResourceSlice {}: it does not "
                                          "serve partitionable devices (feature gate DRAPartitionableDevices, "
                                          "Kubernetes 1.34+; on by default since 1.36)",
                                          name)});
        }
      }
    }
    for (size_t i = 0; i < stale.size() && !error; ++i) {
      kube::DeleteOptions d;
      d.uid = text(existing[stale[i]], {"metadata", "uid"});
      auto r = client_.remove(kube::resources::kResourceSlices, "", stale[i], d);
      if (!r && !r.error().not_found()) {
        error = r.error();
      } else if (r) {
        std::lock_guard lock(mu_);
        ++stats_.deletes;
      }
    }
    if (!error) {
      std::lock_guard lock(mu_);
      stats_.generation = wrote_generation;
      stats_.slices = specs.size();
      stats_.published = std::max(stats_.published, version);
      stats_.last_error.clear();
      cv_.notify_all();
      return {};
    }
    if (!race(*error) || attempt + 1 >= kRacesPerPass) return failed(error->to_error());
  }
}

Result<size_t> SlicePublisher::remove_all() {
  auto listed = list_slices();
  if (!listed) return std::unexpected(listed.error());
  size_t removed = 0;
  for (const auto& s : *listed) {
    auto r = client_.remove(kube::resources::kResourceSlices, "", text(s, {"metadata", "name"}));
    if (!r && !r.error().not_found()) return std::unexpected(r.error().to_error());
    if (r) ++removed;
  }
  std::lock_guard lock(mu_);
  stats_.deletes += removed;
  stats_.slices = 0;
  return removed;
}

}  // namespace kgpu::dra
