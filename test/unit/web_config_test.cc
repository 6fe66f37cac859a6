// The web config parser (exporter-toolkit format): strictness, bounds, file references, the GnuTLS
// priority it makes, and bcrypt through the system's libcrypt.
#include "common/web_config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace kgpu {
namespace {

using ::testing::HasSubstr;

class WebConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (std::filesystem::temp_directory_path() / "kgpu-webcfg-XXXXXX").string();
    dir_ = mkdtemp(tmpl.data());
    write("tls/server.crt", "CERT");
    write("tls/server.key", "KEY");
    write("tls/ca.crt", "CA");
    path_ = (dir_ / "web.yml").string();
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  void write(const std::string& name, const std::string& text) {
    std::filesystem::create_directories((dir_ / name).parent_path());
    std::ofstream(dir_ / name) << text;
  }
  Result<WebConfig> parse(const std::string& yaml, const WebConfigLimits& limits = {}) {
    return parse_web_config(yaml, path_, limits);
  }
  std::string error(const std::string& yaml, const WebConfigLimits& limits = {}) {
    auto c = parse(yaml, limits);
    EXPECT_FALSE(c) << yaml;
    return c ? "" : c.error().message;
  }

  std::filesystem::path dir_;
  std::string path_;
  const std::string hash_ = "$2y$10$X0h1gDsPszWURQaxFh.zoubFi6DXncSjhoQNJgRrnGs7EsimhC7zG";
};

TEST_F(WebConfigTest, EmptyFileServesPlainHttp) {
  auto c = parse("");
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_FALSE(c->tls);
  EXPECT_TRUE(c->users.empty());
  EXPECT_EQ(c->files, std::vector<std::string>{path_});
}

TEST_F(WebConfigTest, FullConfigIsRead) {
  auto c = parse(
      "tls_server_config:\n"
      "  cert_file: tls/server.crt\n"
      "  key_file: " +
      (dir_ / "tls/server.key").string() +
      "\n"
      "  client_auth_type: RequireAndVerifyClientCert\n"
      "  client_ca_file: tls/ca.crt\n"
      "  client_allowed_sans: [scraper.example, 10.0.0.7]\n"
      "  min_version: TLS13\n"
      "  max_version: TLS13\n"
      "  cipher_suites: [TLS_AES_128_GCM_SHA256]\n"
      "  curve_preferences: [X25519, CurveP256]\n"
      "  prefer_server_cipher_suites: false\n"
      "http_server_config:\n"
      "  http2: false\n"
      "  headers:\n"
      "    X-Content-Type-Options: nosniff\n"
      "    Strict-Transport-Security: max-age=31536000\n"
      "    X-XSS-Protection: ''\n"
      "basic_auth_users:\n"
      "  zed: " +
      hash_ +
      "\n"
      "  alice: " +
      hash_ +
      "\n"
      "rate_limit:\n"
      "  interval: 1m30s\n"
      "  burst: 5\n");
  ASSERT_TRUE(c) << c.error().message;
  ASSERT_TRUE(c->tls);
  EXPECT_EQ(c->tls->cert_pem, "CERT");
  EXPECT_EQ(c->tls->key_pem, "KEY");
  EXPECT_EQ(c->tls->client_ca_pem, "CA");
  EXPECT_TRUE(c->tls->cert_required());
  EXPECT_TRUE(c->tls->cert_verified());
  EXPECT_EQ(*c->tls->client_allowed_sans, (std::vector<std::string>{"scraper.example", "10.0.0.7"}));
  EXPECT_EQ(c->tls->gnutls_priority(),
            "NORMAL:-VERS-ALL:+VERS-TLS1.3:-CIPHER-ALL:-MAC-ALL:+AES-128-GCM:+AEAD:-GROUP-ALL:+GROUP-X25519:"
            "+GROUP-SECP256R1");
  EXPECT_FALSE(c->http2);
  EXPECT_EQ(c->headers.size(), 2u) << "a blank header value is unset";
  ASSERT_EQ(c->users.size(), 2u);
  EXPECT_EQ(c->users[0].first, "alice");
  EXPECT_NE(c->user_hash("zed"), nullptr);
  EXPECT_EQ(c->user_hash("bob"), nullptr);
  EXPECT_EQ(c->rate_interval, std::chrono::seconds(90));
  EXPECT_EQ(c->rate_burst, 5);
  EXPECT_EQ(c->files, (std::vector<std::string>{path_, (dir_ / "tls/server.crt").string(),
                                                (dir_ / "tls/server.key").string(), (dir_ / "tls/ca.crt").string()}));
}

