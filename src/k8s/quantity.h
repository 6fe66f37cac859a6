// Kubernetes resource quantities ("40Gi", "500m", "1.5", "2e3") with resource.Quantity's grammar,
// precision and rounding.
//
// Grammar (k8s.io/apimachinery resource.ParseQuantity): [+-] digits [. digits] suffix, where suffix
// is one of Ki Mi Gi Ti Pi Ei (binary), n u m "" k M G T P E (decimal) or e/E followed by a signed
// integer (decimal exponent). Whitespace anywhere is an error (the API server trims leading and
// trailing whitespace of JSON strings before parsing; decoders here do the same).
//
// Value: kept exactly as a signed count of nano-units (10^-9) in 128 bits. Like Kubernetes, a
// value finer than a nano-unit is rounded away from zero to the next nano-unit ("0.1n" -> 1n),
// and a binary-suffixed value above 2^63-1 is capped at 2^63-1. Deviations, all on inputs no
// apiserver-stored object contains: digit-less strings ("Gi", "m", ".", "-") are rejected here
// (Kubernetes reads them as 0); decimal magnitudes of 1e29 and above are rejected as out of range
// (Kubernetes keeps arbitrary-precision decimals).
//
// Thread-safety: a Quantity is an immutable value type.
#pragma once

#include <compare>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/error.h"

namespace kgpu::k8s {

enum class QuantityFormat {
  kDecimalSI,        // 500m, 100M, 1, 0
  kBinarySI,         // 40Gi, 1Ki
  kDecimalExponent,  // 2e3, 1.5E-3
};

const char* quantity_format_name(QuantityFormat f);  // DecimalSI | BinarySI | DecimalExponent

class Quantity {
 public:
  Quantity() = default;

  // Parses `text` as Kubernetes does; an error message quotes the text and says what is wrong.
  static Result<Quantity> parse(std::string_view text);
  static Quantity from_value(int64_t units, QuantityFormat format = QuantityFormat::kDecimalSI);
  static Quantity from_milli(int64_t milli_units);
  static Quantity from_nanos(__int128 nanos, QuantityFormat format = QuantityFormat::kDecimalSI);

  // ceil(q) (away from zero for negatives, as int64Amount does), saturated to the int64 range.
  int64_t value() const;
  // ceil(q * 1000), same rounding and saturation: Quantity.MilliValue().
  int64_t milli_value() const;
  // Bytes for memory/storage quantities: value().
  int64_t bytes() const { return value(); }
  __int128 nanos() const { return nanos_; }
  double as_double() const;

  bool is_integer() const;  // no fractional part: "1", "2e3", "1Ki" but not "0.5", "500m"
  bool is_zero() const { return nanos_ == 0; }
  bool is_negative() const { return nanos_ < 0; }

  // The format the text used (BinarySI becomes DecimalSI for 0 < |q| < 1, as in Kubernetes).
  QuantityFormat format() const { return format_; }

  // Canonical form as Quantity.String() writes it: "1.5" -> "1500m", "1.5Gi" -> "1536Mi",
  // "2e3" -> "2e3", "0" -> "0".
  std::string to_string() const;

  // Sum keeps this format unless this is zero (then the other's), as Quantity.Add does.
  Quantity operator+(const Quantity& other) const;
  Quantity operator-(const Quantity& other) const;
  Quantity& operator+=(const Quantity& other) { return *this = *this + other; }

  // Compare values only; the format is not part of equality ("1Ki" == "1024").
  bool operator==(const Quantity& other) const { return nanos_ == other.nanos_; }
  std::strong_ordering operator<=>(const Quantity& other) const { return nanos_ <=> other.nanos_; }

 private:
  __int128 nanos_ = 0;
  QuantityFormat format_ = QuantityFormat::kDecimalSI;
};

}  // namespace kgpu::k8s
