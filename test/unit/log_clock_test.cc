// The node-side seams: the log line formats and levels, and the fake clock that tests drive.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "common/clock.h"
#include "common/log.h"

namespace kgpu {
namespace {

using namespace std::chrono_literals;

// 2026-12-01T18:01:31.123Z
constexpr double kTs = 1796148091.123;

TEST(Log, TextLineIsKeyValueWithTheMessageQuoted) {
  EXPECT_EQ(log::render(log::Format::kText, kTs, log::Level::kInfo, "registered with the kubelet",
                        {log::kv("resource", "nvidia.com/gpu"), log::kv("gpu", 0)}),
            "ts=2026-12-01T18:01:31.123Z level=info msg=\"registered with the kubelet\" resource=nvidia.com/gpu gpu=0");
}

TEST(Log, TextValuesWithSpacesQuotesOrNewlinesAreQuotedAndEscaped) {
  EXPECT_EQ(log::render(log::Format::kText, kTs, log::Level::kWarn, "a \"b\"\nc",
                        {log::kv("file", "/etc/my config.yaml"), log::kv("empty", "")}),
            "ts=2026-12-01T18:01:31.123Z level=warn msg=\"a \\\"b\\\"\\nc\" file=\"/etc/my config.yaml\" empty=\"\"");
  EXPECT_EQ(log::render(log::Format::kText, kTs, log::Level::kError, "x", {}),
            "ts=2026-12-01T18:01:31.123Z level=error msg=\"x\"");
}

TEST(Log, JsonLineIsOneObject) {
  EXPECT_EQ(log::render(log::Format::kJson, kTs, log::Level::kDebug, "say \"hi\"\n", {log::kv("gpu", 3)}),
            R"({"ts":"2026-12-01T18:01:31.123Z","level":"debug","msg":"say \"hi\"\n","gpu":"3"})");
}

TEST(Log, ParsesLevelsAndFormats) {
  EXPECT_EQ(log::parse_level("warning").value(), log::Level::kWarn);
  EXPECT_EQ(log::parse_level("debug").value(), log::Level::kDebug);
  EXPECT_FALSE(log::parse_level("loud"));
  EXPECT_EQ(log::parse_format("json").value(), log::Format::kJson);
  EXPECT_FALSE(log::parse_format("xml"));
}

struct Capture : log::Sink {
  std::vector<std::string> lines;
  void write(std::string_view line) override { lines.emplace_back(line); }
};

TEST(Log, LevelFilterAndSink) {
  Capture capture;
  log::Sink* old = log::set_sink(&capture);
  log::configure(log::Level::kWarn, log::Format::kJson);
  log::info("dropped");
  log::warn("kept", {log::kv("resource", "nvidia.com/gpu")});
  log::configure(log::Level::kInfo, log::Format::kText);
  log::set_sink(old);
  ASSERT_EQ(capture.lines.size(), 1u);
  EXPECT_NE(capture.lines[0].find(R"("level":"warn","msg":"kept","resource":"nvidia.com/gpu"})"), std::string::npos)
      << capture.lines[0];
}

TEST(FakeClock, MovesOnlyWhenAdvanced) {
  FakeClock clock;
  const auto t0 = clock.steady_now();
  const auto s0 = clock.system_now();
  std::this_thread::sleep_for(5ms);
  EXPECT_EQ(clock.steady_now(), t0);
  clock.advance(10min);
  EXPECT_EQ(clock.steady_now() - t0, 10min);
  EXPECT_EQ(clock.system_now() - s0, 10min);
}

TEST(FakeClock, WaitReturnsWhenTimeReachesTheDeadlineOrTheConditionHolds) {
  FakeClock clock;
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  std::atomic<bool> returned{false};
  const auto deadline = clock.steady_now() + 1h;  // fixed before the thread runs
  std::thread waiter([&] {
    std::unique_lock lock(mu);
    EXPECT_FALSE(clock.wait_until(cv, lock, deadline, [&] { return done; }));
    returned = true;
  });
  clock.advance(59min);
  std::this_thread::sleep_for(20ms);
  EXPECT_FALSE(returned) << "an hour has not passed yet";
  clock.advance(1min);
  waiter.join();
  EXPECT_TRUE(returned);

  std::thread notified([&] {
    std::unique_lock lock(mu);
    EXPECT_TRUE(clock.wait_for(cv, lock, 1h, [&] { return done; }));
  });
  {
    std::lock_guard lock(mu);
    done = true;
  }
  cv.notify_all();
  notified.join();
}

TEST(FakeClock, SleepEndsWhenAdvancedPastTheDeadline) {
  FakeClock clock;
  std::atomic<bool> woke{false};
  const auto deadline = clock.steady_now() + 30s;  // fixed before the thread runs
  std::thread sleeper([&] {
    clock.sleep_until(deadline);
    woke = true;
  });
  clock.advance(29s);
  std::this_thread::sleep_for(20ms);
  EXPECT_FALSE(woke);
  clock.advance(1s);
  sleeper.join();
  EXPECT_TRUE(woke);
}

TEST(RealClock, TellsTheTime) {
  const auto a = Clock::real().steady_now();
  Clock::real().sleep_for(1ms);
  EXPECT_GE(Clock::real().steady_now() - a, 1ms);
  EXPECT_GT(Clock::real().unix_now(), 1.7e9);
}

}  // namespace
}  // namespace kgpu
