// A Prometheus HTTP API client: instant queries (/api/v1/query) and range queries
// (/api/v1/query_range) over HTTP or HTTPS with libcurl, and the decoding of their answers
// (vector, matrix, scalar and string results).
//
// Errors: every failure is a kgpu::Error whose message names the query. When Prometheus answers
// with status "error", its errorType (bad_data, execution, timeout, canceled, ...) and error text
// are passed through ("query 'rate(x[5m' : bad_data: 1:11: parse error: ..."); an unreachable
// server, a non-JSON answer or an answer over the limits below is kUnavailable / kInvalidArgument
// with the same prefix.
//
// Limits: the answer body is read up to ClientOptions::max_body bytes (default 256 MiB), JSON
// nesting up to 64 levels, and a decoded result holds at most max_series series and max_samples
// samples in all; an answer over a limit is refused, never truncated silently.
//
// Thread safety: a Client may be used from several threads at once (one curl handle per request).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.h"

namespace kgpu::prom {

struct ClientOptions {
  std::string url;  // http(s)://host:port[/prefix]; the API paths are appended
  std::string bearer_token;
  std::string username, password;  // basic auth when username is set
  std::string ca_file;             // PEM bundle to verify the server with; empty: the system's
  std::string client_cert_file, client_key_file;
  bool insecure_skip_verify = false;
  std::chrono::milliseconds timeout{60'000};  // whole request
  size_t max_body = 256u << 20;
  size_t max_series = 1'000'000;
  size_t max_samples = 20'000'000;
};

struct Sample {
  double t = 0;  // seconds since the epoch
  double v = 0;  // NaN and +-Inf as Prometheus writes them
};

struct Series {
  std::map<std::string, std::string> labels;  // __name__ included when the result keeps it
  std::vector<Sample> samples;                // one for a vector, the range's for a matrix
  // The value of `name`, or "" when the series lacks it.
  const std::string& label(const std::string& name) const;
};

enum class ResultType { kVector, kMatrix, kScalar, kString };
const char* result_type_name(ResultType t);

struct QueryResult {
  ResultType type = ResultType::kVector;
  std::vector<Series> series;  // vector and matrix
  Sample scalar;               // scalar (and the time of a string)
  std::string string_value;    // string
  std::vector<std::string> warnings;
};

struct RangeQuery {
  std::string expr;
  double start = 0, end = 0;  // seconds since the epoch
  double step = 60;           // seconds, > 0
};

class Client {
 public:
  static Result<std::unique_ptr<Client>> create(ClientOptions options);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // Evaluates `expr` at `time` (seconds since the epoch; 0: the server's now).
  Result<QueryResult> query(std::string_view expr, double time = 0) const;
  Result<QueryResult> query_range(const RangeQuery& q) const;

  const ClientOptions& options() const { return options_; }

 private:
  explicit Client(ClientOptions options);
  Result<QueryResult> post(std::string_view path, const std::string& form, std::string_view expr) const;
  ClientOptions options_;
};

// Decodes the body of an API answer (HTTP status `http_code`) to `expr`'s result under `limits`
// (max_series, max_samples of ClientOptions are read). Exposed for tests.
Result<QueryResult> decode_answer(std::string_view body, long http_code, std::string_view expr,
                                  const ClientOptions& limits);

// A float as Prometheus writes it in answers ("1.5", "NaN", "+Inf", "-Inf"); nullopt for other text.
std::optional<double> parse_value(std::string_view text);

}  // namespace kgpu::prom
