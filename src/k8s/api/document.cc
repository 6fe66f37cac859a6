#include "k8s/api/document.h"

#include <cmath>

#include "k8s/loader.h"

namespace kgpu::k8s::api {

using nlohmann::json;

namespace {

constexpr size_t align8(size_t n) { return (n + 7) & ~size_t{7}; }

std::string scalar_text(const json& v) {
  if (v.is_number_float() && !std::isfinite(v.get<double>())) return "1e999";
  return v.dump();
}

// Bytes the tree needs for `v`'s arrays and texts; false when deeper than kMaxDepth.
bool measure(const json& v, int depth, size_t* bytes) {
  if (depth > kMaxDepth) return false;
  switch (v.type()) {
    case json::value_t::object:
      *bytes += align8(v.size() * sizeof(Entry));
      for (const auto& [k, x] : v.items()) {
        *bytes += align8(k.size());
        if (!measure(x, depth + 1, bytes)) return false;
      }
      return true;
    case json::value_t::array:
      *bytes += align8(v.size() * sizeof(Value));
      for (const auto& x : v)
        if (!measure(x, depth + 1, bytes)) return false;
      return true;
    case json::value_t::string:
      *bytes += align8(v.get_ref<const std::string&>().size());
      return true;
    case json::value_t::null:
      return true;
    default:
      *bytes += align8(scalar_text(v).size());
      return true;
  }
}

Value build(const json& v, Tree& tree) {
  switch (v.type()) {
    case json::value_t::object: {
      Entry* entries = v.empty() ? nullptr : static_cast<Entry*>(tree.allocate(v.size() * sizeof(Entry)));
      size_t i = 0;
      for (const auto& [k, x] : v.items()) {
        const std::string_view key = tree.copy(k);
        ::new (static_cast<void*>(entries + i++)) Entry(TreeBuilder::entry(key, 1, build(x, tree)));
      }
      return TreeBuilder::map(entries, v.size(), 1);
    }
    case json::value_t::array: {
      Value* items = v.empty() ? nullptr : static_cast<Value*>(tree.allocate(v.size() * sizeof(Value)));
      size_t i = 0;
      for (const auto& x : v) ::new (static_cast<void*>(items + i++)) Value(build(x, tree));
      return TreeBuilder::seq(items, v.size(), 1);
    }
    case json::value_t::string:
      return TreeBuilder::scalar(ValueType::kString, tree.copy(v.get_ref<const std::string&>()), 1);
    case json::value_t::null:
      return TreeBuilder::scalar(ValueType::kNull, "null", 1);
    case json::value_t::boolean:
      return TreeBuilder::scalar(ValueType::kBool, v.get<bool>() ? "true" : "false", 1);
    default:
      return TreeBuilder::scalar(ValueType::kNumber, tree.copy(scalar_text(v)), 1);
  }
}

}  // namespace

Result<Document> document_from_json(const json& obj, std::string source, std::string_view kind,
                                    std::string_view api_version) {
  if (!obj.is_object()) return fail(ErrorCode::kInvalidArgument, "{}: not a JSON object", source);
  if (const auto k = obj.find("kind"); k != obj.end() && !k->is_string())
    return fail(ErrorCode::kInvalidArgument, "{}: kind is not a string", source);
  size_t bytes = align8(sizeof(Value));
  if (!measure(obj, 0, &bytes))
    return fail(ErrorCode::kInvalidArgument, "{}: nested deeper than {} levels", source, kMaxDepth);
  auto tree = std::make_shared<Tree>(std::string(), source);
  tree->reserve_exact(bytes + align8(kind.size()) + align8(api_version.size()));
  const Value root = build(obj, *tree);
  Document doc;
  doc.source = tree->source();
  doc.line = 1;
  doc.root = TreeBuilder::store(*tree, &root, 1);
  const Value* k = doc.root->find("kind");
  doc.kind = k != nullptr ? k->text() : tree->copy(kind);
  const Value* v = doc.root->find("apiVersion");
  doc.api_version = v != nullptr && v->is_string() ? v->text() : tree->copy(api_version);
  if (const Entry* m = doc.root->find_entry("metadata"); m != nullptr)
    doc.metadata = decode_meta(&m->value(), m->key_line());
  doc.tree = std::move(tree);
  return doc;
}

}  // namespace kgpu::k8s::api
