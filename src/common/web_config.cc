#include "common/web_config.h"

#include <crypt.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <filesystem>
#include <set>

#include "common/files.h"
#include "common/yaml_guard.h"

namespace kgpu {

namespace {

// Go's crypto/tls suite names (tls.CipherSuites()) and the GnuTLS key exchange, cipher and MAC
// that make each one. TLS 1.3 suites name no key exchange.
struct Suite {
  const char* go_name;
  const char* kx;
  const char* cipher;
  const char* mac;
};
constexpr std::array kSuites = {
    Suite{"TLS_AES_128_GCM_SHA256", "", "AES-128-GCM", "AEAD"},
    Suite{"TLS_AES_256_GCM_SHA384", "", "AES-256-GCM", "AEAD"},
    Suite{"TLS_CHACHA20_POLY1305_SHA256", "", "CHACHA20-POLY1305", "AEAD"},
    Suite{"TLS_RSA_WITH_AES_128_CBC_SHA", "RSA", "AES-128-CBC", "SHA1"},
    Suite{"TLS_RSA_WITH_AES_256_CBC_SHA", "RSA", "AES-256-CBC", "SHA1"},
    Suite{"TLS_RSA_WITH_AES_128_GCM_SHA256", "RSA", "AES-128-GCM", "AEAD"},
    Suite{"TLS_RSA_WITH_AES_256_GCM_SHA384", "RSA", "AES-256-GCM", "AEAD"},
    Suite{"TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA", "ECDHE-ECDSA", "AES-128-CBC", "SHA1"},
    Suite{"TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA", "ECDHE-ECDSA", "AES-256-CBC", "SHA1"},
    Suite{"TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA", "ECDHE-RSA", "AES-128-CBC", "SHA1"},
    Suite{"TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA", "ECDHE-RSA", "AES-256-CBC", "SHA1"},
    Suite{"TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", "ECDHE-ECDSA", "AES-128-GCM", "AEAD"},
    Suite{"TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384", "ECDHE-ECDSA", "AES-256-GCM", "AEAD"},
    Suite{"TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", "ECDHE-RSA", "AES-128-GCM", "AEAD"},
    Suite{"TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384", "ECDHE-RSA", "AES-256-GCM", "AEAD"},
    Suite{"TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256", "ECDHE-RSA", "CHACHA20-POLY1305", "AEAD"},
    Suite{"TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256", "ECDHE-ECDSA", "CHACHA20-POLY1305", "AEAD"},
};

constexpr std::array<std::pair<const char*, const char*>, 4> kCurves = {{
    {"CurveP256", "GROUP-SECP256R1"},
    {"CurveP384", "GROUP-SECP384R1"},
    {"CurveP521", "GROUP-SECP521R1"},
    {"X25519", "GROUP-X25519"},
}};

constexpr std::array<std::pair<const char*, int>, 4> kVersions = {{
    {"TLS10", 0x0301},
    {"TLS11", 0x0302},
    {"TLS12", 0x0303},
    {"TLS13", 0x0304},
}};

constexpr std::array<std::pair<const char*, ClientAuth>, 6> kClientAuth = {{
    {"NoClientCert", ClientAuth::kNoClientCert},
    {"RequestClientCert", ClientAuth::kRequestClientCert},
    {"RequireAnyClientCert", ClientAuth::kRequireAnyClientCert},
    {"RequireClientCert", ClientAuth::kRequireAnyClientCert},  // the toolkit's older name
    {"VerifyClientCertIfGiven", ClientAuth::kVerifyClientCertIfGiven},
    {"RequireAndVerifyClientCert", ClientAuth::kRequireAndVerifyClientCert},
}};

// The toolkit's settable headers, and the values allowed where it fixes them.
struct HeaderRule {
  const char* name;
  std::vector<const char*> values;  // empty: any
};
const std::vector<HeaderRule>& header_rules() {
  static const std::vector<HeaderRule> rules = {
      {"Strict-Transport-Security", {}},
      {"X-Content-Type-Options", {"nosniff"}},
      {"X-Frame-Options", {"deny", "sameorigin"}},
      {"X-XSS-Protection", {}},
      {"Content-Security-Policy", {}},
  };
  return rules;
}

// Field access with "<file>:<line>: <field>: <what>" errors.
class Reader {
 public:
  Reader(std::string source, const WebConfigLimits& limits) : source_(std::move(source)), limits_(limits) {}

