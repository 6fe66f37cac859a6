// CEL for DRA selectors: the guide's and NVIDIA's selectors on an H100 and a MIG device, the
// language's semantics where they differ from C++ (error absorption, cross-kind numbers, code
// points), Kubernetes' quantity and semver libraries, and bounds on hostile expressions.
#include <gtest/gtest.h>

#include <string>

#include "cel/cel.h"

namespace kgpu::cel {
namespace {

DeviceInput h100() {
  DeviceInput d;
  d.driver = "gpu.nvidia.com";
  d.attributes["type"] = std::string("gpu");
  d.attributes["productName"] = std::string("NVIDIA H100 80GB HBM3");
  d.attributes["architecture"] = std::string("Hopper");
  d.attributes["driverVersion"] = *Semver::parse("580.105.8");
  d.attributes["cudaComputeCapability"] = *Semver::parse("9.0.0");
  d.attributes["index"] = int64_t{3};
  d.attributes["resource.kubernetes.io/pciBusID"] = std::string("0000:b9:00.0");
  d.capacity["memory"] = *k8s::Quantity::parse("81559Mi");
  return d;
}

DeviceInput mig() {
  DeviceInput d;
  d.driver = "gpu.nvidia.com";
  d.attributes["type"] = std::string("mig");
  d.attributes["profile"] = std::string("1g.12gb");
  d.attributes["parentUUID"] = std::string("GPU-1234");
  d.capacity["memory"] = *k8s::Quantity::parse("11008Mi");
  d.capacity["multiprocessors"] = *k8s::Quantity::parse("16");
  return d;
}

Result<bool> run(std::string_view e, const DeviceInput& d = h100()) {
  auto p = compile(e);
  if (!p) return std::unexpected(p.error());
  return p->matches(d);
}

bool yes(std::string_view e, const DeviceInput& d = h100()) {
  auto r = run(e, d);
  EXPECT_TRUE(r.has_value()) << e << ": " << r.error().message;
  return r.value_or(false);
}

std::string error_of(std::string_view e, const DeviceInput& d = h100()) {
  auto r = run(e, d);
  EXPECT_FALSE(r.has_value()) << e << " gave " << r.value_or(false);
  return r ? "" : r.error().message;
}

std::string compile_error(std::string_view e) {
  auto p = compile(e);
  EXPECT_FALSE(p.has_value()) << e << " compiled";
  return p ? "" : p.error().message;
}

TEST(Cel, TheGuidesAndNvidiasSelectors) {
  EXPECT_TRUE(yes(R"(device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("40Gi")) >= 0)"));
  EXPECT_FALSE(yes(R"(device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("40Gi")) >= 0)", mig()));
  EXPECT_TRUE(yes(R"(device.attributes["gpu.nvidia.com"].productName.lowerAscii().matches("^.*h100.*$"))"));
  EXPECT_TRUE(yes(R"(device.attributes["gpu.nvidia.com"].driverVersion.compareTo(semver("570.0.0")) >= 0)"));
  EXPECT_FALSE(yes(R"(device.attributes["gpu.nvidia.com"].driverVersion.isLessThan(semver("570.0.0")))"));
  EXPECT_TRUE(yes(R"(device.driver == "gpu.nvidia.com" && device.attributes["gpu.nvidia.com"].type == "mig" && device.attributes["gpu.nvidia.com"].profile == "1g.12gb")", mig()));
  EXPECT_FALSE(yes(R"(device.driver == "gpu.nvidia.com" && device.attributes["gpu.nvidia.com"].type == "mig")"));
  EXPECT_TRUE(yes(R"(device.attributes["gpu.nvidia.com"].type == 'gpu')"));
  EXPECT_TRUE(yes(R"(device.attributes["resource.kubernetes.io"].pciBusID.startsWith("0000:b9"))"));
  EXPECT_TRUE(yes(R"(device.capacity["gpu.nvidia.com"].memory.isGreaterThan(quantity("79Gi")))"));
  EXPECT_TRUE(yes(R"(device.attributes["gpu.nvidia.com"].cudaComputeCapability.major() >= 8)"));
}

TEST(Cel, MissingDomainIsEmptyButAMissingNameIsAnError) {
  EXPECT_FALSE(yes(R"(has(device.attributes["other.example.com"].model))"));
  EXPECT_EQ(error_of(R"(device.attributes["gpu.nvidia.com"].profile == "1g.12gb")"), "no such key: profile");
  // has() first makes it robust; && absorbs an error when the other side is false.
  EXPECT_FALSE(yes(R"(has(device.attributes["gpu.nvidia.com"].profile) && device.attributes["gpu.nvidia.com"].profile == "1g.12gb")"));
  EXPECT_FALSE(yes(R"(device.attributes["gpu.nvidia.com"].profile == "x" && false)"));
  EXPECT_TRUE(yes(R"(device.attributes["gpu.nvidia.com"].profile == "x" || true)"));
  EXPECT_EQ(error_of(R"(device.attributes["gpu.nvidia.com"].profile == "x" || false)"), "no such key: profile");
  EXPECT_TRUE(yes(R"("profile" in device.attributes["gpu.nvidia.com"] ? false : true)"));
}

TEST(Cel, NumbersStringsListsAndMacros) {
  EXPECT_TRUE(yes("1 == 1.0 && 1u == 1 && 2 > 1.5 && -3 < 0u"));
  EXPECT_TRUE(yes("7 / 2 == 3 && 7 % 3 == 1 && -7 / 2 == -3 && 1.0 / 4.0 == 0.25"));
  EXPECT_EQ(error_of("1 / (device.attributes['gpu.nvidia.com'].index - 3) == 0"), "division by zero");
  EXPECT_EQ(error_of("9223372036854775807 + device.attributes['gpu.nvidia.com'].index > 0"), "return error for overflow");
  EXPECT_TRUE(yes("-9223372036854775808 < 0"));
  EXPECT_TRUE(yes(R"(size("héllo") == 5 && "héllo".charAt(1) == "é" && "héllo".substring(1, 3) == "él")"));
  EXPECT_TRUE(yes(R"("a,b,c".split(",") == ["a", "b", "c"] && ["x", "y"].join("-") == "x-y")"));
  EXPECT_TRUE(yes(R"("  pad ".trim() == "pad" && "aXa".replace("a", "b") == "bXb" && "abcab".lastIndexOf("ab") == 3)"));
  EXPECT_TRUE(yes(R"([1, 2, 3].all(x, x > 0) && [1, 2, 3].exists(x, x == 2) && [1, 2, 3].exists_one(x, x > 2))"));
  EXPECT_TRUE(yes(R"([1, 2, 3].map(x, x * 2) == [2, 4, 6] && [1, 2, 3].filter(x, x != 2) == [1, 3])"));
  EXPECT_TRUE(yes(R"([1, 2, 3].map(x, x > 1, x * 10) == [20, 30])"));
  EXPECT_TRUE(yes(R"({"a": 1, "b": 2}.exists(k, k == "b") && "a" in {"a": 1} && size({"a": 1}) == 1)"));
  EXPECT_TRUE(yes(R"(cel.bind(m, device.capacity["gpu.nvidia.com"].memory, m.isGreaterThan(quantity("1Gi")) && m.isLessThan(quantity("1Ti"))))"));
  EXPECT_TRUE(yes(R"(int("42") == 42 && string(42) == "42" && double("2.5") == 2.5 && uint(3) == 3u && bool("true"))"));
  EXPECT_TRUE(yes(R"(r"a\d" == "a\\d" && '''x'y''' == "x'y" && "\x41\u00e9" == "Aé")"));
  EXPECT_TRUE(yes(R"(dyn(1) == 1 && [1, "a"][1] == "a")"));
  EXPECT_EQ(error_of("[1, 2][device.attributes['gpu.nvidia.com'].index] == 1"), "index out of bounds: 3");
}

TEST(Cel, QuantityAndSemverLibraries) {
  EXPECT_TRUE(yes(R"(quantity("1Gi").compareTo(quantity("1024Mi")) == 0 && quantity("1Gi") == quantity("1024Mi"))"));
  EXPECT_TRUE(yes(R"(quantity("500m").isInteger() == false && quantity("2k").asInteger() == 2000)"));
  EXPECT_TRUE(yes(R"(quantity("1.5").asApproximateFloat() == 1.5 && quantity("-1").sign() == -1)"));
  EXPECT_TRUE(yes(R"(quantity("1Gi").add(quantity("1Gi")) == quantity("2Gi") && quantity("3").sub(1) == quantity("2"))"));
  EXPECT_TRUE(yes(R"(isQuantity("40Gi") && !isQuantity("forty"))"));
  EXPECT_TRUE(yes(R"(semver("1.2.3-alpha").isLessThan(semver("1.2.3")) && semver("1.2.3-alpha.2").isLessThan(semver("1.2.3-alpha.10")))"));
  EXPECT_TRUE(yes(R"(semver("1.2.3-1").isLessThan(semver("1.2.3-a")) && semver("1.2.3+b1") == semver("1.2.3+b2"))"));
  EXPECT_TRUE(yes(R"(isSemver("1.0.0") && !isSemver("1.0") && !isSemver("01.0.0") && semver("10.2.30").minor() == 2)"));
  EXPECT_NE(error_of(R"(quantity("forty").sign() == 0)").find("forty"), std::string::npos);
  EXPECT_NE(error_of(R"(semver("1.0").major() == 1)").find("MAJOR.MINOR.PATCH"), std::string::npos);
}

TEST(Cel, TypeErrorsAreCaughtWhenCompiling) {
  EXPECT_NE(compile_error("device.driver > 1").find("'_>_' applied to '(string, int)'"), std::string::npos);
  EXPECT_NE(compile_error("device.driver == 1").find("'_==_'"), std::string::npos);
  EXPECT_NE(compile_error("device.name == 'x'").find("undefined field 'name'"), std::string::npos);
  EXPECT_NE(compile_error("pod.name == 'x'").find("undeclared reference to 'pod'"), std::string::npos);
  EXPECT_NE(compile_error("device.driver").find("a selector must give a bool"), std::string::npos);
  EXPECT_NE(compile_error("device.driver.startsWith(1)").find("'startsWith' applied to 'string.(int)'"), std::string::npos);
  EXPECT_NE(compile_error(R"(device.capacity["d"].memory > quantity("1"))").find("kubernetes.Quantity"), std::string::npos);
  EXPECT_NE(compile_error("1 + 1.0 == 2.0").find("'_+_' applied to '(int, double)'"), std::string::npos);
  EXPECT_NE(compile_error(R"(device.driver.matches("("))").find("invalid regular expression"), std::string::npos);
  EXPECT_NE(compile_error("timestamp('2024-01-01T00:00:00Z') > 0").find("undeclared reference to 'timestamp'"), std::string::npos);
  EXPECT_NE(compile_error("cel.index(x, 1, x)").find("only cel.bind"), std::string::npos);
  EXPECT_NE(compile_error(R"(device.driver == "open)").find("unterminated string literal"), std::string::npos);
  EXPECT_NE(compile_error("b'abc' == b'abc'").find("bytes literals"), std::string::npos);
  EXPECT_NE(compile_error("has(device)").find("has() macro"), std::string::npos);
  EXPECT_NE(compile_error("1 == 1 &&").find("column 10"), std::string::npos);
  EXPECT_NE(compile_error("99999999999999999999 > 0").find("out of range"), std::string::npos);
  // The attribute value's kind is only known per device: a mismatch is an evaluation error.
  EXPECT_NE(error_of(R"(device.attributes["gpu.nvidia.com"].productName > 3)").find("no such overload"), std::string::npos);
}

TEST(Cel, HostileExpressionsAreBounded) {
  EXPECT_NE(compile_error(std::string(kMaxExpressionBytes + 1, ' ') + "true").find("at most 10240 bytes"), std::string::npos);
  const std::string deep = std::string(5000, '(') + "true" + std::string(5000, ')');
  EXPECT_NE(compile_error(deep).find("nested deeper than"), std::string::npos);
  std::string chain = "true";
  for (int i = 0; i < 2000; ++i) chain = "!" + chain;
  EXPECT_NE(compile_error(chain).find("nested deeper than"), std::string::npos);
  // Nested comprehensions multiply: the cost limit stops them with cel-go's error.
  const std::string big =
      "[1,2,3,4,5,6,7,8,9,10].all(a, [1,2,3,4,5,6,7,8,9,10].all(b, [1,2,3,4,5,6,7,8,9,10].all(c, "
      "[1,2,3,4,5,6,7,8,9,10].all(d, [1,2,3,4,5,6,7,8,9,10].all(e, [1,2,3,4,5,6,7,8,9,10].all(f, a + b + c + d + e + f > 0))))))";
  EXPECT_EQ(error_of(big), "operation cancelled: actual cost limit exceeded");
  auto p = compile("[1, 2, 3].all(x, x > 0)");
  ASSERT_TRUE(p);
  uint64_t cost = 0;
  EXPECT_TRUE(p->matches(h100(), kSelectorCostLimit, &cost).value_or(false));
  EXPECT_GT(cost, 5u);
  EXPECT_FALSE(p->matches(h100(), 3).has_value());
  // String growth through replace is charged as it goes.
  EXPECT_FALSE(run(R"("aaaaaaaaaaaaaaaa".replace("a", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa").replace("a", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa").replace("a", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa").size() > 0)").has_value());
}

TEST(Cel, CapacitiesReadAreListed) {
  auto p = compile(R"(device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("40Gi")) >= 0 || device.capacity["x.io"].slots.sign() > 0)");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->capacities_read(), (std::vector<std::string>{"gpu.nvidia.com/memory", "x.io/slots"}));
}

}  // namespace
}  // namespace kgpu::cel
