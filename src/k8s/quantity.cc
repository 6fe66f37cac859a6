#include "k8s/quantity.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <optional>

namespace kgpu::k8s {
namespace {

constexpr __int128 kNanosPerUnit = 1'000'000'000;
constexpr int kMaxDigits = 38;  // 10^38 < 2^127
constexpr int64_t kExponentClamp = 100'000;

bool is_decimal_digit(char c) { return c >= '0' && c <= '9'; }

__int128 pow10(int n) {
  __int128 r = 1;
  for (int i = 0; i < n; ++i) r *= 10;
  return r;
}

// Digits (at most kMaxDigits of them) as a number.
__int128 digits_value(std::string_view digits) {
  __int128 v = 0;
  for (char c : digits) v = v * 10 + (c - '0');
  return v;
}

bool checked_mul(__int128 a, __int128 b, __int128* out) { return !__builtin_mul_overflow(a, b, out); }

std::string int128_string(__int128 v) {
  if (v == 0) return "0";
  const bool negative = v < 0;
  unsigned __int128 u = negative ? -static_cast<unsigned __int128>(v) : static_cast<unsigned __int128>(v);
  std::string out;
  while (u != 0) {
    out.push_back(static_cast<char>('0' + static_cast<int>(u % 10)));
    u /= 10;
  }
  if (negative) out.push_back('-');
  std::reverse(out.begin(), out.end());
  return out;
}

int64_t saturate(__int128 v) {
  if (v > std::numeric_limits<int64_t>::max()) return std::numeric_limits<int64_t>::max();
  if (v < std::numeric_limits<int64_t>::min()) return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(v);
}

// nanos / divisor, rounded away from zero.
__int128 div_away_from_zero(__int128 nanos, __int128 divisor) {
  __int128 q = nanos / divisor;
  if (nanos % divisor != 0) q += nanos < 0 ? -1 : 1;
  return q;
}

struct Suffix {
  std::string_view text;
  int base;  // 10 or 2
  int exponent;
};

constexpr std::array<Suffix, 16> kSuffixes{{
    {"n", 10, -9},
    {"u", 10, -6},
    {"m", 10, -3},
    {"", 10, 0},
    {"k", 10, 3},
    {"M", 10, 6},
    {"G", 10, 9},
    {"T", 10, 12},
    {"P", 10, 15},
    {"E", 10, 18},
    {"Ki", 2, 10},
    {"Mi", 2, 20},
    {"Gi", 2, 30},
    {"Ti", 2, 40},
    {"Pi", 2, 50},
    {"Ei", 2, 60},
}};

// "e-3", "E+12", "e7": the exponent, or nullopt. Digits are required; huge values are clamped (their
// results are the same: out of range, or one nano-unit).
std::optional<int64_t> parse_exponent(std::string_view s) {
  size_t i = 0;
  bool negative = false;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) negative = s[i++] == '-';
  if (i == s.size()) return std::nullopt;
  int64_t v = 0;
  for (; i < s.size(); ++i) {
    if (!is_decimal_digit(s[i])) return std::nullopt;
    v = std::min<int64_t>(v * 10 + (s[i] - '0'), kExponentClamp);
  }
  return negative ? -v : v;
}

// `text` for a message: at most 40 characters, the rest elided with its length.
std::string shown(std::string_view text) {
  if (text.size() <= 40) return std::string(text);
  return fmt::format("{}... ({} characters)", text.substr(0, 32), text.size());
}

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return (x | 0x20) == (y | 0x20);
         });
}

}  // namespace

const char* quantity_format_name(QuantityFormat f) {
  switch (f) {
    case QuantityFormat::kDecimalSI:
      return "DecimalSI";
    case QuantityFormat::kBinarySI:
      return "BinarySI";
    case QuantityFormat::kDecimalExponent:
      return "DecimalExponent";
  }
  return "DecimalSI";
}