  template <typename... Args>
  std::unexpected<Error> error(const YAML::Node& n, std::string_view field, fmt::format_string<Args...> f,
                               Args&&... args) const {
    const auto m = n.Mark();
    std::string where = m.line < 0 ? source_ : fmt::format("{}:{}", source_, m.line + 1);
    if (!field.empty()) where += fmt::format(": {}", field);
    return std::unexpected(
        Error{ErrorCode::kInvalidArgument, fmt::format("{}: {}", where, fmt::format(f, std::forward<Args>(args)...))});
  }

  // The entries of mapping `n` (null = none), refusing keys outside `known` (when given), repeated
  // keys and non-string keys.
  Result<std::vector<std::pair<YAML::Node, YAML::Node>>> entries(const YAML::Node& n, const std::string& field,
                                                                 std::initializer_list<const char*> known) const {
    std::vector<std::pair<YAML::Node, YAML::Node>> out;
    if (n.IsNull()) return out;
    if (!n.IsMap()) return error(n, field, "expected a mapping");
    std::set<std::string, std::less<>> seen;
    for (const auto& kv : n) {
      if (!kv.first.IsScalar()) return error(kv.first, field, "expected string keys");
      const std::string& key = kv.first.Scalar();
      const std::string name = field.empty() ? key : field + "." + key;
      if (known.size() != 0 && std::none_of(known.begin(), known.end(), [&](const char* k) { return key == k; })) {
        return error(kv.first, name, "unknown field");
      }
      if (!seen.insert(key).second) return error(kv.first, name, "repeated");
      out.emplace_back(kv.first, kv.second);
    }
    return out;
  }

  Result<std::string> string(const YAML::Node& n, std::string_view field, size_t max) const {
    if (n.IsNull()) return std::string();
    if (!n.IsScalar()) return error(n, field, "expected a string");
    if (n.Scalar().size() > max) return error(n, field, "longer than {} bytes", max);
    return n.Scalar();
  }

  Result<bool> boolean(const YAML::Node& n, std::string_view field) const {
    bool b = false;
    if (!n.IsScalar() || !YAML::convert<bool>::decode(n, b)) return error(n, field, "expected true or false");
    return b;
  }

  Result<std::vector<std::string>> strings(const YAML::Node& n, std::string_view field) const {
    std::vector<std::string> out;
    if (n.IsNull()) return out;
    if (!n.IsSequence()) return error(n, field, "expected a list");
    if (n.size() > limits_.max_list) return error(n, field, "more than {} entries", limits_.max_list);
    for (const auto& item : n) {
      auto s = string(item, field, limits_.max_value_bytes);
      if (!s) return std::unexpected(s.error());
      out.push_back(std::move(*s));
    }
    return out;
  }

  // A file named by the config: relative to the config's directory, read within the size limit.
  Result<std::string> file(const YAML::Node& n, std::string_view field, const std::string& name,
                           std::vector<std::string>& files) const {
    std::filesystem::path p(name);
    if (p.is_relative()) p = std::filesystem::path(source_).parent_path() / p;
    const std::string path = p.lexically_normal().string();
    files.push_back(path);
    auto text = read_file_limited(path, limits_.max_file_bytes);
    if (!text) return error(n, field, "{}", text.error().message);
    return *text;
  }

  const WebConfigLimits& limits() const { return limits_; }

