// Events through events.k8s.io/v1, aggregated so that a loop cannot flood the API.
//
// The first event for a (regarding object, type, reason, action, note) is created at once. Later
// identical events within `series_window` become a series: the count and lastObservedTime are kept
// locally and written with one PATCH at most every `series_flush` (and on flush()), as client-go's
// event library does with its series. Distinct events are limited by a token bucket (burst 25,
// refilled at `qps`); the excess is counted and dropped, never queued without bound.
//
// Thread safety: record() may be called from any thread; writes happen on the caller's thread.
#pragma once

#include <nlohmann/json.hpp>

#include <chrono>
#include <map>
#include <mutex>
#include <string>

#include "kube/client.h"

namespace kgpu::kube {

struct EventRecorderOptions {
  std::string reporting_controller;  // "kgpu.io/scheduler"
  std::string reporting_instance;    // the pod or host
  std::chrono::milliseconds series_window{6 * 60 * 1000};
  std::chrono::milliseconds series_flush{30'000};
  int burst = 25;
  double qps = 1.0 / 5;  // distinct events, after the burst
};

// What an event is about: a v1 ObjectReference ({kind, namespace, name, uid, apiVersion}).
struct EventTarget {
  std::string api_version = "v1", kind, ns, name, uid;
};

class EventRecorder {
 public:
  EventRecorder(Client& client, EventRecorderOptions options);
  // `type` is Normal or Warning; reason and action are cut to 128 characters, note to 1 kB.
  void record(const EventTarget& regarding, const std::string& type, const std::string& reason,
              const std::string& action, const std::string& note);
  // Writes pending series counts now.
  void flush();
  uint64_t dropped() const;
  uint64_t writes() const;

 private:
  struct Series {
    std::string ns, name;  // the Event object
    int64_t count = 1;
    int64_t written_count = 1;
    std::chrono::steady_clock::time_point first_seen, last_seen, last_write;
    std::string last_observed;  // MicroTime
  };
  bool take_token();
  void write_series(Series& s);

  Client& client_;
  EventRecorderOptions options_;
  mutable std::mutex mu_;
  std::map<std::string, Series> series_;
  double tokens_;
  std::chrono::steady_clock::time_point refilled_;
  uint64_t dropped_ = 0, writes_ = 0;
};

}  // namespace kgpu::kube
