// kube-scheduler's scheduling queue in trace time, for the simulator's time mode (simulator.h,
// Pending::kQueue) and the admission evaluation (queue_eval.h): entries are tried from the active
// heap, top first (`Later` orders it as std::priority_queue does); one that fits nowhere is parked
// with the end of its backoff; a departure (capacity freed) moves every parked entry back, to the
// active heap when its backoff has passed, else to wait for it there. Nothing else moves them:
// arrivals only take capacity.
//
// Thread safety: none (one run's loop).
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <queue>
#include <utility>
#include <vector>

namespace kgpu::sim {

template <typename T, typename Later>
class SchedulingQueue {
 public:
  explicit SchedulingQueue(Later later) : active_(std::move(later)) {}

  void push(T e) { active_.push(std::move(e)); }
  bool ready() const { return !active_.empty(); }
  T pop() {
    T e = active_.top();
    active_.pop();
    return e;
  }
  // `e` fits nowhere now: parked until a departure, and not tried again before `until`.
  void park(T e, int64_t until) { parked_.emplace_back(until, std::move(e)); }
  // Capacity was freed at `now`: the parked entries go back.
  void departure(int64_t now) {
    for (auto& [until, e] : parked_) {
      if (until <= now) {
        active_.push(std::move(e));
      } else {
        backoff_.emplace(until, std::move(e));
      }
    }
    parked_.clear();
  }
  // The backoffs over by `now` end: their entries go to the active heap.
  void tick(int64_t now) {
    while (!backoff_.empty() && backoff_.top().first <= now) {
      active_.push(backoff_.top().second);
      backoff_.pop();
    }
  }
  // When the earliest backoff ends; INT64_MAX when none.
  int64_t next_backoff() const { return backoff_.empty() ? std::numeric_limits<int64_t>::max() : backoff_.top().first; }

 private:
  using Timed = std::pair<int64_t, T>;
  std::priority_queue<T, std::vector<T>, Later> active_;
  std::vector<Timed> parked_;
  std::priority_queue<Timed, std::vector<Timed>, std::greater<>> backoff_;
};

}  // namespace kgpu::sim
