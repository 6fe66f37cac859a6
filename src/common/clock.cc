#include "common/clock.h"

#include <thread>

namespace kgpu {

namespace {

class RealClock final : public Clock {
 public:
  SteadyTime steady_now() const override { return std::chrono::steady_clock::now(); }
  SystemTime system_now() const override { return std::chrono::system_clock::now(); }
  bool wait_until(std::condition_variable& cv, std::unique_lock<std::mutex>& lock, SteadyTime deadline,
                  const std::function<bool()>& done) override {
    return cv.wait_until(lock, deadline, done);
  }
  void sleep_until(SteadyTime deadline) override { std::this_thread::sleep_until(deadline); }
};

// How often a FakeClock waiter looks at its condition in real time: a notify on the caller's
// condition variable reaches it directly; this only bounds how late an advance() is noticed when
// the waiter's lock and the clock's lock cannot be held together.
constexpr auto kFakePoll = std::chrono::milliseconds(2);

}  // namespace

Clock& Clock::real() {
  static RealClock clock;
  return clock;
}

FakeClock::FakeClock()
    : steady_(std::chrono::hours(24 * 365)),
      system_(std::chrono::sys_days(std::chrono::year(2026) / 1 / 1)) {}

Clock::SteadyTime FakeClock::steady_now() const {
  std::lock_guard lock(mu_);
  return steady_;
}

Clock::SystemTime FakeClock::system_now() const {
  std::lock_guard lock(mu_);
  return system_;
}

void FakeClock::advance(std::chrono::steady_clock::duration d) {
  {
    std::lock_guard lock(mu_);
    steady_ += d;
    system_ += std::chrono::duration_cast<SystemTime::duration>(d);
  }
  advanced_.notify_all();
}

bool FakeClock::wait_until(std::condition_variable& cv, std::unique_lock<std::mutex>& lock, SteadyTime deadline,
                           const std::function<bool()>& done) {
  // The caller's lock guards done(); the clock's own time is read without it. Waiting on the
  // caller's cv in short real-time slices sees both its notifications and advance().
  while (!done()) {
    if (steady_now() >= deadline) return done();
    cv.wait_for(lock, kFakePoll);
  }
  return true;
}

void FakeClock::sleep_until(SteadyTime deadline) {
  std::unique_lock lock(mu_);
  advanced_.wait(lock, [&] { return steady_ >= deadline; });
}

}  // namespace kgpu
