// Decoding of Prometheus HTTP API answers: result types, errors passed through, limits.
#include <gtest/gtest.h>

#include <cmath>

#include "prom/client.h"

namespace kgpu::prom {
namespace {

ClientOptions limits() { return ClientOptions{}; }

ClientOptions at(std::string url, std::chrono::milliseconds timeout = std::chrono::milliseconds(60'000)) {
  ClientOptions o;
  o.url = std::move(url);
  o.timeout = timeout;
  return o;
}

TEST(PromDecode, Vector) {
  auto r = decode_answer(
      R"({"status":"success","data":{"resultType":"vector","result":[
          {"metric":{"__name__":"DCGM_FI_DEV_GPU_UTIL","pod":"a"},"value":[1700000000.5,"42"]},
          {"metric":{"pod":"b"},"value":[1700000000.5,"NaN"]}]}})",
      200, "DCGM_FI_DEV_GPU_UTIL", limits());
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->type, ResultType::kVector);
  ASSERT_EQ(r->series.size(), 2u);
  EXPECT_EQ(r->series[0].label("pod"), "a");
  EXPECT_EQ(r->series[0].label("__name__"), "DCGM_FI_DEV_GPU_UTIL");
  EXPECT_EQ(r->series[0].label("missing"), "");
  EXPECT_DOUBLE_EQ(r->series[0].samples[0].t, 1700000000.5);
  EXPECT_DOUBLE_EQ(r->series[0].samples[0].v, 42);
  EXPECT_TRUE(std::isnan(r->series[1].samples[0].v));
}

TEST(PromDecode, MatrixScalarString) {
  auto m = decode_answer(
      R"({"status":"success","data":{"resultType":"matrix","result":[
          {"metric":{"gpu":"0"},"values":[[10,"1"],[20,"+Inf"],[30,"-2.5e3"]]}]}})",
      200, "x[1m]", limits());
  ASSERT_TRUE(m) << m.error().message;
  EXPECT_EQ(m->type, ResultType::kMatrix);
  ASSERT_EQ(m->series[0].samples.size(), 3u);
  EXPECT_TRUE(std::isinf(m->series[0].samples[1].v));
  EXPECT_DOUBLE_EQ(m->series[0].samples[2].v, -2500);

  auto s = decode_answer(R"({"status":"success","data":{"resultType":"scalar","result":[5,"3.25"]}})", 200, "3.25",
                         limits());
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(s->type, ResultType::kScalar);
  EXPECT_DOUBLE_EQ(s->scalar.v, 3.25);
  EXPECT_DOUBLE_EQ(s->scalar.t, 5);

  auto str = decode_answer(R"({"status":"success","data":{"resultType":"string","result":[5,"hello"]}})", 200,
                           "\"hello\"", limits());
  ASSERT_TRUE(str) << str.error().message;
  EXPECT_EQ(str->type, ResultType::kString);
  EXPECT_EQ(str->string_value, "hello");
}

TEST(PromDecode, ErrorsNameTheQueryAndPassThroughPrometheus) {
  auto r = decode_answer(R"({"status":"error","errorType":"bad_data","error":"1:9: parse error: unclosed"})", 400,
                         "rate(x[5m", limits());
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(r.error().message, "query 'rate(x[5m': bad_data: 1:9: parse error: unclosed");

  auto t =
      decode_answer(R"({"status":"error","errorType":"timeout","error":"query timed out in expression evaluation"})",
                    503, "up", limits());
  ASSERT_FALSE(t);
  EXPECT_EQ(t.error().code, ErrorCode::kUnavailable);
  EXPECT_NE(t.error().message.find("query 'up': timeout: query timed out"), std::string::npos);

  auto html = decode_answer("<html>bad gateway</html>", 502, "up", limits());
  ASSERT_FALSE(html);
  EXPECT_EQ(html.error().code, ErrorCode::kUnavailable);
  EXPECT_NE(html.error().message.find("HTTP 502"), std::string::npos);
  EXPECT_NE(html.error().message.find("bad gateway"), std::string::npos);
}

