// kgpu::HttpServer with a web config (exporter-toolkit format): TLS, client certificates, basic
// auth, headers, rate limit and reloads, spoken to by libcurl (OpenSSL) with certificates made by
// `openssl` at test time.
#include <curl/curl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "common/http_server.h"
#include "common/web_config.h"
#include "raw_http.h"
#include "tls_fixture.h"

namespace kgpu::testing {
namespace {

using ::testing::HasSubstr;

class HttpTlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(ca_.cert().empty());
    ASSERT_FALSE(server_.cert.empty());
    hash_ = bcrypt_hash("s3cret", 4);
    ASSERT_FALSE(hash_.empty());
  }

  // Starts a server on a port the system chooses serving "metrics\n" on /metrics under the web
  // config `yaml` (written to web.yml); every request looks at the files again.
  int start(const std::string& yaml) {
    config_ = dir_.write("web.yml", yaml);
    HttpServerOptions o;
    o.web_config_file = config_;
    o.web_config_check = std::chrono::milliseconds(0);
    o.password_checks_per_second = password_checks_;
    server_http_ = std::make_unique<HttpServer>(o);
    server_http_->route("/metrics", [] {
      return HttpResponse{200, "text/plain", std::make_shared<const std::string>("metrics\n")};
    });
    auto port = server_http_->start("127.0.0.1", 0);
    EXPECT_TRUE(port) << (port ? "" : port.error().message);
    return port.value_or(0);
  }

  // Replaces web.yml atomically (as a Kubernetes Secret update does).
  void rewrite(const std::string& yaml) {
    dir_.write("web.yml.new", yaml);
    std::filesystem::rename(dir_.path() / "web.yml.new", config_);
  }

  std::string tls_block() const { return "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n"; }

  TempDir dir_;
  TestCa ca_{dir_, "ca"};
  CertFiles server_ = ca_.server("server");
  std::string hash_;
  std::string config_;
  double password_checks_ = 1000;
  std::unique_ptr<HttpServer> server_http_;
};

// The extender's --tls-cert-file/--tls-key-file: TLS from the pair alone, a renewed pair served
// without a restart, and a missing file named at start.
TEST_F(HttpTlsTest, CertificateAndKeyFilesWithoutAWebConfig) {
  HttpServerOptions o;
  o.tls_cert_file = server_.cert;
  o.tls_key_file = server_.key;
  o.web_config_check = std::chrono::milliseconds(0);
  o.max_body_bytes = 100;
  HttpServer server(o);
  server.route("/metrics", [] { return HttpResponse{200, "text/plain", std::make_shared<const std::string>("m\n")}; });
  auto port = server.start("127.0.0.1", 0);
  ASSERT_TRUE(port) << port.error().message;
  auto r = https_get(*port, "/metrics", {.ca = ca_.cert()});
  ASSERT_EQ(r.curl_code, 0) << r.error;
  EXPECT_EQ(r.status, 200);
  EXPECT_TRUE(server.web_config_status().tls);
  auto plain = https_get(*port, "/metrics", {.plain_http = true});
  EXPECT_NE(plain.status, 200) << "plain HTTP is not served on a TLS port";
  // A renewed certificate (another key) is taken for the next handshake.
  const CertFiles renewed = ca_.server("renewed");
  std::filesystem::copy_file(renewed.cert, server_.cert, std::filesystem::copy_options::overwrite_existing);
  std::filesystem::copy_file(renewed.key, server_.key, std::filesystem::copy_options::overwrite_existing);
  EXPECT_TRUE(eventually([&] {
    auto again = https_get(*port, "/metrics", {.ca = ca_.cert()});
    return again.curl_code == 0 && server.web_config_status().loads >= 2;
  })) << server.web_config_status().last_error;
  server.stop();

  HttpServerOptions missing;
  missing.tls_cert_file = (dir_.path() / "nope.crt").string();
  missing.tls_key_file = server_.key;
  HttpServer refused(missing);
  auto bad = refused.start("127.0.0.1", 0);
  ASSERT_FALSE(bad);
  EXPECT_THAT(bad.error().message, HasSubstr("nope.crt"));
}

