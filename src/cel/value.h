// CEL runtime values and static types (internal to src/cel).
#pragma once

#include <re2/re2.h>

#include <cstdint>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "cel/cel.h"

namespace kgpu::cel {

struct Value;
struct MapData;
using ListP = std::shared_ptr<const std::vector<Value>>;
using MapP = std::shared_ptr<const MapData>;
struct Err {
  std::string message;
};

struct Value {
  std::variant<std::monostate, bool, int64_t, uint64_t, double, std::string, ListP, MapP, k8s::Quantity, Semver, Err> v;
  bool is_err() const { return std::holds_alternative<Err>(v); }
};

struct MapData {
  std::vector<std::pair<Value, Value>> entries;
  bool missing_is_empty_map = false;  // device.attributes / device.capacity: an unknown domain is {}
};

// Static kinds; kDyn is "known only at run time".
enum class K { kDyn, kNull, kBool, kInt, kUint, kDouble, kString, kList, kMap, kQuantity, kSemver, kDevice, kCelNs };

struct Type {
  K k = K::kDyn;
  std::shared_ptr<const Type> elem;  // list element or map value
  static Type of(K k) { return Type{k, nullptr}; }
  static Type list(Type e) { return Type{K::kList, std::make_shared<const Type>(std::move(e))}; }
  static Type map(Type v) { return Type{K::kMap, std::make_shared<const Type>(std::move(v))}; }
  Type element() const { return elem ? *elem : Type{}; }
};

const char* kind_name(K k);
const char* value_kind(const Value& v);

struct Node {
  enum Kind { kLit, kIdent, kSelect, kHas, kIndex, kCall, kList, kMap, kCond, kAnd, kOr, kNot, kNeg, kBinary, kComp, kBind };
  Kind kind = kLit;
  std::string name;  // identifier, field, function, operator or macro
  std::string var;   // comprehension or cel.bind variable
  Value lit;
  std::vector<std::shared_ptr<const Node>> args;  // calls: the receiver first when has_target
  bool has_target = false;
  size_t pos = 0;
  Type type;
  std::shared_ptr<const re2::RE2> regex;  // matches() with a literal pattern, compiled once
};

}  // namespace kgpu::cel