 private:
  std::string source_;
  const WebConfigLimits& limits_;
};

// A bcrypt hash as Go's bcrypt accepts it: "$2?$NN$" and 53 characters of its base64 alphabet.
std::optional<std::string> bcrypt_problem(const std::string& hash, int max_cost) {
  static constexpr std::string_view kAlphabet = "./ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  if (hash.size() != 60 || hash[0] != '$' || hash[1] != '2' || (hash[2] != 'a' && hash[2] != 'b' && hash[2] != 'y') ||
      hash[3] != '$' || hash[6] != '$') {
    return "not a bcrypt hash ($2a$, $2b$ or $2y$, 60 characters)";
  }
  if (hash[4] < '0' || hash[4] > '9' || hash[5] < '0' || hash[5] > '9') return "not a bcrypt hash (bad cost)";
  const int cost = (hash[4] - '0') * 10 + (hash[5] - '0');
  if (cost < 4 || cost > 31) return fmt::format("bcrypt cost {} is outside 4..31", cost);
  if (cost > max_cost) {
    return fmt::format("bcrypt cost {} is above the limit of {} (each check would hold the server for seconds)", cost,
                       max_cost);
  }
  if (hash.find_first_not_of(kAlphabet, 7) != std::string::npos) return "not a bcrypt hash (bad character)";
  return std::nullopt;
}

template <size_t N, typename V>
std::optional<V> lookup(const std::array<std::pair<const char*, V>, N>& table, std::string_view name) {
  for (const auto& [k, v] : table) {
    if (name == k) return v;
  }
  return std::nullopt;
}

Result<void> parse_tls(Reader& r, const YAML::Node& node, WebConfig& out) {
  const std::string f = "tls_server_config";
  auto fields = r.entries(
      node, f,
      {"cert", "key", "client_ca", "cert_file", "key_file", "client_auth_type", "client_ca_file", "cipher_suites",
       "curve_preferences", "min_version", "max_version", "prefer_server_cipher_suites", "client_allowed_sans"});
  if (!fields) return std::unexpected(fields.error());
  WebTlsConfig tls;
  std::string cert, key, ca, cert_file, key_file, ca_file, client_auth;
  YAML::Node cert_node, key_node, ca_node, auth_node, sans_node;
  bool enabled = false;
  constexpr size_t kInlineMax = 1 << 20;
  for (const auto& [k, v] : *fields) {
    const std::string& name = k.Scalar();
    const std::string field = f + "." + name;
    auto text = [&](std::string& dst, YAML::Node& at, size_t max) -> Result<void> {
      auto s = r.string(v, field, max);
      if (!s) return std::unexpected(s.error());
      dst = std::move(*s);
      at = k;
      if (!dst.empty()) enabled = true;
      return {};
    };
    Result<void> ok;
    if (name == "cert")
      ok = text(cert, cert_node, kInlineMax);
    else if (name == "key")
      ok = text(key, key_node, kInlineMax);
    else if (name == "client_ca")
      ok = text(ca, ca_node, kInlineMax);
    else if (name == "cert_file")
      ok = text(cert_file, cert_node, 4096);
    else if (name == "key_file")
      ok = text(key_file, key_node, 4096);
    else if (name == "client_ca_file")
      ok = text(ca_file, ca_node, 4096);
    else if (name == "client_auth_type")
      ok = text(client_auth, auth_node, 64);
    if (!ok) return ok;
    if (name == "cipher_suites") {
      auto list = r.strings(v, field);
      if (!list) return std::unexpected(list.error());
      for (const auto& s : *list) {
        if (std::none_of(kSuites.begin(), kSuites.end(), [&](const Suite& x) { return s == x.go_name; })) {
          return r.error(v, field, "unknown cipher: {}", s);
        }
      }
      tls.cipher_suites = std::move(*list);
    } else if (name == "curve_preferences") {
      auto list = r.strings(v, field);
      if (!list) return std::unexpected(list.error());
      for (const auto& s : *list) {
        if (!lookup(kCurves, s))
          return r.error(v, field, "unknown curve: {} (known: CurveP256, CurveP384, CurveP521, X25519)", s);
      }
      tls.curve_preferences = std::move(*list);
    } else if (name == "min_version" || name == "max_version") {
      auto s = r.string(v, field, 16);
      if (!s) return std::unexpected(s.error());
      auto ver = lookup(kVersions, *s);
      if (!ver) return r.error(v, field, "unknown TLS version: {} (known: TLS10, TLS11, TLS12, TLS13)", *s);
      (name == "min_version" ? tls.min_version : tls.max_version) = *ver;
    } else if (name == "prefer_server_cipher_suites") {
      auto b = r.boolean(v, field);
      if (!b) return std::unexpected(b.error());
      tls.prefer_server_cipher_suites = *b;
    } else if (name == "client_allowed_sans") {
      auto list = r.strings(v, field);
      if (!list) return std::unexpected(list.error());
      tls.client_allowed_sans = std::move(*list);
      sans_node = k;
    }
  }
  if (!enabled) return {};  // no TLS: the other fields are ignored, as the toolkit does

  if (!cert.empty() && !cert_file.empty()) return r.error(cert_node, f, "cert and cert_file are both set; give one");
  if (!key.empty() && !key_file.empty()) return r.error(key_node, f, "key and key_file are both set; give one");
  if (!ca.empty() && !ca_file.empty()) {
    return r.error(ca_node, f, "client_ca and client_ca_file are both set; give one");
  }
  if (cert.empty() && cert_file.empty()) return r.error(node, f, "missing one of cert or cert_file");
  if (key.empty() && key_file.empty()) return r.error(node, f, "missing one of key or key_file");
  auto read = [&](std::string& dst, const std::string& inline_value, const std::string& file, const YAML::Node& at,
                  const char* field) -> Result<void> {
    if (file.empty()) {
      dst = inline_value;
      return {};
    }
    auto text = r.file(at, f + "." + field, file, out.files);
    if (!text) return std::unexpected(text.error());
    dst = std::move(*text);
    return {};
  };
  if (auto ok = read(tls.cert_pem, cert, cert_file, cert_node, "cert_file"); !ok) return ok;
  if (auto ok = read(tls.key_pem, key, key_file, key_node, "key_file"); !ok) return ok;
  if (auto ok = read(tls.client_ca_pem, ca, ca_file, ca_node, "client_ca_file"); !ok) return ok;

  if (!client_auth.empty()) {
    auto a = lookup(kClientAuth, client_auth);
    if (!a) {
      return r.error(auth_node, f + ".client_auth_type",
                     "invalid ClientAuth: {} (known: NoClientCert, RequestClientCert, RequireAnyClientCert, "
                     "VerifyClientCertIfGiven, RequireAndVerifyClientCert)",
                     client_auth);
    }
    tls.client_auth = *a;
  }
  if (!tls.client_ca_pem.empty() && tls.client_auth == ClientAuth::kNoClientCert) {
    return r.error(ca_node, f, "client CA's have been configured without a Client Auth Policy (client_auth_type)");
  }
  if (tls.client_allowed_sans && tls.client_auth != ClientAuth::kRequireAnyClientCert &&
      tls.client_auth != ClientAuth::kRequireAndVerifyClientCert) {
    return r.error(sans_node, f + ".client_allowed_sans",
                   "requires client_auth_type to be one of RequireAnyClientCert or RequireAndVerifyClientCert");
  }
  if (tls.min_version > tls.max_version) return r.error(node, f, "min_version is above max_version");
  out.tls = std::move(tls);
  return {};
}

Result<void> parse_http(Reader& r, const YAML::Node& node, WebConfig& out) {
  const std::string f = "http_server_config";
  auto fields = r.entries(node, f, {"http2", "headers"});
  if (!fields) return std::unexpected(fields.error());
  for (const auto& [k, v] : *fields) {
    if (k.Scalar() == "http2") {
      auto b = r.boolean(v, f + ".http2");
      if (!b) return std::unexpected(b.error());
      out.http2 = *b;
      continue;
    }
    auto headers = r.entries(v, f + ".headers", {});
    if (!headers) return std::unexpected(headers.error());
    for (const auto& [hk, hv] : *headers) {
      const std::string& name = hk.Scalar();
      const std::string field = f + ".headers." + name;
      const auto& rules = header_rules();
      auto rule = std::find_if(rules.begin(), rules.end(), [&](const HeaderRule& x) { return name == x.name; });
      if (rule == rules.end()) return r.error(hk, field, "HTTP header \"{}\" can not be configured", name);
      auto value = r.string(hv, field, r.limits().max_value_bytes);
      if (!value) return std::unexpected(value.error());
      if (value->find_first_of("\r\n") != std::string::npos || value->find('\0') != std::string::npos) {
        return r.error(hv, field, "line breaks are not allowed in a header value");
      }
      if (!rule->values.empty() &&
          std::none_of(rule->values.begin(), rule->values.end(), [&](const char* a) { return *value == a; })) {
        std::string allowed;
        for (const char* a : rule->values) allowed += fmt::format("{}\"{}\"", allowed.empty() ? "" : ", ", a);
        return r.error(hv, field, "invalid value \"{}\" (expected one of: {})", *value, allowed);
      }
      if (!value->empty()) out.headers.emplace_back(name, std::move(*value));  // blank: unset
    }
  }
  return {};
}

}  // namespace

