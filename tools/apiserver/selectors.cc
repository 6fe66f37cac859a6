#include "selectors.h"

#include <algorithm>

namespace kgpu::apiserver {

using nlohmann::json;

namespace {

constexpr size_t kMaxRequirements = 64;

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Splits on commas outside parentheses.
std::optional<std::vector<std::string_view>> split_terms(std::string_view text, std::string& error) {
  std::vector<std::string_view> out;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i <= text.size(); ++i) {
    const char c = i < text.size() ? text[i] : ',';
    if (c == '(') ++depth;
    if (c == ')') --depth;
    if (depth < 0 || depth > 1) {
      error = "unbalanced parentheses";
      return std::nullopt;
    }
    if (c == ',' && depth == 0) {
      const auto term = trim(text.substr(start, i - start));
      if (!term.empty()) out.push_back(term);
      start = i + 1;
      if (out.size() > kMaxRequirements) {
        error = "too many requirements";
        return std::nullopt;
      }
    }
  }
  if (depth != 0) {
    error = "unbalanced parentheses";
    return std::nullopt;
  }
  return out;
}

bool valid_key(std::string_view k) {
  if (k.empty() || k.size() > 316) return false;
  return std::all_of(k.begin(), k.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.' || c == '/';
  });
}

const json* label_map(const json& object) {
  const auto m = object.find("metadata");
  if (m == object.end() || !m->is_object()) return nullptr;
  const auto l = m->find("labels");
  if (l == m->end() || !l->is_object()) return nullptr;
  return &*l;
}

}  // namespace

std::optional<Selector> parse_label_selector(std::string_view text, std::string& error) {
  auto terms = split_terms(text, error);
  if (!terms) return std::nullopt;
  Selector out;
  for (std::string_view t : *terms) {
    Requirement r;
    if (t.starts_with('!')) {
      r.key = std::string(trim(t.substr(1)));
      r.op = Requirement::Op::kNotExists;
    } else if (const auto paren = t.find('('); paren != std::string_view::npos) {
      if (!t.ends_with(')')) {
        error = "expected ')' at the end of: " + std::string(t);
        return std::nullopt;
      }
      const auto head = trim(t.substr(0, paren));
      const auto sp = head.find_last_of(" \t");
      if (sp == std::string_view::npos) {
        error = "expected 'in' or 'notin' in: " + std::string(t);
        return std::nullopt;
      }
      const auto op = head.substr(sp + 1);
      r.key = std::string(trim(head.substr(0, sp)));
      if (op == "in") {
        r.op = Requirement::Op::kIn;
      } else if (op == "notin") {
        r.op = Requirement::Op::kNotIn;
      } else {
        error = "unknown operator '" + std::string(op) + "' in: " + std::string(t);
        return std::nullopt;
      }
      std::string_view list = t.substr(paren + 1, t.size() - paren - 2);
      while (!list.empty()) {
        const auto comma = list.find(',');
        r.values.emplace_back(trim(list.substr(0, comma)));
        if (comma == std::string_view::npos) break;
        list.remove_prefix(comma + 1);
      }
    } else if (const auto ne = t.find("!="); ne != std::string_view::npos) {
      r.key = std::string(trim(t.substr(0, ne)));
      r.op = Requirement::Op::kNotEq;
      r.values.emplace_back(trim(t.substr(ne + 2)));
    } else if (const auto eq = t.find('='); eq != std::string_view::npos) {
      r.key = std::string(trim(t.substr(0, eq)));
      r.op = Requirement::Op::kEq;
      const size_t skip = t.substr(eq).starts_with("==") ? 2 : 1;
      r.values.emplace_back(trim(t.substr(eq + skip)));
    } else {
      r.key = std::string(t);
      r.op = Requirement::Op::kExists;
    }
    if (!valid_key(r.key)) {
      error = "invalid label key \"" + r.key + "\"";
      return std::nullopt;
    }
    out.requirements.push_back(std::move(r));
  }
  return out;
}

std::optional<Selector> parse_field_selector(std::string_view text, const std::vector<std::string>& allowed,
                                             std::string& error) {
  auto terms = split_terms(text, error);
  if (!terms) return std::nullopt;
  Selector out;
  for (std::string_view t : *terms) {
    Requirement r;
    if (const auto ne = t.find("!="); ne != std::string_view::npos) {
      r.key = std::string(trim(t.substr(0, ne)));
      r.op = Requirement::Op::kNotEq;
      r.values.emplace_back(trim(t.substr(ne + 2)));
    } else if (const auto eq = t.find('='); eq != std::string_view::npos) {
      r.key = std::string(trim(t.substr(0, eq)));
      const size_t skip = t.substr(eq).starts_with("==") ? 2 : 1;
      r.values.emplace_back(trim(t.substr(eq + skip)));
    } else {
      error = "invalid selector: '" + std::string(text) + "'; can't understand '" + std::string(t) + "'";
      return std::nullopt;
    }
    if (r.key != "metadata.name" && r.key != "metadata.namespace" &&
        std::find(allowed.begin(), allowed.end(), r.key) == allowed.end()) {
      error = "field label not supported: " + r.key;
      return std::nullopt;
    }
    out.requirements.push_back(std::move(r));
  }
  return out;
}

bool matches_labels(const Selector& s, const json& object) {
  const json* labels = label_map(object);
  for (const auto& r : s.requirements) {
    const json* v = nullptr;
    if (labels != nullptr) {
      if (const auto it = labels->find(r.key); it != labels->end() && it->is_string()) v = &*it;
    }
    const auto has = [&](const std::string& want) { return v != nullptr && v->get_ref<const std::string&>() == want; };
    switch (r.op) {
      case Requirement::Op::kEq:
        if (!has(r.values[0])) return false;
        break;
      case Requirement::Op::kNotEq:
        if (has(r.values[0])) return false;
        break;
      case Requirement::Op::kIn:
        if (std::none_of(r.values.begin(), r.values.end(), has)) return false;
        break;
      case Requirement::Op::kNotIn:
        if (std::any_of(r.values.begin(), r.values.end(), has)) return false;
        break;
      case Requirement::Op::kExists:
        if (v == nullptr) return false;
        break;
      case Requirement::Op::kNotExists:
        if (v != nullptr) return false;
        break;
    }
  }
  return true;
}

std::string field_value(const json& object, std::string_view path) {
  const json* cur = &object;
  while (!path.empty()) {
    const auto dot = path.find('.');
    const std::string key(path.substr(0, dot));
    if (!cur->is_object()) return {};
    const auto it = cur->find(key);
    if (it == cur->end()) return {};
    cur = &*it;
    if (dot == std::string_view::npos) break;
    path.remove_prefix(dot + 1);
  }
  if (cur->is_string()) return cur->get<std::string>();
  if (cur->is_boolean()) return cur->get<bool>() ? "true" : "false";
  if (cur->is_number()) return cur->dump();
  // The Event field `source` is the reporting component.
  if (cur->is_object() && cur->contains("component")) return field_value(*cur, "component");
  return {};
}

bool matches_fields(const Selector& s, const json& object) {
  for (const auto& r : s.requirements) {
    std::string v = field_value(object, r.key);
    // Unset booleans select as false, as the API server's field sets do for pods' hostNetwork
    // and nodes' unschedulable.
    if (v.empty() && (r.key == "spec.hostNetwork" || r.key == "spec.unschedulable")) v = "false";
    const bool eq = v == r.values[0];
    if (r.op == Requirement::Op::kNotEq ? eq : !eq) return false;
  }
  return true;
}

}  // namespace kgpu::apiserver
