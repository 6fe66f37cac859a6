// Test PKI made at test time with the `openssl` command (no private key is ever committed), and an
// HTTPS client (libcurl) that controls versions, suites, client certificates and basic auth.
#pragma once

#include <optional>
#include <string>

#include "test_env.h"

namespace kgpu::testing {

// A certificate and its key, as files.
struct CertFiles {
  std::string cert{}, key{};
};

// A CA with certificates it signed, under `dir`/<name>*. Empty paths (and a test failure) when
// openssl fails.
class TestCa {
 public:
  TestCa(const TempDir& dir, const std::string& name);
  const std::string& cert() const { return ca_.cert; }
  // A server certificate for 127.0.0.1 and localhost (RSA 2048, serverAuth).
  CertFiles server(const std::string& name) const;
  // A client certificate (RSA 2048, clientAuth) with these subjectAltName entries ("DNS:x,URI:y").
  CertFiles client(const std::string& name, const std::string& sans) const;

 private:
  CertFiles sign(const std::string& name, const std::string& extensions) const;
  const TempDir& dir_;
  std::string name_;
  CertFiles ca_;
};

struct HttpsOptions {
  std::string ca{};                      // trust for the server's certificate ("" = none: not verified)
  CertFiles client{};                    // client certificate ("" = none)
  std::optional<std::string> userpwd{};  // "user:password" for basic auth
  long max_tls = 0;                      // CURL_SSLVERSION_MAX_* (0 = default)
  long min_tls = 0;                      // CURL_SSLVERSION_TLSv1_* (0 = default)
  std::string ciphers{};                 // OpenSSL cipher list for TLS 1.2 ("" = default)
  bool plain_http = false;               // http:// instead of https://
};

struct HttpsResult {
  int curl_code = -1;  // CURLcode; 0 = a response came
  std::string error;   // curl's message when curl_code != 0
  long status = 0;
  std::string headers, body;
};

// GET https://127.0.0.1:<port><path> on a new connection.
HttpsResult https_get(int port, const std::string& path, const HttpsOptions& options);

}  // namespace kgpu::testing