std::string WebTlsConfig::gnutls_priority() const {
  std::string p = "NORMAL:-VERS-ALL";
  for (auto it = kVersions.rbegin(); it != kVersions.rend(); ++it) {
    if (it->second >= min_version && it->second <= max_version) {
      p += std::string(":+VERS-TLS1.") + static_cast<char>('0' + (it->second - 0x0301));
    }
  }
  if (!cipher_suites.empty()) {
    std::vector<std::string> kx, ciphers, macs;
    auto add = [](std::vector<std::string>& v, const char* s) {
      if (*s != '\0' && std::find(v.begin(), v.end(), s) == v.end()) v.emplace_back(s);
    };
    for (const auto& name : cipher_suites) {
      for (const auto& s : kSuites) {
        if (name != s.go_name) continue;
        add(kx, s.kx);
        add(ciphers, s.cipher);
        add(macs, s.mac);
      }
    }
    p += ":-CIPHER-ALL:-MAC-ALL";
    for (const auto& c : ciphers) p += ":+" + c;
    for (const auto& m : macs) p += ":+" + m;
    // TLS 1.3 suites name no key exchange; when only those are listed the TLS 1.2 ones stay as
    // NORMAL has them (they cannot pair with a cipher not listed).
    if (!kx.empty()) {
      p += ":-KX-ALL";
      for (const auto& k : kx) p += ":+" + k;
    }
  }
  if (!curve_preferences.empty()) {
    p += ":-GROUP-ALL";
    for (const auto& c : curve_preferences) p += std::string(":+") + *lookup(kCurves, c);
  }
  if (prefer_server_cipher_suites) p += ":%SERVER_PRECEDENCE";
  return p;
}

