// The web configuration file of the metrics port: TLS, client certificates, basic authentication,
// extra response headers and a request rate limit, in the Prometheus exporter-toolkit format
// (`--web-config-file`, docs/metrics.md "TLS and authentication").
//
// Parsing is strict like the toolkit's: an unknown or repeated field, a value of the wrong kind or
// an unknown name (client auth type, TLS version, cipher suite, curve, header) is an error naming
// "<file>:<line>: <field>". Files the config names (cert_file, key_file, client_ca_file) are
// relative to the config file's directory and are read here, so a loaded WebConfig holds
// everything needed to serve; a missing or unreadable one is an error naming the field and path.
//
// Thread safety: none needed (functions of their inputs and the file system).
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/error.h"

namespace kgpu {

// Bounds on what a web config may ask for; beyond any of them the file is refused.
struct WebConfigLimits {
  size_t max_file_bytes = 1 << 20;  // the config file, and each certificate, key and CA file
  size_t max_users = 1000;          // basic_auth_users entries
  size_t max_list = 256;            // cipher_suites, curve_preferences, client_allowed_sans entries
  size_t max_value_bytes = 4096;    // a user name, a header value, a SAN
  int max_bcrypt_cost = 16;         // one check takes about 2^(cost-10) * 70 ms of the server's thread
};

enum class ClientAuth {
  kNoClientCert,
  kRequestClientCert,           // asked for, not required, not verified
  kRequireAnyClientCert,        // required, not verified against a CA
  kVerifyClientCertIfGiven,     // not required; verified when sent
  kRequireAndVerifyClientCert,  // required and verified
};

struct WebTlsConfig {
  std::string cert_pem, key_pem;  // contents, from the files or inline
  std::string client_ca_pem;      // "" = none given (verifying modes then use the system's roots)
  ClientAuth client_auth = ClientAuth::kNoClientCert;
  // Present (even empty) = the client certificate must carry one of these SANs (DNS name, e-mail,
  // IP address in its text form, URI), exactly.
  std::optional<std::vector<std::string>> client_allowed_sans;
  int min_version = 0x0303, max_version = 0x0304;  // TLS 1.2 .. TLS 1.3 (wire numbers)
  std::vector<std::string> cipher_suites;          // Go's names, each known
  std::vector<std::string> curve_preferences;      // Go's names, each known
  bool prefer_server_cipher_suites = true;

  // The GnuTLS priority string that enforces versions, suites, curves and precedence.
  std::string gnutls_priority() const;
  // Whether a client certificate is required / asked for / verified against the CA.
  bool cert_required() const;
  bool cert_requested() const;
  bool cert_verified() const;
};

struct WebConfig {
  std::string path;                                          // the file it came from
  std::optional<WebTlsConfig> tls;                           // nullopt: plain HTTP
  bool http2 = true;                                         // accepted for compatibility; HTTP/1.1 is served
  std::vector<std::pair<std::string, std::string>> headers;  // added to every response
  std::vector<std::pair<std::string, std::string>> users;    // user name -> bcrypt hash, sorted by name
  std::chrono::nanoseconds rate_interval{0};                 // 0 = no rate limit
  int rate_burst = 0;
  // The files a change of which is a new config: the config itself, then the files it names.
  std::vector<std::string> files;

  // The user's bcrypt hash, or nullptr.
  const std::string* user_hash(std::string_view user) const;
};

// Parses `text` as the web config at `path` (used for messages and for relative file names).
Result<WebConfig> parse_web_config(std::string_view text, const std::string& path, const WebConfigLimits& limits = {});
// Reads and parses the file at `path`.
Result<WebConfig> load_web_config(const std::string& path, const WebConfigLimits& limits = {});

// Whether `password` matches the bcrypt `hash` ($2a$, $2b$ or $2y$), checked by the system's
// libcrypt. Constant time in the comparison; the bcrypt cost dominates.
bool bcrypt_matches(const std::string& hash, std::string_view password);
// A new bcrypt ($2b$) hash of `password` at `cost` (tests, documentation examples); "" on failure.
std::string bcrypt_hash(std::string_view password, int cost);

// A Go duration ("1s", "250ms", "1m30s"); nullopt when malformed or negative.
std::optional<std::chrono::nanoseconds> parse_go_duration(std::string_view text);

}  // namespace kgpu