Result<Quantity> Quantity::parse(std::string_view text) {
  if (text.empty()) return fail(ErrorCode::kInvalidArgument, "empty quantity");
  const size_t n = text.size();
  size_t pos = 0;
  bool negative = false;
  if (text[0] == '-' || text[0] == '+') negative = text[pos++] == '-';
  for (std::string_view special : {"nan", ".nan", "inf", ".inf", "infinity"}) {
    if (iequals(text.substr(pos), special)) {
      return fail(ErrorCode::kInvalidArgument, "invalid quantity '{}': infinity and NaN are not quantities", text);
    }
  }
  const size_t int_begin = pos;
  while (pos < n && is_decimal_digit(text[pos])) ++pos;
  std::string_view int_digits = text.substr(int_begin, pos - int_begin);
  std::string_view frac_digits;
  if (pos < n && text[pos] == '.') {
    const size_t frac_begin = ++pos;
    while (pos < n && is_decimal_digit(text[pos])) ++pos;
    frac_digits = text.substr(frac_begin, pos - frac_begin);
  }
  // Kubernetes' suffix scan: letters from "eEinumkKMGTP", an optional sign, digits.
  const size_t suffix_begin = pos;
  while (pos < n && std::string_view("eEinumkKMGTP").find(text[pos]) != std::string_view::npos) ++pos;
  if (pos < n && (text[pos] == '+' || text[pos] == '-')) ++pos;
  while (pos < n && is_decimal_digit(text[pos])) ++pos;
  if (pos != n) {
    return fail(ErrorCode::kInvalidArgument, "invalid quantity '{}': unexpected '{}' at position {}", shown(text), text[pos],
                pos + 1);
  }
  if (int_digits.empty() && frac_digits.empty()) {
    return fail(ErrorCode::kInvalidArgument, "invalid quantity '{}': no digits before the suffix", shown(text));
  }
  const std::string_view suffix = text.substr(suffix_begin);

  int base = 10;
  int64_t exponent = 0;
  QuantityFormat format = QuantityFormat::kDecimalSI;
  const auto known =
      std::find_if(kSuffixes.begin(), kSuffixes.end(), [&](const Suffix& s) { return s.text == suffix; });
  if (known != kSuffixes.end()) {
    base = known->base;
    exponent = known->exponent;
    format = base == 2 ? QuantityFormat::kBinarySI : QuantityFormat::kDecimalSI;
  } else if (suffix.size() > 1 && (suffix[0] == 'e' || suffix[0] == 'E')) {
    const auto e = parse_exponent(suffix.substr(1));
    if (!e) return fail(ErrorCode::kInvalidArgument, "invalid quantity '{}': bad exponent '{}'", shown(text), shown(suffix));
    exponent = *e;
    format = QuantityFormat::kDecimalExponent;
  } else {
    return fail(ErrorCode::kInvalidArgument,
                "invalid quantity '{}': unknown suffix '{}' (expected Ki Mi Gi Ti Pi Ei, n u m k M G T P E or e<n>)",
                shown(text), shown(suffix));
  }

  // value = D * 10^e10 nano-units * 2^binary, with D the digits without leading or trailing zeros.
  std::string digits(int_digits);
  digits += frac_digits;
  int64_t e10 = (base == 10 ? exponent : 0) - static_cast<int64_t>(frac_digits.size()) + 9;
  const int binary = base == 2 ? static_cast<int>(exponent) : 0;
  const size_t first = digits.find_first_not_of('0');
  if (first == std::string::npos) {
    Quantity zero;
    zero.format_ = format == QuantityFormat::kBinarySI ? QuantityFormat::kDecimalSI : format;
    return zero;
  }
  digits.erase(0, first);
  while (digits.back() == '0') {
    digits.pop_back();
    ++e10;
  }

  const __int128 binary_cap = static_cast<__int128>(std::numeric_limits<int64_t>::max()) * kNanosPerUnit;
  const auto out_of_range = [&] {
    return fail(ErrorCode::kInvalidArgument, "quantity '{}' is out of range (kgpu keeps magnitudes below 1e29)", shown(text));
  };
  __int128 nanos = 0;
  bool overflow = false;
  if (e10 >= 0) {
    if (static_cast<int64_t>(digits.size()) + e10 > kMaxDigits) {
      overflow = true;
    } else {
      nanos = digits_value(digits) * pow10(static_cast<int>(e10));
      overflow = !checked_mul(nanos, static_cast<__int128>(1) << binary, &nanos);
    }
  } else if (binary == 0) {
    // The dropped digits end in a non-zero digit: round the magnitude up by one nano-unit.
    const int64_t keep = static_cast<int64_t>(digits.size()) + e10;
    if (keep > kMaxDigits) {
      overflow = true;
    } else {
      nanos = (keep > 0 ? digits_value(std::string_view(digits).substr(0, keep)) : 0) + 1;
      overflow = nanos >= pow10(kMaxDigits);  // rounding up may reach 10^38 (its text would not parse)
    }
  } else {
    if (static_cast<int>(digits.size()) > kMaxDigits || -e10 > kMaxDigits) {
      return fail(ErrorCode::kInvalidArgument, "quantity '{}' has more digits than kgpu keeps ({})", shown(text), kMaxDigits);
    }
    __int128 scaled = 0;
    if (!checked_mul(digits_value(digits), static_cast<__int128>(1) << binary, &scaled)) {
      return fail(ErrorCode::kInvalidArgument, "quantity '{}' has more digits than kgpu keeps ({})", shown(text), kMaxDigits);
    }
    nanos = div_away_from_zero(scaled, pow10(static_cast<int>(-e10)));
  }
  if (format == QuantityFormat::kBinarySI) {
    if (overflow || nanos > binary_cap) nanos = binary_cap;  // Kubernetes caps BinarySI at 2^63-1
    if (nanos < kNanosPerUnit) format = QuantityFormat::kDecimalSI;
  } else if (overflow) {
    return out_of_range();
  }
  Quantity q;
  q.nanos_ = negative ? -nanos : nanos;
  q.format_ = format;
  return q;
}

