// GPU-hour prices per GPU model, for `kgpu report`.
//
// File format (YAML, at most 64 KiB):
//
//   currency: USD            # optional, a label for the output
//   default: 2.50            # optional, price of a GPU-hour for models not listed (0: unknown)
//   models:                  # optional, GPU model (as nvidia.com/gpu.product or modelName says it) -> price
//     NVIDIA H100 80GB HBM3: 4.00
//     A100: 1.80             # a model entry also matches any model name containing it
//
// Flags `--price MODEL=PRICE` add or replace entries. Errors name the file, line and field
// ("prices.yaml:4: models.H100: price 'four' is not a non-negative number").
//
// Thread safety: a loaded Prices is immutable and may be shared.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/error.h"

namespace kgpu::cost {

struct Prices {
  std::string currency = "USD";
  double default_price = 0;  // per GPU-hour; 0: unknown
  std::vector<std::pair<std::string, double>> models;

  // The price of one GPU-hour of `model`: an entry equal to it (case-insensitive), else the
  // longest entry contained in it, else default_price.
  double price_for(std::string_view model) const;
  // Adds or replaces an entry from "MODEL=PRICE".
  Result<void> set_from_flag(std::string_view flag);
};

// Parses `text` (`source` names it in errors).
Result<Prices> parse_prices(std::string_view text, const std::string& source);
// Reads and parses the file.
Result<Prices> load_prices(const std::string& path);

}  // namespace kgpu::cost
