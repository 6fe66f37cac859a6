// The Prometheus client against Debian's real prometheus serving recorded history.
#include <gtest/gtest.h>

#include <cmath>
#include <ctime>

#include "prom/client.h"
#include "prom_fixture.h"

namespace kgpu {
namespace {

using namespace kgpu::testing;

// Two GPUs sampled every 60 s for an hour, ending on a whole minute an hour ago.
struct History {
  double end = 0;
  std::string text;
};
History history() {
  History h;
  const auto now = static_cast<long>(std::time(nullptr));
  h.end = static_cast<double>(now - now % 60 - 3600);
  h.text = "# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).\n# TYPE DCGM_FI_DEV_GPU_UTIL gauge\n";
  for (int gpu = 0; gpu < 2; ++gpu) {
    for (int i = 0; i <= 60; ++i) {
      const long t = static_cast<long>(h.end) - 3600 + 60 * i;
      const int value = gpu == 0 ? i : 0;
      h.text += "DCGM_FI_DEV_GPU_UTIL{gpu=\"" + std::to_string(gpu) + "\",Hostname=\"node-a\",pod=\"p" +
                std::to_string(gpu) + "\"} " + std::to_string(value) + " " + std::to_string(t) + "\n";
    }
  }
  h.text += "# EOF\n";
  return h;
}

prom::ClientOptions at(const std::string& url) {
  prom::ClientOptions o;
  o.url = url;
  return o;
}

class PromClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!prometheus_installed()) GTEST_SKIP() << "prometheus/promtool are not installed";
    server_ = std::make_unique<RecordedPrometheus>(h_.text);
    ASSERT_TRUE(server_->error().empty()) << server_->error();
    auto c = prom::Client::create(at(server_->url()));
    ASSERT_TRUE(c) << c.error().message;
    client_ = std::move(*c);
  }
  History h_ = history();
  std::unique_ptr<RecordedPrometheus> server_;
  std::unique_ptr<prom::Client> client_;
};

TEST_F(PromClientTest, InstantRangeAndScalarQueries) {
  // avg over the hour of 0..60 is 30 for gpu 0, 0 for gpu 1; evaluated at the last sample.
  auto v = client_->query("avg_over_time(DCGM_FI_DEV_GPU_UTIL[61m])", h_.end);
  ASSERT_TRUE(v) << v.error().message;
  ASSERT_EQ(v->type, prom::ResultType::kVector);
  ASSERT_EQ(v->series.size(), 2u);
  for (const auto& s : v->series) {
    EXPECT_DOUBLE_EQ(s.samples[0].t, h_.end);
    EXPECT_DOUBLE_EQ(s.samples[0].v, s.label("gpu") == "0" ? 30 : 0) << s.label("gpu");
    EXPECT_EQ(s.label("Hostname"), "node-a");
  }

  auto m = client_->query_range(prom::RangeQuery{"DCGM_FI_DEV_GPU_UTIL{gpu=\"0\"}", h_.end - 600, h_.end, 300});
  ASSERT_TRUE(m) << m.error().message;
  ASSERT_EQ(m->type, prom::ResultType::kMatrix);
  ASSERT_EQ(m->series.size(), 1u);
  ASSERT_EQ(m->series[0].samples.size(), 3u);
  EXPECT_DOUBLE_EQ(m->series[0].samples[0].v, 50);
  EXPECT_DOUBLE_EQ(m->series[0].samples[1].v, 55);
  EXPECT_DOUBLE_EQ(m->series[0].samples[2].v, 60);
  EXPECT_DOUBLE_EQ(m->series[0].samples[2].t, h_.end);

  auto s = client_->query("scalar(sum(DCGM_FI_DEV_GPU_UTIL))", h_.end);
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(s->type, prom::ResultType::kScalar);
  EXPECT_DOUBLE_EQ(s->scalar.v, 60);
}

TEST_F(PromClientTest, PrometheusErrorsArePassedThrough) {
  auto r = client_->query("avg_over_time(DCGM_FI_DEV_GPU_UTIL[5m", h_.end);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
  EXPECT_TRUE(r.error().message.starts_with("query 'avg_over_time(DCGM_FI_DEV_GPU_UTIL[5m': bad_data: "))
      << r.error().message;
  EXPECT_NE(r.error().message.find("parse error"), std::string::npos) << r.error().message;

  // A range with more points than Prometheus allows (11,000) is its error, not ours.
  auto wide = client_->query_range(prom::RangeQuery{"up", 0, 1e6, 1});
  ASSERT_FALSE(wide);
  EXPECT_NE(wide.error().message.find("bad_data"), std::string::npos) << wide.error().message;
}

TEST_F(PromClientTest, AnswersOverOurLimitsAreRefused) {
  auto limited = at(server_->url());
  limited.max_series = 1;
  auto c = prom::Client::create(limited);
  ASSERT_TRUE(c);
  auto r = (*c)->query("DCGM_FI_DEV_GPU_UTIL", h_.end);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("2 series, more than the limit of 1"), std::string::npos) << r.error().message;

  auto tiny = at(server_->url());
  tiny.max_body = 100;
  auto small = prom::Client::create(tiny);
  ASSERT_TRUE(small);
  auto big = (*small)->query_range(prom::RangeQuery{"DCGM_FI_DEV_GPU_UTIL", h_.end - 3600, h_.end, 60});
  ASSERT_FALSE(big);
  EXPECT_NE(big.error().message.find("larger than"), std::string::npos) << big.error().message;
}

}  // namespace
}  // namespace kgpu
