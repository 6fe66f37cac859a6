#include "dra/devices.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <set>

namespace kgpu::dra {

namespace {

k8s::Quantity bytes_quantity(uint64_t mib) {
  return k8s::Quantity::from_value(static_cast<int64_t>(mib) << 20, k8s::QuantityFormat::kBinarySI);
}

k8s::Quantity count(uint64_t n) {
  return k8s::Quantity::from_value(static_cast<int64_t>(n), k8s::QuantityFormat::kBinarySI);
}

// The attributes a GPU and its MIG devices share (those NVIDIA takes from the parent GPU).
void common_attributes(const gpu::Inventory& inv, const gpu::GpuInfo& g, const BuildOptions& options,
                       std::map<std::string, AttributeValue, std::less<>>& out, std::vector<std::string>& problems) {
  out["productName"] = g.name;
  out["brand"] = std::string(gpu::brand_name(g.brand.value_or(0)));
  out["architecture"] = g.architecture_name.empty() ? std::string("Unknown") : g.architecture_name;
  const auto version = [&](const char* attribute, const std::string& text) {
    if (text.empty()) return;
    if (auto v = loose_version(text)) {
      out[attribute] = *v;
    } else {
      problems.push_back(fmt::format("GPU {}: {} not published: {}", g.index, attribute, v.error().message));
    }
  };
  if (g.cc_major && g.cc_minor) version("cudaComputeCapability", fmt::format("{}.{}", *g.cc_major, *g.cc_minor));
  version("driverVersion", inv.driver_version);
  if (inv.cuda_driver_version) version("cudaDriverVersion", gpu::cuda_version_string(*inv.cuda_driver_version));
  if (!g.pci.bus_id.empty()) {
    const std::string bus = published_bus_id(g.pci.bus_id);
    out[std::string(kPciBusIdAttribute)] = bus;
    if (!options.sysfs_root.empty()) {
      if (auto root = pcie_root(options.sysfs_root, bus)) out[std::string(kPcieRootAttribute)] = *root;
    }
  }
}

std::optional<Device> mig_device(const gpu::Inventory& inv, const gpu::GpuInfo& g, const gpu::MigDevice& m,
                                 const BuildOptions& options, std::vector<std::string>& problems) {
  if (!m.profile_id || !m.placement_start) {
    problems.push_back(
        fmt::format("GPU {} MIG device {} ({}): no GPU-instance profile id or placement", g.index, m.index, m.uuid));
    return std::nullopt;
  }
  Device d;
  d.type = DeviceType::kMig;
  d.gpu_index = g.index;
  d.minor = *g.minor_number;
  d.uuid = m.uuid;
  d.parent_uuid = g.uuid;
  d.gpu_instance_id = m.gpu_instance_id;
  d.compute_instance_id = m.compute_instance_id;
  d.profile = m.profile;
  d.pci_bus_id = g.pci.bus_id.empty() ? std::string() : published_bus_id(g.pci.bus_id);
  d.name = gpu::dra_mig_name(d.minor, m.profile, *m.profile_id, *m.placement_start);
  d.shape = gpu::mig::shape_by_profile_id(*m.profile_id);
  d.placement_start = m.placement_start;

  common_attributes(inv, g, options, d.attributes, problems);
  d.attributes["type"] = std::string("mig");
  d.attributes["uuid"] = m.uuid;
  d.attributes["parentUUID"] = g.uuid;
  d.attributes["profile"] = m.profile;

  if (m.engines) {
    d.capacity["multiprocessors"] = count(m.sm_count);
    d.capacity["copyEngines"] = count(m.engines->copy);
    d.capacity["decoders"] = count(m.engines->decoders);
    d.capacity["encoders"] = count(m.engines->encoders);
    d.capacity["jpegEngines"] = count(m.engines->jpeg);
    d.capacity["ofaEngines"] = count(m.engines->ofa);
    d.capacity["memory"] = bytes_quantity(m.engines->profile_memory_mib);
  } else {
    d.capacity["multiprocessors"] = count(m.sm_count);
    d.capacity["memory"] = bytes_quantity(m.memory_mib);
  }
  const unsigned size = m.placement_size.value_or(0);
  for (unsigned i = *m.placement_start; i < *m.placement_start + size && i < 64; ++i) {
    d.capacity[fmt::format("memorySlice{}", i)] = count(1);
  }
  return d;
}

// The partitions of a GPU in MIG mode: every offered profile at every allowed start.
void add_partitions(const gpu::Inventory& inv, const gpu::GpuInfo& g, const std::vector<gpu::mig::Offer>& offers,
                    const BuildOptions& options, std::vector<Device>& out, std::vector<CounterSet>& sets,
                    std::vector<std::string>& problems) {
  CounterSet set;
  set.name = counter_set_name(*g.minor_number);
  for (unsigned i = 0; i < gpu::mig::kMemorySlices; ++i) set.counters[fmt::format("memory-slice-{}", i)] = 1;
  set.counters["compute-slices"] = gpu::mig::kComputeSlices;
  set.counters["media-extensions"] = 1;
  // The GPU's attributes, once for all its partitions (and its problems said once).
  Device base;
  common_attributes(inv, g, options, base.attributes, problems);
  for (const auto& o : offers) {
    if (o.shape == nullptr) continue;
    for (const unsigned start : o.shape->starts) {
      Device d;
      d.type = DeviceType::kMig;
      d.partition = true;
      d.shape = o.shape;
      d.placement_start = start;
      d.gpu_index = g.index;
      d.minor = *g.minor_number;
      d.parent_uuid = g.uuid;
      d.profile = o.name;
      d.pci_bus_id = g.pci.bus_id.empty() ? std::string() : published_bus_id(g.pci.bus_id);
      d.name = gpu::dra_mig_name(d.minor, o.name, o.shape->profile_id, start);
      d.attributes = base.attributes;
      d.attributes["type"] = std::string("mig");
      d.attributes["parentUUID"] = g.uuid;
      d.attributes["profile"] = o.name;
      d.capacity["multiprocessors"] = count(o.multiprocessors);
      d.capacity["copyEngines"] = count(o.copy_engines);
      d.capacity["decoders"] = count(o.decoders);
      d.capacity["encoders"] = count(o.encoders);
      d.capacity["jpegEngines"] = count(o.jpeg_engines);
      d.capacity["ofaEngines"] = count(o.ofa_engines);
      d.capacity["memory"] = bytes_quantity(o.memory_mib);
      d.counter_set = set.name;
      for (unsigned i = start; i < start + o.shape->memory_slices && i < gpu::mig::kMemorySlices; ++i) {
        d.capacity[fmt::format("memorySlice{}", i)] = count(1);
        d.consumes[fmt::format("memory-slice-{}", i)] = 1;
      }
      d.consumes["compute-slices"] = o.shape->compute_slices;
      if (o.shape->media_engines) d.consumes["media-extensions"] = 1;
      out.push_back(std::move(d));
    }
  }
  sets.push_back(std::move(set));
}

}  // namespace

std::string counter_set_name(unsigned minor) { return fmt::format("gpu-{}-counter-set", minor); }

nlohmann::json counter_set_json(const CounterSet& set) {
  nlohmann::json counters = nlohmann::json::object();
  for (const auto& [name, v] : set.counters) counters[name] = {{"value", std::to_string(v)}};
  return {{"name", set.name}, {"counters", std::move(counters)}};
}

const char* device_type_name(DeviceType t) { return t == DeviceType::kMig ? "mig" : "gpu"; }

Result<cel::Semver> loose_version(std::string_view text) {
  const auto bad = [&](std::string_view why) {
    return fail(ErrorCode::kInvalidArgument, "version '{}': {}", text.substr(0, 64), why);
  };
  std::string_view rest = text;
  if (rest.starts_with('v')) rest.remove_prefix(1);
  std::array<uint64_t, 3> parts{};
  size_t n = 0;
  while (n < parts.size()) {
    size_t i = 0;
    while (i < rest.size() && std::isdigit(static_cast<unsigned char>(rest[i])) != 0) ++i;
    if (i == 0) return bad("want up to three dot-separated numbers");
    auto [p, ec] = std::from_chars(rest.data(), rest.data() + i, parts[n]);
    if (ec != std::errc()) return bad("number out of range");
    rest.remove_prefix(i);
    ++n;
    if (!rest.starts_with('.')) break;
    if (n == parts.size()) return bad("more than three numeric parts");
    rest.remove_prefix(1);
  }
  if (!rest.empty() && rest[0] != '-' && rest[0] != '+') return bad("unexpected text after the numbers");
  auto v = cel::Semver::parse(fmt::format("{}.{}.{}{}", parts[0], parts[1], parts[2], rest));
  if (!v) return bad(v.error().message);
  return v;
}

std::string published_bus_id(std::string_view nvml_bus_id) {
  unsigned domain = 0, bus = 0, dev = 0, function = 0;
  const std::string id(nvml_bus_id);
  if (std::sscanf(id.c_str(), "%x:%x:%x.%x", &domain, &bus, &dev, &function) == 4) {
    return fmt::format("{:04x}:{:02x}:{:02x}.{:x}", domain, bus, dev, function);
  }
  std::string out = id;
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

std::optional<std::string> pcie_root(const std::string& sysfs_root, std::string_view bus_id) {
  const std::string link = fmt::format("{}/bus/pci/devices/{}", sysfs_root, bus_id);
  std::array<char, 4096> buf{};
  const ssize_t n = ::readlink(link.c_str(), buf.data(), buf.size() - 1);
  if (n <= 0) return std::nullopt;
  const std::string_view target(buf.data(), static_cast<size_t>(n));
  // ".../devices/pci0000:00/0000:00:01.0/0000:18:00.0": the root complex is the "pci" component.
  size_t pos = 0;
  while (pos < target.size()) {
    size_t end = target.find('/', pos);
    if (end == std::string_view::npos) end = target.size();
    const std::string_view part = target.substr(pos, end - pos);
    if (part.starts_with("pci") && part.size() > 3 && part.find(':') != std::string_view::npos) {
      return std::string(part);
    }
    pos = end + 1;
  }
  return std::nullopt;
}

DeviceSet build_devices(const gpu::Inventory& inv, const BuildOptions& options) {
  DeviceSet out;
  std::set<std::string, std::less<>> names;
  const auto add = [&](Device d) {
    if (!names.insert(d.name).second) {
      out.problems.push_back(fmt::format("{} ({}): a device of that name is already published", d.name, d.uuid));
      return;
    }
    out.devices.push_back(std::move(d));
  };
  for (const gpu::GpuInfo& g : inv.gpus) {
    if (g.lost) {
      out.problems.push_back(fmt::format("GPU {} ({}): lost", g.index, g.uuid));
      continue;
    }
    if (!g.minor_number) {
      out.problems.push_back(fmt::format("GPU {} ({}): no minor number", g.index, g.uuid));
      continue;
    }
    if (const auto p = options.partitionable.find(g.index);
        p != options.partitionable.end() && g.mig_enabled.value_or(false)) {
      std::vector<Device> parts;
      add_partitions(inv, g, p->second, options, parts, out.counter_sets, out.problems);
      for (auto& d : parts) add(std::move(d));
      continue;
    }
    if (g.mig_enabled.value_or(false)) {
      for (const gpu::MigDevice& m : g.mig_devices) {
        if (auto d = mig_device(inv, g, m, options, out.problems)) add(std::move(*d));
      }
      if (g.mig_devices.empty()) out.problems.push_back(fmt::format("GPU {}: MIG enabled but no MIG devices", g.index));
      continue;
    }
    Device d;
    d.type = DeviceType::kGpu;
    d.gpu_index = g.index;
    d.minor = *g.minor_number;
    d.uuid = g.uuid;
    d.pci_bus_id = g.pci.bus_id.empty() ? std::string() : published_bus_id(g.pci.bus_id);
    d.name = gpu::dra_gpu_name(d.minor);
    common_attributes(inv, g, options, d.attributes, out.problems);
    d.attributes["type"] = std::string("gpu");
    d.attributes["uuid"] = g.uuid;
    if (g.memory_total_mib) d.capacity["memory"] = bytes_quantity(*g.memory_total_mib);
    add(std::move(d));
  }
  return out;
}

nlohmann::json slice_device_json(const Device& device) {
  nlohmann::json attributes = nlohmann::json::object();
  for (const auto& [name, value] : device.attributes) {
    nlohmann::json v;
    if (const auto* s = std::get_if<std::string>(&value)) {
      v["string"] = *s;
    } else if (const auto* i = std::get_if<int64_t>(&value)) {
      v["int"] = *i;
    } else if (const auto* b = std::get_if<bool>(&value)) {
      v["bool"] = *b;
    } else {
      v["version"] = std::get<cel::Semver>(value).to_string();
    }
    attributes[name] = std::move(v);
  }
  nlohmann::json capacity = nlohmann::json::object();
  for (const auto& [name, q] : device.capacity) capacity[name] = {{"value", q.to_string()}};
  nlohmann::json out = {{"name", device.name}, {"attributes", std::move(attributes)}, {"capacity", std::move(capacity)}};
  if (!device.consumes.empty()) {
    nlohmann::json counters = nlohmann::json::object();
    for (const auto& [name, v] : device.consumes) counters[name] = {{"value", std::to_string(v)}};
    out["consumesCounters"] = nlohmann::json::array({{{"counterSet", device.counter_set}, {"counters", counters}}});
  }
  return out;
}

cel::DeviceInput cel_input(const Device& device, std::string_view driver) {
  cel::DeviceInput in;
  in.driver = std::string(driver);
  for (const auto& [name, value] : device.attributes) in.attributes.emplace(name, value);
  for (const auto& [name, q] : device.capacity) in.capacity.emplace(name, q);
  return in;
}

const Device* find_device(const std::vector<Device>& devices, std::string_view name) {
  for (const Device& d : devices) {
    if (d.name == name) return &d;
  }
  return nullptr;
}

}  // namespace kgpu::dra