TEST(PromDecode, MalformedAnswersAreRefused) {
  const char* bad[] = {
      R"({"status":"success"})",
      R"({"status":"success","data":{"resultType":"vector"}})",
      R"({"status":"success","data":{"resultType":"vector","result":{}}})",
      R"({"status":"success","data":{"resultType":"vector","result":[{"value":[1,"2"]}]}})",
      R"({"status":"success","data":{"resultType":"vector","result":[{"metric":{"a":1},"value":[1,"2"]}]}})",
      R"({"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,2]}]}})",
      R"({"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"two"]}]}})",
      R"({"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"0x10"]}]}})",
      R"({"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"value":[1,"2"]}]}})",
      R"({"status":"success","data":{"resultType":"histogram","result":[]}})",
      R"({"status":"maybe","data":{}})",
      R"([1,2,3])",
  };
  for (const char* body : bad) {
    auto r = decode_answer(body, 200, "q", limits());
    EXPECT_FALSE(r) << body;
    if (!r) {
      EXPECT_TRUE(r.error().message.starts_with("query 'q': ")) << r.error().message;
    }
  }
}

TEST(PromDecode, LimitsOnSeriesSamplesAndDepth) {
  ClientOptions o;
  o.max_series = 2;
  auto r = decode_answer(
      R"({"status":"success","data":{"resultType":"vector","result":[
          {"metric":{},"value":[1,"1"]},{"metric":{},"value":[1,"1"]},{"metric":{},"value":[1,"1"]}]}})",
      200, "q", o);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("3 series, more than the limit of 2"), std::string::npos) << r.error().message;

  o = ClientOptions{};
  o.max_samples = 3;
  auto m = decode_answer(
      R"({"status":"success","data":{"resultType":"matrix","result":[
          {"metric":{},"values":[[1,"1"],[2,"1"]]},{"metric":{},"values":[[1,"1"],[2,"1"]]}]}})",
      200, "q", o);
  ASSERT_FALSE(m);
  EXPECT_NE(m.error().message.find("more samples than the limit"), std::string::npos) << m.error().message;

  std::string deep(100, '[');
  deep += std::string(100, ']');
  auto d = decode_answer(deep, 200, "q", ClientOptions{});
  ASSERT_FALSE(d);
  EXPECT_NE(d.error().message.find("nested deeper"), std::string::npos);
}

TEST(PromDecode, LongQueriesAreShortenedInErrors) {
  const std::string q(1000, 'x');
  auto r = decode_answer(R"({"status":"error","errorType":"bad_data","error":"e"})", 400, q, ClientOptions{});
  ASSERT_FALSE(r);
  EXPECT_LT(r.error().message.size(), 300u);
  EXPECT_NE(r.error().message.find("...'"), std::string::npos);
}

TEST(PromValue, Grammar) {
  EXPECT_EQ(parse_value("1.5"), 1.5);
  EXPECT_EQ(parse_value("-3e2"), -300);
  EXPECT_TRUE(std::isinf(*parse_value("+Inf")));
  EXPECT_LT(*parse_value("-Inf"), 0);
  EXPECT_TRUE(std::isnan(*parse_value("NaN")));
  EXPECT_FALSE(parse_value(""));
  EXPECT_FALSE(parse_value("1.5x"));
  EXPECT_FALSE(parse_value("nan"));
  EXPECT_FALSE(parse_value("infinity"));
  EXPECT_FALSE(parse_value("0x1p3"));
  EXPECT_FALSE(parse_value(" 1"));
}

TEST(PromClient, RefusesBadUrls) {
  EXPECT_FALSE(Client::create(at("prometheus:9090")));
  EXPECT_FALSE(Client::create(at("ftp://x")));
  auto ok = Client::create(at("http://127.0.0.1:9090/"));
  ASSERT_TRUE(ok);
  EXPECT_EQ((*ok)->options().url, "http://127.0.0.1:9090");
}

TEST(PromClient, UnreachableServerNamesQueryAndUrl) {
  // Port 1 on loopback: nothing listens there (connection refused at once).
  auto c = Client::create(at("http://127.0.0.1:1", std::chrono::milliseconds(2000)));
  ASSERT_TRUE(c);
  auto r = (*c)->query("up");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kUnavailable);
  EXPECT_NE(r.error().message.find("query 'up': POST http://127.0.0.1:1/api/v1/query"), std::string::npos)
      << r.error().message;
  auto bad = (*c)->query_range(RangeQuery{"up", 10, 5, 1});
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace kgpu::prom
