// Events through events.k8s.io/v1, written in the background and aggregated so that a loop cannot
// flood the API.
//
// record() never waits on the API: it decides what to write and queues it; one writer thread owned
// by the recorder performs the writes in order. The queue holds at most `queue_limit` writes; a
// write that does not fit is dropped and counted (as client-go's broadcaster drops when its channel
// is full), so a slow or absent API server costs memory bounded by the limit, never a caller's time.
//
// The first event for a (regarding object, type, reason, action, note) is created. Later identical
// events within `series_window` become a series: the count and lastObservedTime are kept locally
// and written with one PATCH at most every `series_flush` (and on flush()), as client-go's event
// library does with its series. Distinct events are limited per regarding object by a token bucket
// (burst `burst`, refilled at `qps`), as client-go's spam filter does per source and object; the
// excess is counted and dropped. At most `max_objects` objects' buckets are kept (least recently
// used first out).
//
// Thread safety: every method may be called from any thread. The writer uses `client`, which must
// outlive the recorder; the destructor waits for the write in flight (bounded by the client's
// timeout), drops what is still queued and joins the writer.
#pragma once

#include <nlohmann/json.hpp>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <list>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>

#include "apiclient/client.h"
#include "common/clock.h"

namespace kgpu::kube {

struct EventRecorderOptions {
  std::string reporting_controller;  // "kgpu.io/scheduler"
  std::string reporting_instance;    // the pod or host
  std::chrono::milliseconds series_window{6 * 60 * 1000};
  std::chrono::milliseconds series_flush{30'000};
  int burst = 25;            // distinct events per regarding object at once
  double qps = 1.0 / 300;    // distinct events per regarding object, after the burst
  size_t max_objects = 4096;  // regarding objects whose buckets are kept
  size_t queue_limit = 1000;  // writes waiting for the writer
  // Steady time for the token buckets and series windows, system time for eventTime and
  // lastObservedTime, and flush()'s bounded wait (common/clock.h).
  Clock* clock = &Clock::real();
};

// What an event is about: a v1 ObjectReference ({kind, namespace, name, uid, apiVersion}).
struct EventTarget {
  std::string api_version = "v1", kind, ns, name, uid;
};

class EventRecorder {
 public:
  EventRecorder(Client& client, EventRecorderOptions options);
  ~EventRecorder();
  EventRecorder(const EventRecorder&) = delete;
  EventRecorder& operator=(const EventRecorder&) = delete;

  // `type` is Normal or Warning; reason and action are cut to 128 characters, note to 1 kB.
  void record(const EventTarget& regarding, const std::string& type, const std::string& reason,
              const std::string& action, const std::string& note);
  // Queues the pending series counts and waits until every queued write is done, at most `wait`;
  // false when writes were still queued then.
  bool flush(std::chrono::milliseconds wait = std::chrono::milliseconds::max());
  uint64_t dropped() const;  // by the per-object limit or a full queue
  uint64_t writes() const;   // creates and patches attempted

 private:
  struct Series {
    std::string ns, name;  // the Event object
    int64_t count = 1;
    int64_t queued_count = 1;  // the count the last queued write carries
    Clock::SteadyTime last_seen, last_write;
    std::string last_observed;  // MicroTime
  };
  struct Bucket {
    double tokens;
    Clock::SteadyTime refilled;
    std::list<std::string>::iterator lru;
  };
  struct Write {
    bool create = false;
    std::string ns, name;
    std::string series_key;  // create: the series to forget if the create fails
    nlohmann::json body;
  };

  bool take_token(const std::string& object, Clock::SteadyTime now);
  bool enqueue(Write w);  // false (and counted) when the queue is full
  void queue_series(Series& s, Clock::SteadyTime now);
  void expire_series(Clock::SteadyTime now);
  void run();

  Client& client_;
  EventRecorderOptions options_;
  mutable std::mutex mu_;
  std::condition_variable wake_, idle_;
  std::map<std::string, Series> series_;
  std::unordered_map<std::string, Bucket> buckets_;
  std::list<std::string> lru_;  // most recently used first
  std::deque<Write> queue_;
  bool busy_ = false, stop_ = false;
  Clock::SteadyTime expired_at_;
  uint64_t dropped_ = 0, writes_ = 0;
  std::thread writer_;
};

}  // namespace kgpu::kube
