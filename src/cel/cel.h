// CEL for DRA device selectors: the language subset and the environment Kubernetes gives a
// `resource.k8s.io` selector (`device.driver`, `device.attributes[...]`, `device.capacity[...]`,
// `device.allowMultipleAllocations`), compiled once and evaluated per device.
//
// Language: literals (null, bool, int, uint `1u`, double, strings with escapes, raw and triple
// quoted), lists, maps, `?:`, `||`, `&&` (commutative: an error on one side is absorbed when the
// other decides), `!`, unary `-`, `== != < <= > >=` (numbers compare across int/uint/double),
// `+ - * / %` (int overflow and division by zero are errors), `in`, field selection and indexing,
// `has()`, the macros `all`, `exists`, `exists_one`, `map`, `filter`, `cel.bind`, `size`,
// conversions `int uint double string bool dyn`, the string functions `contains startsWith
// endsWith matches (RE2) lowerAscii upperAscii trim charAt indexOf lastIndexOf substring replace
// split join`, Kubernetes' quantity library (`quantity`, `isQuantity`, `compareTo`,
// `isGreaterThan`, `isLessThan`, `isInteger`, `asInteger`, `asApproximateFloat`, `sign`, `add`,
// `sub`) and semver library (`semver`, `isSemver`, `major`, `minor`, `patch`, `compareTo`,
// `isGreaterThan`, `isLessThan`). Anything else is a compile error that names it.
//
// Rules from the API: an expression is at most 10 KiB; nesting is bounded (kMaxDepth); the
// compiler checks types where they are known (`device.driver > 1` does not compile); evaluation is
// charged one unit per step plus the size of string and list work, and stops with cel-go's error
// once the cost passes the limit (the API's 1,000,000 for selectors). A domain missing from
// `device.attributes` or `device.capacity` is an empty map; a missing name in it is an evaluation
// error ("no such key"), as in Kubernetes, where such an error aborts the allocation.
//
// Thread safety: a Program is immutable after compile() and may be evaluated from many threads.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "common/error.h"
#include "k8s/quantity.h"

namespace kgpu::k8s {
struct Device;
}

namespace kgpu::cel {

inline constexpr size_t kMaxExpressionBytes = 10 * 1024;
inline constexpr int kMaxDepth = 100;
inline constexpr uint64_t kSelectorCostLimit = 1'000'000;

// A semantic version (semver 2.0): major.minor.patch[-pre][+build]; build is ignored in ordering.
struct Semver {
  uint64_t major = 0, minor = 0, patch = 0;
  std::string pre, build;
  static Result<Semver> parse(std::string_view text);
  int compare(const Semver& other) const;  // -1, 0, 1
  std::string to_string() const;
};

// One device attribute value as a ResourceSlice publishes it.
using Attribute = std::variant<int64_t, bool, std::string, Semver>;

// The `device` variable. Attribute and capacity names are qualified ("gpu.nvidia.com/memory") or
// bare ("memory": the driver's domain).
struct DeviceInput {
  std::string driver;
  std::map<std::string, Attribute, std::less<>> attributes;
  std::map<std::string, k8s::Quantity, std::less<>> capacity;
  bool allow_multiple_allocations = false;
};

// The `device` a selector sees for a ResourceSlice device (k8s/objects.h's typed view, from a
// manifest or from the API through k8s/api/document.h): `driver`, the attributes by their type
// (int, bool, string, version; a value of another type, or one that does not read as its type,
// is left out) and the capacities. One reading for doctor and the live allocator.
DeviceInput device_input(const k8s::Device& device, std::string_view driver);

struct Node;

class Program {
 public:
  // The expression as written.
  const std::string& source() const { return source_; }
  // Evaluates on `device`: true or false, or an error (a runtime error, a result that is not a
  // bool, or the cost limit passed). `cost`, when given, receives the units charged.
  Result<bool> matches(const DeviceInput& device, uint64_t cost_limit = kSelectorCostLimit,
                       uint64_t* cost = nullptr) const;
  // Capacity names the expression reads (`device.capacity["d"].name` gives "d/name").
  std::vector<std::string> capacities_read() const;

 private:
  friend Result<Program> compile(std::string_view expression);
  std::string source_;
  std::shared_ptr<const Node> root_;
};

// Parses and type-checks; errors name the column and what is wrong.
Result<Program> compile(std::string_view expression);

}  // namespace kgpu::cel
