#include "prom/client.h"

#include <curl/curl.h>
#include <fmt/format.h>

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "common/json_guard.h"

namespace kgpu::prom {

using nlohmann::json;

namespace {

constexpr int kMaxJsonDepth = 64;
constexpr size_t kQueryQuote = 200;  // characters of a query quoted in errors

struct CurlGlobal {
  CurlGlobal() { curl_global_init(CURL_GLOBAL_DEFAULT); }
};

// 'expr', shortened for messages.
std::string named(std::string_view expr) {
  if (expr.size() <= kQueryQuote) return fmt::format("'{}'", expr);
  return fmt::format("'{}...'", expr.substr(0, kQueryQuote));
}

struct Body {
  std::string text;
  size_t limit = 0;
  bool overflow = false;
};

size_t on_write(char* data, size_t size, size_t n, void* user) {
  auto* b = static_cast<Body*>(user);
  const size_t len = size * n;
  if (b->text.size() + len > b->limit) {
    b->overflow = true;
    return 0;
  }
  b->text.append(data, len);
  return len;
}

std::string form_escape(CURL* c, std::string_view s) {
  char* e = curl_easy_escape(c, s.data(), static_cast<int>(s.size()));
  std::string out = e != nullptr ? e : "";
  curl_free(e);
  return out;
}

std::string number(double v) { return fmt::format("{:.3f}", v); }

Result<Sample> decode_sample(const json& pair, std::string_view expr) {
  if (!pair.is_array() || pair.size() != 2 || !pair[0].is_number() || !pair[1].is_string()) {
    return fail(ErrorCode::kInvalidArgument, "query {}: a sample is not [time, \"value\"]", named(expr));
  }
  const auto v = parse_value(pair[1].get_ref<const std::string&>());
  if (!v) {
    return fail(ErrorCode::kInvalidArgument, "query {}: sample value '{}' is not a number", named(expr),
                pair[1].get_ref<const std::string&>().substr(0, 40));
  }
  return Sample{pair[0].get<double>(), *v};
}

Result<Series> decode_series(const json& s, bool matrix, std::string_view expr, size_t& samples_left) {
  if (!s.is_object() || !s.contains("metric") || !s["metric"].is_object()) {
    return fail(ErrorCode::kInvalidArgument, "query {}: a series has no 'metric' object", named(expr));
  }
  Series out;
  for (const auto& [k, v] : s["metric"].items()) {
    if (!v.is_string()) {
      return fail(ErrorCode::kInvalidArgument, "query {}: label '{}' is not a string", named(expr), k);
    }
    out.labels.emplace(k, v.get<std::string>());
  }
  if (matrix) {
    if (!s.contains("values") || !s["values"].is_array()) {
      return fail(ErrorCode::kInvalidArgument, "query {}: a matrix series has no 'values' array", named(expr));
    }
    const auto& values = s["values"];
    if (values.size() > samples_left) {
      return fail(ErrorCode::kInvalidArgument,
                  "query {}: the answer holds more samples than the limit of {} (narrow the range or raise the step)",
                  named(expr), samples_left + out.samples.size());
    }
    samples_left -= values.size();
    out.samples.reserve(values.size());
    for (const auto& p : values) {
      auto sample = decode_sample(p, expr);
      if (!sample) return std::unexpected(sample.error());
      out.samples.push_back(*sample);
    }
  } else {
    if (!s.contains("value")) {
      return fail(ErrorCode::kInvalidArgument, "query {}: a vector series has no 'value'", named(expr));
    }
    if (samples_left == 0) {
      return fail(ErrorCode::kInvalidArgument, "query {}: the answer holds more samples than the limit", named(expr));
    }
    --samples_left;
    auto sample = decode_sample(s["value"], expr);
    if (!sample) return std::unexpected(sample.error());
    out.samples.push_back(*sample);
  }
  return out;
}

}  // namespace

const std::string& Series::label(const std::string& name) const {
  static const std::string kEmpty;
  const auto it = labels.find(name);
  return it == labels.end() ? kEmpty : it->second;
}

const char* result_type_name(ResultType t) {
  switch (t) {
    case ResultType::kVector:
      return "vector";
    case ResultType::kMatrix:
      return "matrix";
    case ResultType::kScalar:
      return "scalar";
    case ResultType::kString:
      return "string";
  }
  return "?";
}

std::optional<double> parse_value(std::string_view text) {
  if (text == "NaN") return std::nan("");
  if (text == "+Inf" || text == "Inf") return HUGE_VAL;
  if (text == "-Inf") return -HUGE_VAL;
  if (text.empty() || text.size() > 64) return std::nullopt;
  const char c0 = text.front();
  if (!(std::isdigit(static_cast<unsigned char>(c0)) || c0 == '-' || c0 == '+' || c0 == '.')) return std::nullopt;
  const std::string s(text);
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size()) return std::nullopt;
  // strtod also reads "nan(...)", "infinity" and hex floats; Prometheus writes none of them.
  if (!std::isfinite(v) || s.find_first_of("xXnN") != std::string::npos) return std::nullopt;
  return v;
}