bool WebTlsConfig::cert_required() const {
  return client_auth == ClientAuth::kRequireAnyClientCert || client_auth == ClientAuth::kRequireAndVerifyClientCert;
}
bool WebTlsConfig::cert_requested() const { return client_auth != ClientAuth::kNoClientCert; }
bool WebTlsConfig::cert_verified() const {
  return client_auth == ClientAuth::kVerifyClientCertIfGiven || client_auth == ClientAuth::kRequireAndVerifyClientCert;
}

const std::string* WebConfig::user_hash(std::string_view user) const {
  auto it = std::lower_bound(users.begin(), users.end(), user,
                             [](const auto& entry, std::string_view u) { return entry.first < u; });
  return it != users.end() && it->first == user ? &it->second : nullptr;
}

Result<WebConfig> parse_web_config(std::string_view text, const std::string& path, const WebConfigLimits& limits) {
  if (text.size() > limits.max_file_bytes) {
    return fail(ErrorCode::kInvalidArgument, "{}: larger than {} bytes", path, limits.max_file_bytes);
  }
  YamlLimits yl;
  yl.max_bytes = limits.max_file_bytes;
  yl.max_nodes = 4 * limits.max_users + 4 * limits.max_list + 1000;
  yl.max_depth = 16;
  if (auto ok = check_yaml(text, path, yl); !ok) return std::unexpected(ok.error());
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    return fail(ErrorCode::kInvalidArgument, "{}:{}: {}", path, e.mark.line + 1, e.msg);
  }
  WebConfig out;
  out.path = path;
  out.files.push_back(path);
  Reader r(path, limits);
  auto fields = r.entries(root, "", {"tls_server_config", "http_server_config", "basic_auth_users", "rate_limit"});
  if (!fields) return std::unexpected(fields.error());
  for (const auto& [k, v] : *fields) {
    const std::string& name = k.Scalar();
    if (name == "tls_server_config") {
      if (auto ok = parse_tls(r, v, out); !ok) return std::unexpected(ok.error());
    } else if (name == "http_server_config") {
      if (auto ok = parse_http(r, v, out); !ok) return std::unexpected(ok.error());
    } else if (name == "basic_auth_users") {
      auto users = r.entries(v, name, {});
      if (!users) return std::unexpected(users.error());
      if (users->size() > limits.max_users) return r.error(v, name, "more than {} users", limits.max_users);
      for (const auto& [uk, uv] : *users) {
        const std::string field = name + "." + uk.Scalar();
        if (uk.Scalar().size() > limits.max_value_bytes) {
          return r.error(uk, name, "a user name is longer than {} bytes", limits.max_value_bytes);
        }
        auto hash = r.string(uv, field, 128);
        if (!hash) return std::unexpected(hash.error());
        if (auto problem = bcrypt_problem(*hash, limits.max_bcrypt_cost)) return r.error(uv, field, "{}", *problem);
        out.users.emplace_back(uk.Scalar(), std::move(*hash));
      }
      std::sort(out.users.begin(), out.users.end());
    } else if (name == "rate_limit") {
      auto rl = r.entries(v, name, {"interval", "burst"});
      if (!rl) return std::unexpected(rl.error());
      for (const auto& [rk, rv] : *rl) {
        const std::string field = name + "." + rk.Scalar();
        auto s = r.string(rv, field, 64);
        if (!s) return std::unexpected(s.error());
        if (rk.Scalar() == "interval") {
          auto d = parse_go_duration(*s);
          if (!d) return r.error(rv, field, "expected a duration such as 1s or 100ms, got \"{}\"", *s);
          out.rate_interval = *d;
        } else {
          int burst = 0;
          if (!YAML::convert<int>::decode(rv, burst) || burst < 0) {
            return r.error(rv, field, "expected a whole number, 0 or more");
          }
          out.rate_burst = burst;
        }
      }
    }
  }
  return out;
}

