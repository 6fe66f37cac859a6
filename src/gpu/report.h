// Rendering the GPU model for people (tables) and programs (JSON with stable field names,
// documented in docs/inventory-json.md). Pure functions of their inputs.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gpu/types.h"

namespace kgpu::gpu {

nlohmann::json to_json(const Inventory& inv);
nlohmann::json to_json(const Telemetry& t);
nlohmann::json to_json(const ProcessInfo& p);
nlohmann::json to_json(const Event& e);

// `nvidia-smi -L`-style listing plus memory, MIG layout and the topology matrix.
std::string inventory_table(const Inventory& inv);

// One line per GPU / MIG device with the main readings; "-" where not supported.
std::string telemetry_table(const std::vector<Telemetry>& ts);

}  // namespace kgpu::gpu
