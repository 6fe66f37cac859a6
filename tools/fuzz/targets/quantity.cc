// Fuzz target: k8s::Quantity::parse over any bytes. Properties (src/k8s/quantity.h): parsing
// never crashes; a parsed quantity's canonical text parses back to the same value (and is stable
// from the second round on); value() and milli_value() keep the sign; q - q is zero.
#include <string>

#include "fuzz.h"
#include "k8s/quantity.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using kgpu::fuzz::check;
  using kgpu::k8s::Quantity;
  const std::string text = kgpu::fuzz::text(data, size);
  auto q = Quantity::parse(text);
  if (!q) {
    check(!q.error().message.empty(), "a parse error has a message");
    return 0;
  }
  const std::string canonical = q->to_string();
  auto again = Quantity::parse(canonical);
  check(again.has_value(), "the canonical text of a parsed quantity parses");
  check(*again == *q, "the canonical text parses to the same value");
  // Not always a fixed point after one step, as in Kubernetes: "1.5Ki" writes "1536" (BinarySI
  // without a whole binary suffix), which reads back as DecimalSI; from there it is stable.
  const std::string second = again->to_string();
  auto third = Quantity::parse(second);
  check(third.has_value() && *third == *q && third->to_string() == second,
        "the canonical text is stable after one re-parse");
  const int64_t v = q->value(), m = q->milli_value();
  check(q->is_negative() ? v <= 0 : v >= 0, "value() has the quantity's sign");
  check(q->is_negative() ? m <= 0 : m >= 0, "milli_value() has the quantity's sign");
  (void)q->as_double();
  (void)q->is_integer();
  const Quantity sum = *q + *q;
  const Quantity zero = *q - *q;
  check(zero.is_zero(), "q - q is zero");
  (void)sum.to_string();
  return 0;
}