Quantity Quantity::from_value(int64_t units, QuantityFormat format) {
  return from_nanos(static_cast<__int128>(units) * kNanosPerUnit, format);
}

Quantity Quantity::from_milli(int64_t milli_units) {
  return from_nanos(static_cast<__int128>(milli_units) * 1'000'000, QuantityFormat::kDecimalSI);
}

namespace {
constexpr __int128 kInt128Max = static_cast<__int128>((static_cast<unsigned __int128>(1) << 127) - 1);
}  // namespace

Quantity Quantity::from_nanos(__int128 nanos, QuantityFormat format) {
  Quantity q;
  q.nanos_ = nanos;
  q.format_ = format;
  return q;
}

int64_t Quantity::value() const { return saturate(div_away_from_zero(nanos_, kNanosPerUnit)); }

int64_t Quantity::milli_value() const { return saturate(div_away_from_zero(nanos_, 1'000'000)); }

double Quantity::as_double() const { return static_cast<double>(nanos_) / 1e9; }

bool Quantity::is_integer() const { return nanos_ % kNanosPerUnit == 0; }

std::string Quantity::to_string() const {
  if (nanos_ == 0) return "0";
  QuantityFormat format = format_;
  const __int128 magnitude = nanos_ < 0 ? -nanos_ : nanos_;
  if (format == QuantityFormat::kBinarySI && (magnitude < 1024 * kNanosPerUnit || !is_integer())) {
    format = QuantityFormat::kDecimalSI;
  }
  if (format == QuantityFormat::kBinarySI) {
    static constexpr std::array<const char*, 7> kBinary{"", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"};
    __int128 units = nanos_ / kNanosPerUnit;
    size_t e = 0;
    while (e + 1 < kBinary.size() && units % 1024 == 0) {
      units /= 1024;
      ++e;
    }
    return int128_string(units) + kBinary[e];
  }
  __int128 mantissa = nanos_;
  int exponent = -9;
  while (mantissa % 10 == 0) {
    mantissa /= 10;
    ++exponent;
  }
  switch (((exponent % 3) + 3) % 3) {
    case 1:
      mantissa *= 10;
      exponent -= 1;
      break;
    case 2:
      mantissa *= 100;
      exponent -= 2;
      break;
    default:
      break;
  }
  std::string out = int128_string(mantissa);
  if (format == QuantityFormat::kDecimalSI && exponent >= -9 && exponent <= 18) {
    for (const Suffix& s : kSuffixes) {
      if (s.base == 10 && s.exponent == exponent) return out + std::string(s.text);
    }
  }
  if (exponent != 0) out += fmt::format("e{}", exponent);
  return out;
}

// Sums saturate at the int128 range instead of overflowing (hostile manifests add huge values).
Quantity Quantity::operator+(const Quantity& other) const {
  __int128 sum = 0;
  if (__builtin_add_overflow(nanos_, other.nanos_, &sum)) sum = other.nanos_ > 0 ? kInt128Max : -kInt128Max;
  return from_nanos(sum, nanos_ == 0 ? other.format_ : format_);
}

Quantity Quantity::operator-(const Quantity& other) const {
  __int128 diff = 0;
  if (__builtin_sub_overflow(nanos_, other.nanos_, &diff)) diff = other.nanos_ < 0 ? kInt128Max : -kInt128Max;
  return from_nanos(diff, nanos_ == 0 ? other.format_ : format_);
}

}  // namespace kgpu::k8s
