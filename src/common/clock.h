// The time seam of the node-side code: steady time for intervals and deadlines, system time for
// timestamps, and waiting. Production code takes a Clock& (default: Clock::real()); tests pass a
// FakeClock and move time forward by hand, so "nothing happens for 10 minutes" takes no time.
//
// Thread safety: every member may be called from any thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>

namespace kgpu {

class Clock {
 public:
  using SteadyTime = std::chrono::steady_clock::time_point;
  using SystemTime = std::chrono::system_clock::time_point;

  virtual ~Clock() = default;
  virtual SteadyTime steady_now() const = 0;
  virtual SystemTime system_now() const = 0;
  // Seconds since the Unix epoch (system time).
  double unix_now() const { return std::chrono::duration<double>(system_now().time_since_epoch()).count(); }

  // Waits on `cv` (with `lock` held on entry and exit) until `done()` holds or steady time reaches
  // `deadline`; returns done(). A fake clock wakes waiters when it is advanced; a waiter must still
  // be notified through `cv` for changes of `done()`.
  virtual bool wait_until(std::condition_variable& cv, std::unique_lock<std::mutex>& lock, SteadyTime deadline,
                          const std::function<bool()>& done) = 0;
  bool wait_for(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
                std::chrono::steady_clock::duration timeout, const std::function<bool()>& done) {
    return wait_until(cv, lock, steady_now() + timeout, done);
  }
  // Sleeps until steady time reaches `deadline`.
  virtual void sleep_until(SteadyTime deadline) = 0;
  void sleep_for(std::chrono::steady_clock::duration d) { sleep_until(steady_now() + d); }

  // The process's real clock (std::chrono's steady and system clocks).
  static Clock& real();
};

// Time that moves only when advance() is called. Starts at an arbitrary steady time and at
// 2026-01-01T00:00:00Z. Waiters (wait_until, sleep_until) on a FakeClock re-check their condition
// and deadline whenever time is advanced; between advances they block (with a short real-time
// poll so that a waiter registered on a condition variable the clock does not know is woken).
class FakeClock final : public Clock {
 public:
  FakeClock();
  SteadyTime steady_now() const override;
  SystemTime system_now() const override;
  bool wait_until(std::condition_variable& cv, std::unique_lock<std::mutex>& lock, SteadyTime deadline,
                  const std::function<bool()>& done) override;
  void sleep_until(SteadyTime deadline) override;

  // Moves both steady and system time forward by `d` and wakes every waiter.
  void advance(std::chrono::steady_clock::duration d);

 private:
  mutable std::mutex mu_;
  std::condition_variable advanced_;
  SteadyTime steady_;
  SystemTime system_;
};

}  // namespace kgpu
