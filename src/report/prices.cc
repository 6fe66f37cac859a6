#include "report/prices.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <optional>

#include "common/strings.h"
#include "common/files.h"
#include "common/yaml_guard.h"

namespace kgpu::cost {

namespace {

constexpr size_t kMaxBytes = 64 << 10;
constexpr size_t kMaxNodes = 10'000;
constexpr size_t kMaxDepth = 8;
constexpr size_t kMaxModels = 1000;

std::optional<double> price_value(const std::string& text) {
  if (text.empty() || text.size() > 32) return std::nullopt;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size() || !std::isfinite(v) || v < 0) return std::nullopt;
  if (text.find_first_of("xXnNiI") != std::string::npos) return std::nullopt;  // hex, nan, inf
  return v;
}

int line_of(const YAML::Node& n) { return n.Mark().line + 1; }

}  // namespace

double Prices::price_for(std::string_view model) const {
  const std::string m = ascii_lower(model);
  size_t best_len = 0;
  double best = default_price;
  for (const auto& [name, price] : models) {
    const std::string n = ascii_lower(name);
    if (n == m) return price;
    if (!n.empty() && m.find(n) != std::string::npos && n.size() > best_len) {
      best_len = n.size();
      best = price;
    }
  }
  return best;
}

Result<void> Prices::set_from_flag(std::string_view flag) {
  const auto eq = flag.rfind('=');
  if (eq == std::string_view::npos || eq == 0) {
    return fail(ErrorCode::kInvalidArgument, "--price {}: expected MODEL=PRICE (per GPU-hour)", flag);
  }
  const std::string model(flag.substr(0, eq));
  const auto v = price_value(std::string(flag.substr(eq + 1)));
  if (!v) {
    return fail(ErrorCode::kInvalidArgument, "--price {}: price '{}' is not a non-negative number", flag,
                flag.substr(eq + 1));
  }
  for (auto& [name, price] : models) {
    if (ascii_lower(name) == ascii_lower(model)) {
      price = *v;
      return {};
    }
  }
  models.emplace_back(model, *v);
  return {};
}

Result<Prices> parse_prices(std::string_view text, const std::string& source) {
  if (auto ok = check_yaml(text, source, {kMaxBytes, kMaxNodes, kMaxDepth}); !ok) return std::unexpected(ok.error());
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    return fail(ErrorCode::kInvalidArgument, "{}:{}: {}", source, e.mark.line + 1, e.msg);
  }
  Prices p;
  if (!root || root.IsNull()) return p;
  if (!root.IsMap()) return fail(ErrorCode::kInvalidArgument, "{}:{}: expected a mapping", source, line_of(root));
  for (const auto& kv : root) {
    if (!kv.first.IsScalar()) {
      return fail(ErrorCode::kInvalidArgument, "{}:{}: a key must be a plain name", source, line_of(kv.first));
    }
    const std::string key = kv.first.Scalar();
    const YAML::Node& v = kv.second;
    if (key == "currency") {
      if (!v.IsScalar() || v.Scalar().empty() || v.Scalar().size() > 16) {
        return fail(ErrorCode::kInvalidArgument, "{}:{}: currency: expected a short name such as USD", source,
                    line_of(v));
      }
      p.currency = v.Scalar();
    } else if (key == "default") {
      const auto price = v.IsScalar() ? price_value(v.Scalar()) : std::nullopt;
      if (!price) {
        return fail(ErrorCode::kInvalidArgument, "{}:{}: default: price '{}' is not a non-negative number", source,
                    line_of(v), v.IsScalar() ? v.Scalar() : "(not a scalar)");
      }
      p.default_price = *price;
    } else if (key == "models") {
      if (!v.IsMap()) {
        return fail(ErrorCode::kInvalidArgument, "{}:{}: models: expected a mapping of GPU model to price", source,
                    line_of(v));
      }
      for (const auto& m : v) {
        if (!m.first.IsScalar()) {
          return fail(ErrorCode::kInvalidArgument, "{}:{}: models: a model name must be a plain name", source,
                      line_of(m.first));
        }
        const std::string model = m.first.Scalar();
        if (model.empty() || model.size() > 256) {
          return fail(ErrorCode::kInvalidArgument, "{}:{}: models: a model name must have 1 to 256 characters", source,
                      line_of(m.first));
        }
        const auto price = m.second.IsScalar() ? price_value(m.second.Scalar()) : std::nullopt;
        if (!price) {
          return fail(ErrorCode::kInvalidArgument, "{}:{}: models.{}: price '{}' is not a non-negative number", source,
                      line_of(m.second), model, m.second.IsScalar() ? m.second.Scalar() : "(not a scalar)");
        }
        if (p.models.size() >= kMaxModels) {
          return fail(ErrorCode::kInvalidArgument, "{}:{}: models: more than {} entries", source, line_of(m.first),
                      kMaxModels);
        }
        for (const auto& [name, _] : p.models) {
          if (ascii_lower(name) == ascii_lower(model)) {
            return fail(ErrorCode::kInvalidArgument, "{}:{}: models.{}: listed twice", source, line_of(m.first), model);
          }
        }
        p.models.emplace_back(model, *price);
      }
    } else {
      return fail(ErrorCode::kInvalidArgument, "{}:{}: unknown field '{}' (expected currency, default, models)", source,
                  line_of(kv.first), key);
    }
  }
  return p;
}

Result<Prices> load_prices(const std::string& path) {
  auto text = read_file_limited(path, kMaxBytes);
  if (!text) return std::unexpected(text.error());
  return parse_prices(*text, path);
}

}  // namespace kgpu::cost