Result<QueryResult> decode_answer(std::string_view body, long http_code, std::string_view expr,
                                  const ClientOptions& limits) {
  if (!json_depth_within(body, kMaxJsonDepth)) {
    return fail(ErrorCode::kInvalidArgument, "query {}: the answer is nested deeper than {} levels", named(expr),
                kMaxJsonDepth);
  }
  const json j = json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    const std::string_view head = body.substr(0, 200);
    return fail(http_code >= 500 ? ErrorCode::kUnavailable : ErrorCode::kInvalidArgument,
                "query {}: HTTP {} with an answer that is not the API's JSON: {}", named(expr), http_code, head);
  }
  const std::string status = j.value("status", "");
  if (status == "error") {
    const std::string type = j.value("errorType", "error");
    const std::string message = j.value("error", "");
    const ErrorCode code = (type == "timeout" || type == "unavailable" || type == "canceled" || http_code >= 500)
                               ? ErrorCode::kUnavailable
                               : ErrorCode::kInvalidArgument;
    return fail(code, "query {}: {}: {}", named(expr), type, message);
  }
  if (status != "success") {
    return fail(ErrorCode::kInvalidArgument, "query {}: HTTP {}, answer status '{}' (expected success or error)",
                named(expr), http_code, status.substr(0, 40));
  }
  if (!j.contains("data") || !j["data"].is_object()) {
    return fail(ErrorCode::kInvalidArgument, "query {}: the answer has no 'data' object", named(expr));
  }
  const json& data = j["data"];
  QueryResult out;
  if (j.contains("warnings") && j["warnings"].is_array()) {
    for (const auto& w : j["warnings"]) {
      if (w.is_string() && out.warnings.size() < 100) out.warnings.push_back(w.get<std::string>());
    }
  }
  const std::string type = data.value("resultType", "");
  if (!data.contains("result")) {
    return fail(ErrorCode::kInvalidArgument, "query {}: the answer's data has no 'result'", named(expr));
  }
  const json& result = data["result"];
  if (type == "scalar" || type == "string") {
    out.type = type == "scalar" ? ResultType::kScalar : ResultType::kString;
    if (!result.is_array() || result.size() != 2 || !result[0].is_number() || !result[1].is_string()) {
      return fail(ErrorCode::kInvalidArgument, "query {}: a {} result is not [time, \"value\"]", named(expr), type);
    }
    out.scalar.t = result[0].get<double>();
    if (out.type == ResultType::kString) {
      out.string_value = result[1].get<std::string>();
      return out;
    }
    auto s = decode_sample(result, expr);
    if (!s) return std::unexpected(s.error());
    out.scalar = *s;
    return out;
  }
  if (type != "vector" && type != "matrix") {
    return fail(ErrorCode::kInvalidArgument, "query {}: unknown resultType '{}'", named(expr), type.substr(0, 40));
  }
  out.type = type == "vector" ? ResultType::kVector : ResultType::kMatrix;
  if (!result.is_array()) {
    return fail(ErrorCode::kInvalidArgument, "query {}: a {} result is not an array", named(expr), type);
  }
  if (result.size() > limits.max_series) {
    return fail(ErrorCode::kInvalidArgument, "query {}: the answer holds {} series, more than the limit of {}",
                named(expr), result.size(), limits.max_series);
  }
  size_t samples_left = limits.max_samples;
  out.series.reserve(result.size());
  for (const auto& s : result) {
    auto series = decode_series(s, out.type == ResultType::kMatrix, expr, samples_left);
    if (!series) return std::unexpected(series.error());
    out.series.push_back(std::move(*series));
  }
  return out;
}

Client::Client(ClientOptions options) : options_(std::move(options)) {}
Client::~Client() = default;

Result<std::unique_ptr<Client>> Client::create(ClientOptions options) {
  static CurlGlobal global;
  while (!options.url.empty() && options.url.back() == '/') options.url.pop_back();
  if (!options.url.starts_with("http://") && !options.url.starts_with("https://")) {
    return fail(ErrorCode::kInvalidArgument, "Prometheus URL '{}' must start with http:// or https://", options.url);
  }
  if (options.timeout.count() <= 0) return fail(ErrorCode::kInvalidArgument, "Prometheus timeout must be positive");
  return std::unique_ptr<Client>(new Client(std::move(options)));
}

