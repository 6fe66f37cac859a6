#include "apiclient/events.h"

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
    : client_(client), options_(std::move(options)), expired_at_(options_.clock->steady_now()), writer_([this] { run(); }) {}

EventRecorder::~EventRecorder() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  writer_.join();
}

uint64_t EventRecorder::dropped() const {
  std::lock_guard lock(mu_);
  return dropped_;
}

uint64_t EventRecorder::writes() const {
  std::lock_guard lock(mu_);
  return writes_;
}

bool EventRecorder::take_token(const std::string& object, Clock::SteadyTime now) {
  auto [it, fresh] = buckets_.try_emplace(object);
  Bucket& b = it->second;
  if (fresh) {
    b.tokens = options_.burst;
    b.refilled = now;
    lru_.push_front(object);
    b.lru = lru_.begin();
    if (buckets_.size() > options_.max_objects) {
      buckets_.erase(lru_.back());
      lru_.pop_back();
    }
  } else {
    lru_.splice(lru_.begin(), lru_, b.lru);
    b.tokens = std::min<double>(options_.burst,
                                b.tokens + std::chrono::duration<double>(now - b.refilled).count() * options_.qps);
    b.refilled = now;
  }
  if (b.tokens < 1) return false;
  b.tokens -= 1;
  return true;
}

bool EventRecorder::enqueue(Write w) {
  if (queue_.size() >= options_.queue_limit) {
    ++dropped_;
    return false;
  }
  queue_.push_back(std::move(w));
  wake_.notify_one();
  return true;
}

void EventRecorder::queue_series(Series& s, Clock::SteadyTime now) {
  if (s.count == s.queued_count) return;
  Write w{false, s.ns, s.name, {}, json{{"series", {{"count", s.count}, {"lastObservedTime", s.last_observed}}}}};
  if (enqueue(std::move(w))) s.queued_count = s.count;
  s.last_write = now;
}

void EventRecorder::expire_series(Clock::SteadyTime now) {
  // At most once a second, so a record() costs a lookup, not a walk over every series.
  if (now - expired_at_ < std::chrono::seconds(1)) return;
  expired_at_ = now;
  for (auto it = series_.begin(); it != series_.end();) {
    if (now - it->second.last_seen > options_.series_window) {
      queue_series(it->second, now);
      it = series_.erase(it);
    } else {
      ++it;
    }
  }
}

void EventRecorder::record(const EventTarget& regarding, const std::string& type, const std::string& reason,
                           const std::string& action, const std::string& note) {
  const std::string r = cut(reason, 128), a = cut(action, 128), n = cut(note, 1024);
  const std::string object = fmt::format("{}|{}|{}|{}", regarding.kind, regarding.ns, regarding.name, regarding.uid);
  const std::string key = fmt::format("{}|{}|{}|{}|{}", object, type, r, a, n);
  const auto now = options_.clock->steady_now();
  const std::string observed = format_rfc3339(options_.clock->system_now(), 6);
  std::lock_guard lock(mu_);
  expire_series(now);
  if (auto it = series_.find(key); it != series_.end()) {
    Series& s = it->second;
    ++s.count;
    s.last_seen = now;
    s.last_observed = observed;
    if (now - s.last_write >= options_.series_flush) queue_series(s, now);
    return;
  }
  if (!take_token(object, now)) {
    ++dropped_;
    return;
  }
  const std::string ns = regarding.ns.empty() ? "default" : regarding.ns;
  const std::string name = (regarding.name.empty() ? "event" : regarding.name) + "." + suffix();
  json ref{{"apiVersion", regarding.api_version}, {"kind", regarding.kind}, {"name", regarding.name}};
  if (!regarding.ns.empty()) ref["namespace"] = regarding.ns;
  if (!regarding.uid.empty()) ref["uid"] = regarding.uid;
  json event{{"apiVersion", "events.k8s.io/v1"},
             {"kind", "Event"},
             {"metadata", {{"name", name}, {"namespace", ns}}},
             {"eventTime", observed},
             {"reportingController", options_.reporting_controller},
             {"reportingInstance", options_.reporting_instance},
             {"action", a},
             {"reason", r},
             {"regarding", std::move(ref)},
             {"note", n},
             {"type", type}};
  if (!enqueue(Write{true, ns, name, key, std::move(event)})) return;
  series_[key] = Series{ns, name, 1, 1, now, now, observed};
}

bool EventRecorder::flush(std::chrono::milliseconds wait) {
  std::unique_lock lock(mu_);
  const auto now = options_.clock->steady_now();
  for (auto& [k, s] : series_) queue_series(s, now);
  const auto done = [&] { return queue_.empty() && !busy_; };
  if (wait == std::chrono::milliseconds::max()) {
    idle_.wait(lock, done);
    return true;
  }
  return options_.clock->wait_for(idle_, lock, wait, done);
}

void EventRecorder::run() {
  std::unique_lock lock(mu_);
  while (true) {
    wake_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (stop_) {
      dropped_ += queue_.size();
      queue_.clear();
      break;
    }
    Write w = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    ++writes_;
    lock.unlock();
    const bool ok = w.create ? client_.create(resources::kEventsV1, w.ns, w.body).has_value()
                             : client_.patch(resources::kEventsV1, w.ns, w.name, PatchType::kMerge, w.body).has_value();
    lock.lock();
    // A series whose Event was never created starts over with the next identical event.
    if (!ok && w.create)
      if (auto it = series_.find(w.series_key); it != series_.end() && it->second.name == w.name) series_.erase(it);
    busy_ = false;
    if (queue_.empty()) idle_.notify_all();
  }
  idle_.notify_all();
}

}  // namespace kgpu::kube
