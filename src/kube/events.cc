#include "kube/events.h"

#include <fmt/format.h>

#include <algorithm>
#include <random>

#include "common/timestamp.h"

namespace kgpu::kube {

using nlohmann::json;

namespace {

std::string cut(const std::string& s, size_t n) { return s.size() <= n ? s : s.substr(0, n); }

std::string suffix() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return fmt::format("{:016x}", rng());
}

}  // namespace

EventRecorder::EventRecorder(Client& client, EventRecorderOptions options)
    : client_(client), options_(std::move(options)), tokens_(options_.burst), refilled_(std::chrono::steady_clock::now()) {}

uint64_t EventRecorder::dropped() const {
  std::lock_guard lock(mu_);
  return dropped_;
}

uint64_t EventRecorder::writes() const {
  std::lock_guard lock(mu_);
  return writes_;
}

bool EventRecorder::take_token() {
  const auto now = std::chrono::steady_clock::now();
  tokens_ = std::min<double>(options_.burst, tokens_ + std::chrono::duration<double>(now - refilled_).count() * options_.qps);
  refilled_ = now;
  if (tokens_ < 1) return false;
  tokens_ -= 1;
  return true;
}

void EventRecorder::write_series(Series& s) {
  if (s.count == s.written_count) return;
  const json patch{{"series", {{"count", s.count}, {"lastObservedTime", s.last_observed}}}};
  ++writes_;
  if (client_.patch(resources::kEventsV1, s.ns, s.name, PatchType::kMerge, patch)) s.written_count = s.count;
  s.last_write = std::chrono::steady_clock::now();
}

void EventRecorder::record(const EventTarget& regarding, const std::string& type, const std::string& reason,
                           const std::string& action, const std::string& note) {
  const std::string r = cut(reason, 128), a = cut(action, 128), n = cut(note, 1024);
  const std::string key = fmt::format("{}|{}|{}|{}|{}|{}|{}|{}", regarding.kind, regarding.ns, regarding.name,
                                      regarding.uid, type, r, a, n);
  const auto now = std::chrono::steady_clock::now();
  std::lock_guard lock(mu_);
  // Forget series that ended.
  for (auto it = series_.begin(); it != series_.end();) {
    if (now - it->second.last_seen > options_.series_window) {
      write_series(it->second);
      it = series_.erase(it);
    } else {
      ++it;
    }
  }
  if (auto it = series_.find(key); it != series_.end()) {
    Series& s = it->second;
    ++s.count;
    s.last_seen = now;
    s.last_observed = format_rfc3339(std::chrono::system_clock::now(), 6);
    if (now - s.last_write >= options_.series_flush) write_series(s);
    return;
  }
  if (!take_token()) {
    ++dropped_;
    return;
  }
  const std::string ns = regarding.ns.empty() ? "default" : regarding.ns;
  const std::string name = (regarding.name.empty() ? "event" : regarding.name) + "." + suffix();
  json ref{{"apiVersion", regarding.api_version}, {"kind", regarding.kind}, {"name", regarding.name}};
  if (!regarding.ns.empty()) ref["namespace"] = regarding.ns;
  if (!regarding.uid.empty()) ref["uid"] = regarding.uid;
  const json event{{"apiVersion", "events.k8s.io/v1"},
                   {"kind", "Event"},
                   {"metadata", {{"name", name}, {"namespace", ns}}},
                   {"eventTime", format_rfc3339(std::chrono::system_clock::now(), 6)},
                   {"reportingController", options_.reporting_controller},
                   {"reportingInstance", options_.reporting_instance},
                   {"action", a},
                   {"reason", r},
                   {"regarding", ref},
                   {"note", n},
                   {"type", type}};
  ++writes_;
  if (!client_.create(resources::kEventsV1, ns, event)) return;
  series_[key] = Series{ns, name, 1, 1, now, now, now, format_rfc3339(std::chrono::system_clock::now(), 6)};
}

void EventRecorder::flush() {
  std::lock_guard lock(mu_);
  for (auto& [k, s] : series_) write_series(s);
}

}  // namespace kgpu::kube