Result<QueryResult> Client::query(std::string_view expr, double time) const {
  CURL* c = curl_easy_init();
  if (c == nullptr) return fail(ErrorCode::kInternal, "query {}: curl_easy_init failed", named(expr));
  std::string form = "query=" + form_escape(c, expr);
  if (time > 0) form += "&time=" + number(time);
  curl_easy_cleanup(c);
  return post("/api/v1/query", form, expr);
}

Result<QueryResult> Client::query_range(const RangeQuery& q) const {
  if (!(q.step > 0) || !(q.end >= q.start)) {
    return fail(ErrorCode::kInvalidArgument, "query {}: a range needs start <= end and a positive step", named(q.expr));
  }
  CURL* c = curl_easy_init();
  if (c == nullptr) return fail(ErrorCode::kInternal, "query {}: curl_easy_init failed", named(q.expr));
  const std::string form = "query=" + form_escape(c, q.expr) + "&start=" + number(q.start) + "&end=" + number(q.end) +
                           "&step=" + number(q.step);
  curl_easy_cleanup(c);
  return post("/api/v1/query_range", form, q.expr);
}

Result<QueryResult> Client::post(std::string_view path, const std::string& form, std::string_view expr) const {
  std::unique_ptr<CURL, decltype(&curl_easy_cleanup)> c(curl_easy_init(), &curl_easy_cleanup);
  if (!c) return fail(ErrorCode::kInternal, "query {}: curl_easy_init failed", named(expr));
  const std::string url = options_.url + std::string(path);
  Body body;
  body.limit = options_.max_body;
  char errbuf[CURL_ERROR_SIZE] = {};
  curl_slist* headers = nullptr;
  headers = curl_slist_append(headers, "Content-Type: application/x-www-form-urlencoded");
  headers = curl_slist_append(headers, "Accept: application/json");
  std::string auth;
  if (!options_.bearer_token.empty()) {
    auth = "Authorization: Bearer " + options_.bearer_token;
    headers = curl_slist_append(headers, auth.c_str());
  }
  std::unique_ptr<curl_slist, decltype(&curl_slist_free_all)> header_guard(headers, &curl_slist_free_all);
  CURL* h = c.get();
  curl_easy_setopt(h, CURLOPT_URL, url.c_str());
  curl_easy_setopt(h, CURLOPT_POST, 1L);
  curl_easy_setopt(h, CURLOPT_POSTFIELDS, form.c_str());
  curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, static_cast<long>(form.size()));
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_write);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &body);
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, static_cast<long>(options_.timeout.count()));
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, std::min<long>(10'000, options_.timeout.count()));
  curl_easy_setopt(h, CURLOPT_ACCEPT_ENCODING, "");  // gzip when the server offers it
  curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
  if (!options_.username.empty()) {
    curl_easy_setopt(h, CURLOPT_HTTPAUTH, CURLAUTH_BASIC);
    curl_easy_setopt(h, CURLOPT_USERNAME, options_.username.c_str());
    curl_easy_setopt(h, CURLOPT_PASSWORD, options_.password.c_str());
  }
  if (!options_.ca_file.empty()) curl_easy_setopt(h, CURLOPT_CAINFO, options_.ca_file.c_str());
  if (!options_.client_cert_file.empty()) curl_easy_setopt(h, CURLOPT_SSLCERT, options_.client_cert_file.c_str());
  if (!options_.client_key_file.empty()) curl_easy_setopt(h, CURLOPT_SSLKEY, options_.client_key_file.c_str());
  if (options_.insecure_skip_verify) {
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 0L);
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 0L);
  }
  const CURLcode rc = curl_easy_perform(h);
  if (body.overflow) {
    return fail(ErrorCode::kInvalidArgument,
                "query {}: the answer is larger than the limit of {} bytes (narrow the query)", named(expr),
                options_.max_body);
  }
  if (rc != CURLE_OK) {
    return fail(ErrorCode::kUnavailable, "query {}: {} {}: {}", named(expr), "POST", url,
                errbuf[0] != '\0' ? errbuf : curl_easy_strerror(rc));
  }
  long code = 0;
  curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
  if (code == 401 || code == 403) {
    return fail(ErrorCode::kPermissionDenied, "query {}: {} answered HTTP {} (check the token or credentials)",
                named(expr), url, code);
  }
  if (code == 404) {
    return fail(ErrorCode::kNotFound, "query {}: {} answered HTTP 404 (is this a Prometheus API URL?)", named(expr),
                url);
  }
  return decode_answer(body.text, code, expr, options_);
}

}  // namespace kgpu::prom