TEST_F(WebConfigTest, InlineCertificatesAndDefaults) {
  auto c = parse("tls_server_config:\n  cert: |\n    INLINE CERT\n  key: INLINE KEY\n");
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->tls->cert_pem, "INLINE CERT\n");
  EXPECT_EQ(c->tls->key_pem, "INLINE KEY");
  EXPECT_FALSE(c->tls->cert_requested());
  EXPECT_EQ(c->tls->gnutls_priority(), "NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2:%SERVER_PRECEDENCE");
  EXPECT_EQ(c->files.size(), 1u);
}

TEST_F(WebConfigTest, SuitesMakeTheUnionOfTheirParts) {
  auto c = parse(
      "tls_server_config:\n  cert_file: tls/server.crt\n  key_file: tls/server.key\n  min_version: TLS10\n"
      "  max_version: TLS12\n  cipher_suites: [TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA, "
      "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384]\n");
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->tls->gnutls_priority(),
            "NORMAL:-VERS-ALL:+VERS-TLS1.2:+VERS-TLS1.1:+VERS-TLS1.0:-CIPHER-ALL:-MAC-ALL:+AES-128-CBC:+AES-256-GCM:"
            "+SHA1:+AEAD:-KX-ALL:+ECDHE-RSA:+ECDHE-ECDSA:%SERVER_PRECEDENCE");
}

TEST_F(WebConfigTest, ErrorsNameFileLineAndField) {
  const std::string tls = "tls_server_config:\n  cert_file: tls/server.crt\n  key_file: tls/server.key\n";
  struct Case {
    std::string yaml, expected;
  };
  for (const auto& [yaml, expected] : std::vector<Case>{
           {"tls_server_config:\n  certfile: x\n", ":2: tls_server_config.certfile: unknown field"},
           {"basic_auth_users: {}\nbasic_auth_users: {}\n", ":2: basic_auth_users: repeated"},
           {"extra: 1\n", ":1: extra: unknown field"},
           {"- a\n", "expected a mapping"},
           {tls + "  client_auth_type: Sometimes\n",
            ":4: tls_server_config.client_auth_type: invalid ClientAuth: Sometimes"},
           {tls + "  min_version: TLS14\n", ":4: tls_server_config.min_version: unknown TLS version: TLS14"},
           {tls + "  min_version: TLS13\n  max_version: TLS12\n", "min_version is above max_version"},
           {tls + "  cipher_suites: [TLS_RSA_WITH_RC4_128_SHA]\n", "unknown cipher: TLS_RSA_WITH_RC4_128_SHA"},
           {tls + "  curve_preferences: [CurveP224]\n", "unknown curve: CurveP224"},
           {tls + "  prefer_server_cipher_suites: maybe\n", "prefer_server_cipher_suites: expected true or false"},
           {tls + "  client_ca_file: tls/ca.crt\n", "client CA's have been configured without a Client Auth Policy"},
           {tls + "  client_auth_type: VerifyClientCertIfGiven\n  client_allowed_sans: [a]\n",
            ":5: tls_server_config.client_allowed_sans: requires client_auth_type to be one of"},
           {"tls_server_config:\n  key_file: tls/server.key\n", "missing one of cert or cert_file"},
           {"tls_server_config:\n  client_auth_type: RequireAnyClientCert\n  cert_file: tls/server.crt\n",
            "missing one of key or key_file"},
           {tls + "  cert: inline\n", "cert and cert_file are both set"},
           {"tls_server_config:\n  cert_file: tls/none.crt\n  key_file: tls/server.key\n",
            ":2: tls_server_config.cert_file: cannot read " + (dir_ / "tls/none.crt").string()},
           {"http_server_config:\n  headers:\n    X-Powered-By: kgpu\n",
            ":3: http_server_config.headers.X-Powered-By: HTTP header \"X-Powered-By\" can not be configured"},
           {"http_server_config:\n  headers:\n    X-Frame-Options: allow\n",
            "X-Frame-Options: invalid value \"allow\" (expected one of: \"deny\", \"sameorigin\")"},
           {"http_server_config:\n  headers:\n    Content-Security-Policy: \"a\\r\\nSet-Cookie: x\"\n",
            "line breaks are not allowed"},
           {"http_server_config:\n  http2: 3\n", "http_server_config.http2: expected true or false"},
           {"basic_auth_users:\n  alice: secret\n", ":2: basic_auth_users.alice: not a bcrypt hash"},
           {"basic_auth_users:\n  alice: $1$abc$" + std::string(53, 'a') + "\n", "not a bcrypt hash"},
           {"basic_auth_users:\n  alice: " + hash_.substr(0, 4) + "20" + hash_.substr(6) + "\n",
            "bcrypt cost 20 is above the limit of 16"},
           {"basic_auth_users:\n  alice: [x]\n", "basic_auth_users.alice: expected a string"},
           {"rate_limit:\n  interval: soon\n", "rate_limit.interval: expected a duration"},
           {"rate_limit:\n  burst: -1\n", "rate_limit.burst: expected a whole number"},
       }) {
    const std::string e = error(yaml);
    EXPECT_THAT(e, HasSubstr(path_)) << yaml;
    EXPECT_THAT(e, HasSubstr(expected)) << yaml;
  }
}

