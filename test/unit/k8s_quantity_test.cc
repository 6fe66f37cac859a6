// Kubernetes quantities: grammar, exact values, rounding, canonical form, errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <limits>
#include <string>
#include <vector>

#include "k8s/quantity.h"

namespace kgpu::k8s {
namespace {

using ::testing::HasSubstr;

struct Case {
  const char* text;
  int64_t value;  // Value()
  int64_t milli;  // MilliValue()
  bool integer;
  const char* canonical;  // String()
  QuantityFormat format;
};

constexpr auto kDec = QuantityFormat::kDecimalSI;
constexpr auto kBin = QuantityFormat::kBinarySI;
constexpr auto kExp = QuantityFormat::kDecimalExponent;

class QuantityTable : public ::testing::TestWithParam<Case> {};

TEST_P(QuantityTable, ParsesLikeKubernetes) {
  const Case& c = GetParam();
  auto q = Quantity::parse(c.text);
  ASSERT_TRUE(q.has_value()) << c.text << ": " << q.error().message;
  EXPECT_EQ(q->value(), c.value) << c.text;
  EXPECT_EQ(q->milli_value(), c.milli) << c.text;
  EXPECT_EQ(q->is_integer(), c.integer) << c.text;
  EXPECT_EQ(q->to_string(), c.canonical) << c.text;
  EXPECT_EQ(q->format(), c.format) << c.text;
  // The canonical form reads back as the same value.
  auto again = Quantity::parse(q->to_string());
  ASSERT_TRUE(again.has_value()) << q->to_string();
  EXPECT_EQ(*again, *q) << c.text;
}

INSTANTIATE_TEST_SUITE_P(
    Values, QuantityTable,
    ::testing::Values(
        Case{"40Gi", 40LL << 30, (40LL << 30) * 1000, true, "40Gi", kBin},
        Case{"500m", 1, 500, false, "500m", kDec},  // Value() rounds up
        Case{"1.5", 2, 1500, false, "1500m", kDec}, Case{"0.5", 1, 500, false, "500m", kDec},
        Case{"1", 1, 1000, true, "1", kDec}, Case{"0", 0, 0, true, "0", kDec},
        Case{"2e3", 2000, 2'000'000, true, "2e3", kExp}, Case{"1.5E-3", 1, 2, false, "1500e-6", kExp},
        Case{"100M", 100'000'000, 100'000'000'000, true, "100M", kDec}, Case{"1Ki", 1024, 1'024'000, true, "1Ki", kBin},
        Case{"1024", 1024, 1'024'000, true, "1024", kDec},
        Case{"1.5Gi", 1610612736, 1610612736000, true, "1536Mi", kBin},
        Case{"0.5Gi", 536870912, 536870912000, true, "512Mi", kBin},
        Case{"1000Mi", 1048576000, 1048576000000, true, "1000Mi", kBin},
        Case{"2048Ki", 2097152, 2097152000, true, "2Mi", kBin}, Case{"100m", 1, 100, false, "100m", kDec},
        Case{"1000m", 1, 1000, true, "1", kDec}, Case{"+1", 1, 1000, true, "1", kDec},
        Case{"-1", -1, -1000, true, "-1", kDec}, Case{"-1.5", -2, -1500, false, "-1500m", kDec},  // away from zero
        Case{"-500m", -1, -500, false, "-500m", kDec}, Case{"1n", 1, 1, false, "1n", kDec},
        Case{"0.1n", 1, 1, false, "1n", kDec},  // rounded up to the nano-unit, as Kubernetes does
        Case{"1u", 1, 1, false, "1u", kDec}, Case{"12k", 12000, 12'000'000, true, "12k", kDec},
        Case{"5.", 5, 5000, true, "5", kDec}, Case{".5", 1, 500, false, "500m", kDec},
        Case{"007", 7, 7000, true, "7", kDec}, Case{"0.30000000000000004", 1, 301, false, "300000001n", kDec},
        Case{"1e0", 1, 1000, true, "1", kExp}, Case{"1E+3", 1000, 1'000'000, true, "1e3", kExp},
        Case{"1T", 1'000'000'000'000, 1'000'000'000'000'000, true, "1T", kDec},
        Case{"4Ei", 1LL << 62, std::numeric_limits<int64_t>::max(), true, "4Ei", kBin},
        // Binary values above 2^63-1 are capped (Kubernetes' maxAllowed); 8Ei is 2^63.
        Case{"8Ei", std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::max(), true,
             "9223372036854775807", kBin},
        Case{"16Ei", std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::max(), true,
             "9223372036854775807", kBin},
        Case{"1000Ki", 1'024'000, 1'024'000'000, true, "1000Ki", kBin},
        Case{"0.0000000001Ki", 1, 1, false, "103n", kDec}));

TEST(Quantity, HugeDecimalValuesKeepPrecision) {
  auto q = Quantity::parse("100E");  // 1e20: beyond int64, within the 128-bit range
  ASSERT_TRUE(q.has_value());
  EXPECT_EQ(q->value(), std::numeric_limits<int64_t>::max());  // saturated
  EXPECT_EQ(q->to_string(), "100E");
  EXPECT_LT(*Quantity::parse("99E"), *q);
  auto big = Quantity::parse("1e25");
  ASSERT_TRUE(big.has_value());
  EXPECT_EQ(big->to_string(), "10e24");
  EXPECT_TRUE(Quantity::parse("0e99999999999").has_value());
  EXPECT_TRUE(Quantity::parse("1e-99999999999").has_value());
  EXPECT_EQ(Quantity::parse("1e-99999999999")->nanos(), 1);
}

TEST(Quantity, ComparesValuesNotSpelling) {
  EXPECT_EQ(*Quantity::parse("1Ki"), *Quantity::parse("1024"));
  EXPECT_EQ(*Quantity::parse("1"), *Quantity::parse("1000m"));
  EXPECT_EQ(*Quantity::parse("1e3"), *Quantity::parse("1k"));
  EXPECT_LT(*Quantity::parse("500m"), *Quantity::parse("1"));
  EXPECT_LT(*Quantity::parse("1G"), *Quantity::parse("1Gi"));
  EXPECT_LT(*Quantity::parse("-1"), *Quantity::parse("0"));
  EXPECT_GT(*Quantity::parse("40Gi"), *Quantity::parse("40G"));
}

TEST(Quantity, Arithmetic) {
  const Quantity sum = *Quantity::parse("500m") + *Quantity::parse("1.5");
  EXPECT_EQ(sum.value(), 2);
  EXPECT_TRUE(sum.is_integer());
  EXPECT_EQ(sum.to_string(), "2");
  EXPECT_EQ((Quantity() + *Quantity::parse("1Gi")).to_string(), "1Gi");  // zero takes the other's format
  EXPECT_EQ(Quantity::from_value(3).to_string(), "3");
  EXPECT_EQ(Quantity::from_milli(250).to_string(), "250m");
  EXPECT_EQ(Quantity::parse("40Gi")->bytes(), 42949672960);
}

TEST(Quantity, RejectsWhatKubernetesRejects) {
  struct Bad {
    const char* text;
    const char* message;
  };
  for (const Bad& b : {
           Bad{"", "empty"},
           Bad{"1.5.5", "unexpected '.'"},
           Bad{"Gi", "no digits"},
           Bad{"m", "no digits"},
           Bad{".", "no digits"},
           Bad{"10 Gi", "unexpected ' '"},
           Bad{" 1", "unexpected ' '"},
           Bad{"1 ", "unexpected ' '"},
           Bad{"1GB", "unexpected 'B'"},
           Bad{"0x10", "unexpected 'x'"},
           Bad{"+-1", "no digits"},
           Bad{"1i", "unknown suffix 'i'"},
           Bad{".5i", "unknown suffix 'i'"},
           Bad{"1K", "unknown suffix 'K'"},
           Bad{"1ki", "unknown suffix 'ki'"},
           Bad{"0.1mi", "unknown suffix 'mi'"},
           Bad{"1e", "unknown suffix 'e'"},
           Bad{"1e3m", "unexpected 'm'"},
           Bad{"1.1.M", "unexpected '.'"},
           Bad{"1+1.0M", "unexpected '.'"},
           Bad{"aoeu", "unexpected 'a'"},
           Bad{"1Gix", "unexpected 'x'"},
           Bad{"-3.01i", "unknown suffix"},
           Bad{"1e40", "out of range"},
           Bad{"1000000000000000000000000000000", "out of range"},
       }) {
    auto q = Quantity::parse(b.text);
    ASSERT_FALSE(q.has_value()) << "'" << b.text << "' parsed as " << q->to_string();
    EXPECT_THAT(q.error().message, HasSubstr(b.message)) << b.text;
    EXPECT_EQ(q.error().code, ErrorCode::kInvalidArgument);
  }
}

TEST(Quantity, NonNumbersAndHugeTextsAreRejectedWithShortMessages) {
  // NaN and infinities read as YAML floats or written as strings are not quantities; huge texts are
  // quoted shortened (a 5,000-digit value must not become a 5,000-character message).
  for (const char* text : {"NaN", "nan", ".nan", "+Inf", "-inf", ".inf", "+.Inf", "Infinity"}) {
    auto q = Quantity::parse(text);
    ASSERT_FALSE(q.has_value()) << text;
    EXPECT_THAT(q.error().message, HasSubstr("infinity and NaN are not quantities")) << text;
  }
  const std::string digits(5000, '7');
  const std::vector<std::string> texts{digits, "1e999999999", "1e" + digits, "1" + std::string(4000, 'k')};
  for (const std::string& text : texts) {
    auto q = Quantity::parse(text);
    ASSERT_FALSE(q.has_value()) << text.substr(0, 20);
    EXPECT_LT(q.error().message.size(), 250u) << q.error().message;
  }
  EXPECT_THAT(Quantity::parse(digits).error().message, HasSubstr("(5000 characters)"));
}

TEST(Quantity, FormatNames) {
  EXPECT_STREQ(quantity_format_name(QuantityFormat::kBinarySI), "BinarySI");
  EXPECT_STREQ(quantity_format_name(QuantityFormat::kDecimalExponent), "DecimalExponent");
}

TEST(Quantity, SumsSaturateInsteadOfOverflowing) {
  auto big = Quantity::parse("90000000000000000000000000000");
  ASSERT_TRUE(big);
  const Quantity sum = *big + *big + *big + *big + *big + *big + *big + *big + *big + *big + *big + *big;
  EXPECT_FALSE(sum.is_negative());
  EXPECT_GT(sum, *big);
}

}  // namespace
}  // namespace kgpu::k8s