Result<WebConfig> load_web_config(const std::string& path, const WebConfigLimits& limits) {
  auto text = read_file_limited(path, limits.max_file_bytes);
  if (!text) return std::unexpected(text.error().wrap("web config"));
  return parse_web_config(*text, path, limits);
}

bool bcrypt_matches(const std::string& hash, std::string_view password) {
  if (bcrypt_problem(hash, 31) || password.find('\0') != std::string_view::npos) return false;
  // bcrypt reads at most 72 bytes of the password, as Go's does.
  crypt_data data{};
  const std::string phrase(password);
  const char* out = crypt_rn(phrase.c_str(), hash.c_str(), &data, sizeof data);
  if (out == nullptr || out[0] == '*') return false;
  const size_t n = std::strlen(out);
  if (n != hash.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < n; ++i) diff |= static_cast<unsigned char>(out[i] ^ hash[i]);
  return diff == 0;
}

std::string bcrypt_hash(std::string_view password, int cost) {
  char setting[CRYPT_GENSALT_OUTPUT_SIZE];
  if (crypt_gensalt_rn("$2b$", static_cast<unsigned long>(cost), nullptr, 0, setting, sizeof setting) == nullptr) {
    return "";
  }
  crypt_data data{};
  const std::string phrase(password);
  const char* out = crypt_rn(phrase.c_str(), setting, &data, sizeof data);
  return out == nullptr || out[0] == '*' ? "" : std::string(out);
}

std::optional<std::chrono::nanoseconds> parse_go_duration(std::string_view text) {
  if (text == "0") return std::chrono::nanoseconds(0);
  if (text.empty()) return std::nullopt;
  static constexpr std::array<std::pair<std::string_view, double>, 7> kUnits = {{
      {"ns", 1},
      {"us", 1e3},
      {"µs", 1e3},
      {"ms", 1e6},
      {"s", 1e9},
      {"m", 60e9},
      {"h", 3600e9},
  }};
  double total = 0;
  size_t i = 0;
  while (i < text.size()) {
    size_t start = i;
    while (i < text.size() && ((text[i] >= '0' && text[i] <= '9') || text[i] == '.')) ++i;
    if (i == start) return std::nullopt;
    double value = 0;
    try {
      value = std::stod(std::string(text.substr(start, i - start)));
    } catch (...) {
      return std::nullopt;
    }
    size_t unit_end = i;
    while (unit_end < text.size() && !((text[unit_end] >= '0' && text[unit_end] <= '9') || text[unit_end] == '.')) {
      ++unit_end;
    }
    const std::string_view unit = text.substr(i, unit_end - i);
    auto u = std::find_if(kUnits.begin(), kUnits.end(), [&](const auto& x) { return x.first == unit; });
    if (u == kUnits.end()) return std::nullopt;
    total += value * u->second;
    i = unit_end;
  }
  if (total > 1e18) return std::nullopt;
  return std::chrono::nanoseconds(static_cast<long long>(total));
}

}  // namespace kgpu