TEST_F(WebConfigTest, BoundsAreEnforced) {
  WebConfigLimits small;
  small.max_users = 2;
  small.max_list = 2;
  small.max_file_bytes = 4096;
  std::string users = "basic_auth_users:\n";
  for (int i = 0; i < 3; ++i) users += "  u" + std::to_string(i) + ": " + hash_ + "\n";
  EXPECT_THAT(error(users, small), HasSubstr("more than 2 users"));
  EXPECT_THAT(error("tls_server_config:\n  curve_preferences: [X25519, X25519, X25519]\n", small),
              HasSubstr("more than 2 entries"));
  EXPECT_THAT(error(std::string(5000, '#'), small), HasSubstr("larger than 4096 bytes"));
  write("tls/big.crt", std::string(5000, 'x'));
  EXPECT_THAT(error("tls_server_config:\n  cert_file: tls/big.crt\n  key_file: tls/server.key\n", small),
              HasSubstr("more than the limit of 4096 bytes"));
  EXPECT_THAT(error("http_server_config:\n  headers:\n    X-XSS-Protection: " + std::string(5000, 'x') + "\n"),
              HasSubstr("longer than 4096 bytes"));
  std::string deep = "http_server_config: ";
  for (int i = 0; i < 100; ++i) deep += "[";
  EXPECT_FALSE(parse(deep));
}

TEST_F(WebConfigTest, LoadNamesAMissingFile) {
  auto c = load_web_config((dir_ / "absent.yml").string());
  ASSERT_FALSE(c);
  EXPECT_THAT(c.error().message, HasSubstr((dir_ / "absent.yml").string()));
}

TEST(Bcrypt, SystemLibcryptChecksHashes) {
  const std::string h = bcrypt_hash("correct horse", 4);
  ASSERT_EQ(h.size(), 60u);
  EXPECT_EQ(h.substr(0, 7), "$2b$04$");
  EXPECT_TRUE(bcrypt_matches(h, "correct horse"));
  EXPECT_FALSE(bcrypt_matches(h, "correct horsE"));
  EXPECT_FALSE(bcrypt_matches(h, ""));
  // htpasswd's $2y$ and the older $2a$ name the same algorithm for such passwords.
  for (char minor : {'y', 'a'}) {
    std::string other = h;
    other[2] = minor;
    EXPECT_TRUE(bcrypt_matches(other, "correct horse")) << other;
  }
  EXPECT_FALSE(bcrypt_matches("$6$salt$abc", "x")) << "only bcrypt is accepted";
  EXPECT_FALSE(bcrypt_matches(h, std::string("correct horse\0x", 15)));
}

TEST(GoDuration, ParsesGoSyntax) {
  EXPECT_EQ(parse_go_duration("0"), std::chrono::nanoseconds(0));
  EXPECT_EQ(parse_go_duration("250ms"), std::chrono::milliseconds(250));
  EXPECT_EQ(parse_go_duration("1h2m3s"), std::chrono::seconds(3723));
  EXPECT_EQ(parse_go_duration("1.5s"), std::chrono::milliseconds(1500));
  EXPECT_FALSE(parse_go_duration("5"));
  EXPECT_FALSE(parse_go_duration("-1s"));
  EXPECT_FALSE(parse_go_duration("1d"));
  EXPECT_FALSE(parse_go_duration(""));
}

}  // namespace
}  // namespace kgpu