TEST_F(HttpTlsTest, TlsWithBasicAuth) {
  const int port = start(tls_block() + "basic_auth_users:\n  prometheus: " + hash_ +
                         "\nhttp_server_config:\n  headers:\n    X-Frame-Options: deny\n");
  ASSERT_NE(port, 0);
  EXPECT_TRUE(server_http_->web_config_status().tls);

  auto ok = https_get(port, "/metrics", {.ca = ca_.cert(), .userpwd = "prometheus:s3cret"});
  EXPECT_EQ(ok.curl_code, 0) << ok.error;
  EXPECT_EQ(ok.status, 200);
  EXPECT_EQ(ok.body, "metrics\n");
  EXPECT_THAT(ok.headers, HasSubstr("X-Frame-Options: deny"));

  for (const auto& who : {std::optional<std::string>("prometheus:wrong"), std::optional<std::string>("nobody:s3cret"),
                          std::optional<std::string>()}) {
    auto denied = https_get(port, "/metrics", {.ca = ca_.cert(), .userpwd = who});
    EXPECT_EQ(denied.status, 401) << who.value_or("(no credentials)");
    EXPECT_THAT(denied.headers, HasSubstr("WWW-Authenticate: Basic"));
    EXPECT_EQ(denied.body, "Unauthorized\n");
    EXPECT_THAT(denied.headers, HasSubstr("X-Frame-Options: deny")) << "headers go on every answer";
  }
  // Cached answers stay right (the second check of each comes from the cache).
  EXPECT_EQ(https_get(port, "/metrics", {.ca = ca_.cert(), .userpwd = "prometheus:s3cret"}).status, 200);
  EXPECT_EQ(https_get(port, "/metrics", {.ca = ca_.cert(), .userpwd = "prometheus:wrong"}).status, 401);

  // Plain HTTP to the TLS port gets no HTTP answer.
  EXPECT_NE(status_of(get(port, "/metrics")), 200);
  auto plain = https_get(port, "/metrics", {.userpwd = "prometheus:s3cret", .plain_http = true});
  EXPECT_NE(plain.status, 200);
  // A client that does not trust the server's CA refuses it.
  TestCa other(dir_, "other-ca");
  EXPECT_NE(https_get(port, "/metrics", {.ca = other.cert(), .userpwd = "prometheus:s3cret"}).curl_code, 0);
}

TEST_F(HttpTlsTest, ClientCertificatesAreVerified) {
  TestCa other(dir_, "other-ca");
  const auto good = ca_.client("scraper", "DNS:scraper.example,URI:spiffe://cluster/prometheus");
  const auto unlisted = ca_.client("intruder", "DNS:intruder.example");
  const auto foreign = other.client("foreign", "DNS:scraper.example");
  const int port = start(tls_block() +
                         "  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.crt\n"
                         "  client_allowed_sans: [spiffe://cluster/prometheus]\n");
  ASSERT_NE(port, 0);
  auto ok = https_get(port, "/metrics", {.ca = ca_.cert(), .client = good});
  EXPECT_EQ(ok.status, 200) << ok.error;
  EXPECT_NE(https_get(port, "/metrics", {.ca = ca_.cert()}).status, 200) << "no certificate";
  EXPECT_NE(https_get(port, "/metrics", {.ca = ca_.cert(), .client = foreign}).status, 200) << "another CA";
  EXPECT_NE(https_get(port, "/metrics", {.ca = ca_.cert(), .client = unlisted}).status, 200) << "SAN not allowed";

  // VerifyClientCertIfGiven: none is fine, a foreign one is not.
  // The server looks at the files on every connection here, so each change rules the next handshake.
  rewrite(tls_block() + "  client_auth_type: VerifyClientCertIfGiven\n  client_ca_file: ca.crt\n");
  EXPECT_EQ(https_get(port, "/metrics", {.ca = ca_.cert()}).status, 200);
  EXPECT_EQ(https_get(port, "/metrics", {.ca = ca_.cert(), .client = unlisted}).status, 200);
  EXPECT_NE(https_get(port, "/metrics", {.ca = ca_.cert(), .client = foreign}).status, 200);

  // RequireAnyClientCert: any certificate, none refused.
  EXPECT_EQ(server_http_->web_config_status().loads, 2u);
  rewrite(tls_block() + "  client_auth_type: RequireAnyClientCert\n");
  EXPECT_EQ(https_get(port, "/metrics", {.ca = ca_.cert(), .client = foreign}).status, 200);
  EXPECT_NE(https_get(port, "/metrics", {.ca = ca_.cert()}).status, 200);
}

