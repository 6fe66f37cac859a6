// Internal to kgpu_k8s (not installed for other libraries): the field decoder the typed views
// share (decode_*.cc), and the decoders of the pieces several views embed: label selectors, pod
// specs and templates, conditions, container statuses.
//
// Thread safety: a Decoder appends to the issue list it was given; one thread at a time.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "common/strings.h"
#include "k8s/objects.h"

namespace kgpu::k8s::detail {

// Field decoding with issues: a field of the wrong type is left absent and reported.
class Decoder {
 public:
  explicit Decoder(std::vector<Issue>* issues) : issues_(issues) {}

  void issue(int line, std::string message, bool invalid_quantity = false) {
    issues_->push_back(Issue{line, std::move(message), invalid_quantity});
  }

  // The entry for `key` with a non-null value, or nullptr.
  static const Entry* entry(const Value* map, std::string_view key) {
    if (map == nullptr) return nullptr;
    const Entry* e = map->find_entry(key);
    return e != nullptr && !e->value().is_null() ? e : nullptr;
  }
  static const Value* child(const Value* map, std::string_view key) {
    const Entry* e = entry(map, key);
    return e != nullptr ? &e->value() : nullptr;
  }

  // A mapping field; an issue when it is something else.
  const Value* map(const Value* parent, std::string_view key, std::string_view path) {
    const Entry* e = entry(parent, key);
    if (e == nullptr) return nullptr;
    if (!e->value().is_map()) {
      type_issue(e, path, key, "a mapping");
      return nullptr;
    }
    return &e->value();
  }
  std::span<const Value> seq(const Value* parent, std::string_view key, std::string_view path) {
    const Entry* e = entry(parent, key);
    if (e == nullptr) return {};
    if (!e->value().is_seq()) {
      type_issue(e, path, key, "a list");
      return {};
    }
    return e->value().items();
  }

  Text text(const Value* parent, std::string_view key, std::string_view path) {
    const Entry* e = entry(parent, key);
    if (e == nullptr) return {};
    if (!e->value().is_string()) {
      type_issue(e, path, key, "a string");
      return {};
    }
    return Text{e->value().text(), e->key_line()};
  }
  // A string without type checks (for fields only read for messages).
  static std::string_view str(const Value* parent, std::string_view key) {
    const Value* n = child(parent, key);
    return n != nullptr && n->is_scalar() ? n->text() : std::string_view();
  }

  Int integer(const Value* parent, std::string_view key, std::string_view path) {
    const Entry* e = entry(parent, key);
    if (e == nullptr) return {};
    const auto v = e->value().as_int();
    if (!v) {
      type_issue(e, path, key, "an integer");
      return {};
    }
    return Int{*v, e->key_line()};
  }

  Bool boolean(const Value* parent, std::string_view key, std::string_view path) {
    const Entry* e = entry(parent, key);
    if (e == nullptr) return {};
    const auto v = e->value().as_bool();
    if (!v) {
      type_issue(e, path, key, "a boolean");
      return {};
    }
    return Bool{*v, e->key_line()};
  }

  Field<IntOrString> int_or_string(const Value* parent, std::string_view key, std::string_view path) {
    const Entry* e = entry(parent, key);
    if (e == nullptr) return {};
    IntOrString v;
    if (e->value().is_string()) {
      v.is_string = true;
      v.string_value = e->value().text();
    } else if (const auto i = e->value().as_int()) {
      v.int_value = *i;
    } else {
      type_issue(e, path, key, "an integer or a string");
      return {};
    }
    return Field<IntOrString>{v, e->key_line()};
  }

  Field<Quantity> quantity(const Entry& e, std::string_view path) {
    const Value& v = e.value();
    if (v.is_null()) return {};
    if (v.type() != ValueType::kString && v.type() != ValueType::kNumber) {
      type_issue(&e, path, e.key(), "a quantity", true);
      return {};
    }
    auto q = Quantity::parse(trim(v.text(), " \t\r\n"));
    if (!q) {
      issue(e.key_line(), fmt::format("{}.{}: {}", path, e.key(), q.error().message), true);
      return {};
    }
    return Field<Quantity>{*q, e.key_line()};
  }

  QuantityMap quantities(const Value* parent, std::string_view key, std::string_view path) {
    QuantityMap out;
    const Value* m = map(parent, key, path);
    if (m == nullptr) return out;
    const std::string sub = fmt::format("{}.{}", path, key);
    std::vector<QuantityMap::value_type> kv;
    kv.reserve(m->size());
    for (const Entry& e : m->entries()) {
      if (auto q = quantity(e, sub)) kv.emplace_back(e.key(), q);
    }
    out.assign_last_wins(std::move(kv));
    return out;
  }

  StringMap strings(const Value* parent, std::string_view key, std::string_view path, int* line = nullptr) {
    StringMap out;
    const Entry* e = entry(parent, key);
    if (e == nullptr) return out;
    if (line != nullptr) *line = e->key_line();
    if (!e->value().is_map()) {
      type_issue(e, path, key, "a mapping");
      return out;
    }
    std::vector<StringMap::value_type> kv;
    kv.reserve(e->value().size());
    for (const Entry& x : e->value().entries()) {
      if (x.value().is_scalar()) kv.emplace_back(x.key(), x.value().text());
    }
    out.assign_last_wins(std::move(kv));
    return out;
  }

  std::vector<Text> texts(const Value* parent, std::string_view key, std::string_view path) {
    std::vector<Text> out;
    const std::span<const Value> items = seq(parent, key, path);
    out.reserve(items.size());
    for (const Value& n : items) {
      if (n.is_scalar()) out.push_back(Text{n.text(), n.line()});
    }
    return out;
  }

  static std::vector<std::string_view> views(const Value* parent, std::string_view key) {
    std::vector<std::string_view> out;
    const Value* n = child(parent, key);
    if (n == nullptr) return out;
    for (const Value& item : n->items()) {
      if (item.is_scalar()) out.push_back(item.text());
    }
    return out;
  }

 private:
  void type_issue(const Entry* e, std::string_view path, std::string_view key, std::string_view expected,
                  bool invalid_quantity = false) {
    issue(e->key_line(),
          fmt::format("{}.{}: expected {}, found a {}{}", path, key, expected, node_type_name(e->value().type()),
                      e->value().is_scalar() ? fmt::format(" ('{}')", e->value().text()) : ""),
          invalid_quantity);
  }

  std::vector<Issue>* issues_;
};

inline bool is_kind(const Document& doc, std::string_view kind) { return doc.kind == kind; }

// decode_pod_spec.cc. `path` names the parent in issues ("spec.template").
LabelSelector decode_label_selector(Decoder& d, const Value* parent, std::string_view key, std::string_view path);
std::vector<Condition> decode_conditions(Decoder& d, const Value* parent, std::string_view path);
PodSpec decode_pod_spec(Decoder& d, const Value* parent, std::string_view path);
std::vector<ContainerStatus> decode_statuses(Decoder& d, const Value* status, std::string_view key,
                                             std::string_view path);
PodTemplate decode_template(Decoder& d, const Value* parent, std::string_view path);

}  // namespace kgpu::k8s::detail
