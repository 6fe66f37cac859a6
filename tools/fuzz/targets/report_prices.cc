// Fuzz target: cost::parse_prices (`kgpu report --prices`) over any bytes. Contract
// (src/report/prices.h): a document it cannot use is an error value naming the source; an accepted
// one has non-negative finite prices and a price for every model it lists.
#include <cmath>

#include "report/prices.h"
#include "fuzz.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto prices = kgpu::cost::parse_prices(kgpu::fuzz::text(data, size), "fuzz.yaml");
  if (!prices) {
    kgpu::fuzz::check(prices.error().message.starts_with("fuzz.yaml"), "an error names the file");
    return 0;
  }
  kgpu::fuzz::check(std::isfinite(prices->default_price) && prices->default_price >= 0, "default price");
  for (const auto& [model, price] : prices->models) {
    kgpu::fuzz::check(std::isfinite(price) && price >= 0, "model price");
    kgpu::fuzz::check(std::isfinite(prices->price_for(model)), "price_for of a listed model");
  }
  return 0;
}