TEST_F(HttpTlsTest, VersionsAndSuitesAreEnforced) {
  int port = start(tls_block() + "  min_version: TLS13\n");
  ASSERT_NE(port, 0);
  EXPECT_EQ(https_get(port, "/metrics", {.ca = ca_.cert()}).status, 200);
  auto old = https_get(port, "/metrics", {.ca = ca_.cert(), .max_tls = CURL_SSLVERSION_MAX_TLSv1_2});
  EXPECT_NE(old.curl_code, 0) << "TLS 1.2 offered to a TLS 1.3-only server";

  rewrite(tls_block() +
          "  max_version: TLS12\n  cipher_suites: [TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384]\n"
          "  curve_preferences: [CurveP384]\n");
  EXPECT_EQ(https_get(port, "/metrics", {.ca = ca_.cert(), .ciphers = "ECDHE-RSA-AES256-GCM-SHA384"}).status, 200);
  EXPECT_EQ(server_http_->web_config_status().loads, 2u) << server_http_->web_config_status().last_error;
  EXPECT_NE(https_get(port, "/metrics", {.ca = ca_.cert(), .ciphers = "ECDHE-RSA-AES128-GCM-SHA256"}).curl_code, 0)
      << "a suite not listed";
  EXPECT_NE(https_get(port, "/metrics", {.ca = ca_.cert(), .min_tls = CURL_SSLVERSION_TLSv1_3}).curl_code, 0)
      << "TLS 1.3 above max_version";
}

TEST_F(HttpTlsTest, ReloadsChangesAndKeepsTheLastGoodConfig) {
  const int port = start(tls_block() + "basic_auth_users:\n  alice: " + hash_ + "\n");
  ASSERT_NE(port, 0);
  const HttpsOptions alice{.ca = ca_.cert(), .userpwd = "alice:s3cret"};
  const HttpsOptions bob{.ca = ca_.cert(), .userpwd = "bob:hunter2"};
  EXPECT_EQ(https_get(port, "/metrics", alice).status, 200);

  // A new user list applies to the next request.
  rewrite(tls_block() + "basic_auth_users:\n  bob: " + bcrypt_hash("hunter2", 4) + "\n");
  EXPECT_EQ(https_get(port, "/metrics", bob).status, 200);
  EXPECT_EQ(https_get(port, "/metrics", alice).status, 401);

  // A bad config: named by file, line and field; the last good one serves on.
  rewrite(tls_block() + "basic_auth_users:\n  carol: not-a-hash\n");
  EXPECT_EQ(https_get(port, "/metrics", bob).status, 200);
  auto status = server_http_->web_config_status();
  EXPECT_EQ(status.failures, 1u);
  EXPECT_THAT(status.last_error, HasSubstr(config_ + ":5: basic_auth_users.carol: not a bcrypt hash"));
  rewrite("tls_server_config:\n  cert_file: server.crt\n  key_file: missing.key\n");
  EXPECT_EQ(https_get(port, "/metrics", bob).status, 200);
  EXPECT_THAT(server_http_->web_config_status().last_error, HasSubstr("tls_server_config.key_file"));
  EXPECT_THAT(server_http_->web_config_status().last_error, HasSubstr("missing.key"));
  rewrite("basic_auth_users:\n  bob: " + bcrypt_hash("hunter2", 4) + "\n");
  EXPECT_EQ(https_get(port, "/metrics", bob).status, 200);
  EXPECT_THAT(server_http_->web_config_status().last_error, HasSubstr("TLS cannot be switched on or off"));

  // Fixed: served again, the error cleared.
  rewrite(tls_block() + "basic_auth_users:\n  alice: " + hash_ + "\n");
  EXPECT_EQ(https_get(port, "/metrics", alice).status, 200);
  status = server_http_->web_config_status();
  EXPECT_EQ(status.loads, 3u);
  EXPECT_EQ(status.last_error, "");

  // A rotated certificate (another CA) is served on the next handshake.
  TestCa next(dir_, "next-ca");
  const auto rotated = next.server("rotated");
  std::filesystem::copy_file(rotated.key, dir_.path() / "server.key.new");
  std::filesystem::copy_file(rotated.cert, dir_.path() / "server.crt.new");
  std::filesystem::rename(dir_.path() / "server.key.new", dir_.path() / "server.key");
  std::filesystem::rename(dir_.path() / "server.crt.new", dir_.path() / "server.crt");
  auto after = https_get(port, "/metrics", {.ca = next.cert(), .userpwd = "alice:s3cret"});
  EXPECT_EQ(after.status, 200) << after.error;
  EXPECT_NE(https_get(port, "/metrics", alice).curl_code, 0) << "the old CA no longer matches";
}

TEST_F(HttpTlsTest, PlainHttpWithAuthAndRateLimit) {
  const int port = start("basic_auth_users:\n  alice: " + hash_ + "\nrate_limit:\n  interval: 1h\n  burst: 3\n");
  ASSERT_NE(port, 0);
  EXPECT_FALSE(server_http_->web_config_status().tls);
  EXPECT_EQ(https_get(port, "/metrics", {.userpwd = "alice:s3cret", .plain_http = true}).status, 200);
  EXPECT_EQ(https_get(port, "/metrics", {.userpwd = "alice:nope", .plain_http = true}).status, 401);
  EXPECT_EQ(https_get(port, "/metrics", {.userpwd = "alice:s3cret", .plain_http = true}).status, 200);
  auto limited = https_get(port, "/metrics", {.userpwd = "alice:s3cret", .plain_http = true});
  EXPECT_EQ(limited.status, 429);
  EXPECT_EQ(limited.body, "Too Many Requests\n");
}

TEST_F(HttpTlsTest, UncachedPasswordChecksAreBounded) {
  password_checks_ = 1;
  const int port = start("basic_auth_users:\n  alice: " + hash_ + "\n");
  ASSERT_NE(port, 0);
  EXPECT_EQ(https_get(port, "/metrics", {.userpwd = "alice:s3cret", .plain_http = true}).status, 200);
  auto busy = https_get(port, "/metrics", {.userpwd = "alice:guess", .plain_http = true});
  EXPECT_EQ(busy.status, 429) << "a second uncached check within the second";
  EXPECT_THAT(busy.headers, HasSubstr("Retry-After: 1"));
  EXPECT_EQ(https_get(port, "/metrics", {.userpwd = "alice:s3cret", .plain_http = true}).status, 200)
      << "a cached answer needs no check";
}

TEST_F(HttpTlsTest, StartRefusesABadConfig) {
  for (const auto& [yaml, expected] : std::vector<std::pair<std::string, std::string>>{
           {"tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n  client_ca_file: ca.crt\n",
            "client CA's have been configured without a Client Auth Policy"},
           {"tls_server_config:\n  cert_file: server.crt\n  key_file: ca.key\n", "the certificate and key do not load"},
           {"tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n  client_auth_type: "
            "RequireAnyClientCert\n"
            "  client_ca: not a certificate\n",
            "client CA"},
           {"basic_auth_users: [alice]\n", "basic_auth_users: expected a mapping"},
       }) {
    config_ = dir_.write("web.yml", yaml);
    HttpServerOptions o;
    o.web_config_file = config_;
    HttpServer server(o);
    auto port = server.start("127.0.0.1", 0);
    ASSERT_FALSE(port) << yaml;
    EXPECT_THAT(port.error().message, HasSubstr(config_)) << yaml;
    EXPECT_THAT(port.error().message, HasSubstr(expected)) << yaml;
  }
  HttpServerOptions o;
  o.web_config_file = (dir_.path() / "absent.yml").string();
  HttpServer server(o);
  auto port = server.start("127.0.0.1", 0);
  ASSERT_FALSE(port);
  EXPECT_THAT(port.error().message, HasSubstr("absent.yml"));
}

}  // namespace
}  // namespace kgpu::testing
