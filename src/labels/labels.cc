#include "labels/labels.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <limits>
#include <set>
#include <span>
#include <sstream>
#include <system_error>
#include <utility>

#include "common/files.h"
#include "common/strings.h"
#include "gpu/mig.h"

namespace kgpu::labels {
namespace {

constexpr size_t kMaxLabelValue = 63;
constexpr size_t kMaxLabelPrefix = 253;
constexpr size_t kMaxDnsLabel = 63;

bool is_alnum(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'); }
bool is_value_char(char c) { return is_alnum(c) || c == '-' || c == '_' || c == '.'; }
bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

// `s` without leading and trailing characters that are not alphanumeric.
std::string trim_to_alnum(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && !is_alnum(s[b])) ++b;
  while (e > b && !is_alnum(s[e - 1])) --e;
  return std::string(s.substr(b, e - b));
}

// The first `n` characters of `s` (a cleaned value), trimmed to end alphanumeric.
std::string cut(std::string_view s, size_t n) { return trim_to_alnum(s.substr(0, std::min(n, s.size()))); }

// GFD's sanitising rule, then trimmed to alphanumeric ends; not length-limited.
std::string clean(std::string_view raw) {
  std::string out;
  bool space = false;
  for (char c : raw) {
    if (is_space(c)) {
      space = true;
      continue;
    }
    if (!is_value_char(c)) continue;
    if (space && !out.empty()) out += '-';
    space = false;
    out += c;
  }
  return trim_to_alnum(out);
}

bool is_dns_subdomain(std::string_view s) {
  if (s.empty() || s.size() > kMaxLabelPrefix) return false;
  size_t start = 0;
  while (true) {
    const size_t dot = s.find('.', start);
    const std::string_view part = s.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start);
    if (part.empty() || part.size() > kMaxDnsLabel) return false;
    for (char c : part) {
      if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return false;
    }
    if (part.front() == '-' || part.back() == '-') return false;
    if (dot == std::string_view::npos) return true;
    start = dot + 1;
  }
}

std::string num(auto v) { return fmt::format("{}", v); }

bool mig_enabled(const gpu::GpuInfo& g) { return g.mig_enabled.value_or(false); }


// gpu.family from the compute capability, for GPUs whose architecture NVML did not name.
std::string family_from_compute_capability(int major, int minor) {
  switch (major) {
    case 1:
      return "tesla";
    case 2:
      return "fermi";
    case 3:
      return "kepler";
    case 5:
      return "maxwell";
    case 6:
      return "pascal";
    case 7:
      return minor < 5 ? "volta" : "turing";
    case 8:
      return minor < 9 ? "ampere" : "ada-lovelace";
    case 9:
      return "hopper";
    case 10:
    case 12:
      return "blackwell";
    default:
      return "undefined";
  }
}

// Collects labels, keeping every key and value valid and reporting what had to change.
class Builder {
 public:
  Builder(Labels& labels, std::vector<std::string>* warnings) : labels_(labels), warnings_(warnings) {}

  template <typename... Args>
  void warn(fmt::format_string<Args...> format, Args&&... args) {
    if (warnings_ != nullptr) warnings_->push_back(fmt::format(format, std::forward<Args>(args)...));
  }

  // Sets `key`; an invalid value is replaced by sanitize_label_value() of it, an invalid key is dropped.
  void set(const std::string& key, std::string value) {
    if (!is_valid_label_key(key)) {
      warn("label {} left out: not a valid label key", key);
      return;
    }
    if (!is_valid_label_value(value)) {
      std::string fixed = sanitize_label_value(value);
      warn("label {}: \"{}\" is not a valid label value; written as \"{}\"", key, value, fixed);
      value = std::move(fixed);
    }
    labels_[key] = std::move(value);
  }

  void erase(const std::string& key) { labels_.erase(key); }

  // "<model>-<suffix...>" as a label value. When that exceeds 63 characters only the model part is
  // shortened, so the parts that tell products apart (MIG profile, INVALID, SHARED) survive.
  std::string product(std::string_view model, const std::vector<std::string>& suffix) {
    const std::string m = clean(model);
    std::string tail;
    for (const auto& s : suffix) {
      const std::string part = clean(s);
      if (part.empty()) continue;
      if (!tail.empty()) tail += '-';
      tail += part;
    }
    const std::string full = m.empty() ? tail : tail.empty() ? m : m + "-" + tail;
    if (full.size() <= kMaxLabelValue) return full;
    std::string out;
    if (tail.empty() || tail.size() + 2 > kMaxLabelValue) {
      out = cut(full, kMaxLabelValue);
    } else {
      const std::string head = cut(m, kMaxLabelValue - tail.size() - 1);
      out = head.empty() ? tail : head + "-" + tail;
    }
    warn("product name {} is longer than {} characters; labelled as {}", full, kMaxLabelValue, out);
    return out;
  }

 private:
  Labels& labels_;
  std::vector<std::string>* warnings_;
};

// GPUs of one product name, in index order.
struct Model {
  std::string name;
  std::vector<const gpu::GpuInfo*> gpus;
};

// LabelSharing with its inconsistencies resolved (and warned about).
struct Sharing {
  std::string strategy = "none";
  int replicas = 1;
  bool renamed = false;
  std::map<unsigned, int> by_gpu;

  int for_gpu(unsigned index) const {
    const auto it = by_gpu.find(index);
    return it == by_gpu.end() ? replicas : it->second;
  }
};

Sharing normalize(const LabelSharing& in, Builder& b) {
  Sharing s;
  s.renamed = in.renamed;
  s.strategy = in.strategy;
  if (s.strategy != "none" && s.strategy != "time-slicing" && s.strategy != "mps") {
    b.warn("sharing strategy \"{}\" is not none, time-slicing or mps; labelled as none", in.strategy);
    s.strategy = "none";
  }
  s.replicas = in.replicas;
  if (s.replicas < 1) {
    b.warn("replicas {} is less than 1; labelled as 1", in.replicas);
    s.replicas = 1;
  }
  for (const auto& [index, r] : in.replicas_by_gpu) {
    if (r < 1) b.warn("replicas {} for GPU {} is less than 1; labelled as 1", r, index);
    s.by_gpu[index] = std::max(r, 1);
  }
  if (s.strategy == "none") {
    bool replicated = s.replicas != 1;
    for (const auto& [index, r] : s.by_gpu) replicated = replicated || r != 1;
    if (replicated) b.warn("replicas other than 1 with sharing strategy none; labelled as 1 replica");
    s.replicas = 1;
    s.by_gpu.clear();
  }
  return s;
}

struct ReplicaRange {
  int min = 1, max = 1;
};

ReplicaRange replica_range(const Sharing& s, const std::vector<const gpu::GpuInfo*>& gpus) {
  ReplicaRange r{s.replicas, s.replicas};
  bool first = true;
  for (const auto* g : gpus) {
    const int n = s.for_gpu(g->index);
    r.min = first ? n : std::min(r.min, n);
    r.max = first ? n : std::max(r.max, n);
    first = false;
  }
  return r;
}

// <resource>.{product,count,replicas,sharing-strategy}.
void base_labels(Builder& b, const std::string& resource, std::string product, size_t count, int replicas,
                 const std::string& strategy) {
  b.set(resource + ".product", std::move(product));
  b.set(resource + ".count", num(count));
  b.set(resource + ".replicas", num(replicas));
  b.set(resource + ".sharing-strategy", strategy);
}

void version_labels(Builder& b, const gpu::Inventory& inv) {
  std::vector<std::string> parts;
  std::istringstream in(inv.driver_version);
  for (std::string p; std::getline(in, p, '.');) parts.push_back(p);
  const bool numeric = std::all_of(parts.begin(), parts.end(), [](const std::string& p) {
    return !p.empty() && std::all_of(p.begin(), p.end(), [](char c) { return c >= '0' && c <= '9'; });
  });
  if ((parts.size() == 2 || parts.size() == 3) && numeric && inv.driver_version.back() != '.') {
    const std::string revision = parts.size() == 3 ? parts[2] : "";  // GFD writes an empty revision for X.Y
    b.set("nvidia.com/cuda.driver-version.major", parts[0]);
    b.set("nvidia.com/cuda.driver-version.minor", parts[1]);
    b.set("nvidia.com/cuda.driver-version.revision", revision);
    b.set("nvidia.com/cuda.driver-version.full", inv.driver_version);
    b.set("nvidia.com/cuda.driver.major", parts[0]);
    b.set("nvidia.com/cuda.driver.minor", parts[1]);
    b.set("nvidia.com/cuda.driver.rev", revision);
  } else {
    b.warn("driver version \"{}\" is not X.Y[.Z]; nvidia.com/cuda.driver-version.* left out", inv.driver_version);
  }
  if (inv.cuda_driver_version && *inv.cuda_driver_version > 0) {
    const int v = *inv.cuda_driver_version;
    const std::string major = num(v / 1000), minor = num((v % 1000) / 10);
    b.set("nvidia.com/cuda.runtime-version.major", major);
    b.set("nvidia.com/cuda.runtime-version.minor", minor);
    b.set("nvidia.com/cuda.runtime-version.full", major + "." + minor);
    b.set("nvidia.com/cuda.runtime.major", major);
    b.set("nvidia.com/cuda.runtime.minor", minor);
  } else {
    b.warn("CUDA driver version unknown; nvidia.com/cuda.runtime-version.* left out");
  }
}

std::string gpu_mode(const std::vector<const gpu::GpuInfo*>& usable, const Model& primary, const LabelOptions& opt,
                     Builder& b) {
  auto class_of = [&](const gpu::GpuInfo* g) -> std::optional<uint32_t> {
    const auto it = opt.pci_class.find(g->index);
    if (it == opt.pci_class.end()) return std::nullopt;
    return it->second;
  };
  std::optional<uint32_t> chosen;
  for (const auto* g : primary.gpus) {
    chosen = class_of(g);
    if (chosen) break;
  }
  std::set<uint32_t> seen;
  for (const auto* g : usable) {
    if (auto c = class_of(g)) {
      seen.insert(*c);
      if (!chosen) chosen = c;
    }
  }
  if (seen.size() > 1) {
    std::vector<std::string> hex;
    for (uint32_t c : seen) hex.push_back(fmt::format("{:#08x}", c));
    b.warn("GPUs of several PCI classes ({}); nvidia.com/gpu.mode describes {:#08x}", fmt::join(hex, ", "), *chosen);
  }
  if (!chosen) return "unknown";
  switch (*chosen & 0xFFFF00u) {
    case 0x030000u:
      return "graphics";
    case 0x030200u:
      return "compute";
    default:
      return "unknown";
  }
}

// nvidia.com/gpu.* for the whole GPUs of `m`. MIG-enabled GPUs are not shared (replicas 0); GPUs
// with MIG disabled carry the sharing.
void whole_gpu_labels(Builder& b, const Model& m, const Sharing& s) {
  std::vector<const gpu::GpuInfo*> full;
  for (const auto* g : m.gpus) {
    if (!mig_enabled(*g)) full.push_back(g);
  }
  int replicas = 0;
  bool shared = false;
  if (!full.empty()) {
    const ReplicaRange r = replica_range(s, full);
    replicas = r.min;
    shared = r.max > 1;
    if (!s.by_gpu.empty()) b.set("kgpu.io/gpu.replicas.max", num(r.max));
  }
  std::vector<std::string> suffix;
  if (shared && !s.renamed) suffix.push_back("SHARED");
  base_labels(b, "nvidia.com/gpu", b.product(m.name, suffix), m.gpus.size(), replicas, shared ? s.strategy : "none");

  std::optional<uint64_t> memory;
  for (const auto* g : m.gpus) {
    if (g->memory_total_mib && *g->memory_total_mib > 0) {
      memory = std::min(memory.value_or(std::numeric_limits<uint64_t>::max()), *g->memory_total_mib);
    }
  }
  if (memory) b.set("nvidia.com/gpu.memory", num(*memory));

  for (const auto* g : m.gpus) {
    if (!g->cc_major || *g->cc_major == 0) continue;
    const int minor = g->cc_minor.value_or(0);
    b.set("nvidia.com/gpu.family", g->family.empty() ? family_from_compute_capability(*g->cc_major, minor) : g->family);
    b.set("nvidia.com/gpu.compute.major", num(*g->cc_major));
    b.set("nvidia.com/gpu.compute.minor", num(minor));
    break;
  }
}

// <resource>.{memory,multiprocessors,slices.gi,slices.ci,engines.*} of MIG device `d` on a `model` GPU.
void mig_attribute_labels(Builder& b, const std::string& resource, const std::string& model, const gpu::MigDevice& d) {
  b.set(resource + ".memory", num(d.memory_mib));
  b.set(resource + ".multiprocessors", num(d.sm_count));
  b.set(resource + ".slices.gi", num(d.gpu_slices));
  b.set(resource + ".slices.ci", num(d.compute_slices));
  if (const auto e = mig_engines(model, d)) {
    b.set(resource + ".engines.copy", num(e->copy));
    b.set(resource + ".engines.decoder", num(e->decoder));
    b.set(resource + ".engines.encoder", num(e->encoder));
    b.set(resource + ".engines.jpeg", num(e->jpeg));
    b.set(resource + ".engines.ofa", num(e->ofa));
  } else {
    b.warn("engine counts of MIG profile {} on {} are not in kgpu's tables; {}.engines.* left out", d.profile, model,
           resource);
  }
}

// migStrategy single: nvidia.com/gpu is the MIG devices. Valid only when every GPU has MIG enabled
// with at least one MIG device, all of one model and one profile; otherwise <model>-MIG-INVALID.
void mig_single_labels(Builder& b, const std::vector<const gpu::GpuInfo*>& usable, const Model& primary,
                       const Sharing& sharing) {
  std::vector<const gpu::GpuInfo*> enabled;
  std::vector<unsigned> disabled, empty;
  std::set<std::string> models, profiles;
  for (const auto* g : usable) {
    if (!mig_enabled(*g)) {
      disabled.push_back(g->index);
      continue;
    }
    enabled.push_back(g);
    models.insert(g->name);
    if (g->mig_devices.empty()) empty.push_back(g->index);
    for (const auto& d : g->mig_devices) profiles.insert(gpu::mig::resource_profile(d.profile));
  }
  if (enabled.empty()) return;  // no MIG: the whole-GPU labels stand, as with none

  std::string reason;
  if (!disabled.empty()) {
    reason = fmt::format("MIG is disabled on GPU {} but enabled on others", fmt::join(disabled, ","));
  } else if (!empty.empty()) {
    reason = fmt::format("no MIG devices on MIG-enabled GPU {}", fmt::join(empty, ","));
  } else if (models.size() > 1) {
    reason = fmt::format("MIG-enabled GPUs of several models ({})", fmt::join(models, ", "));
  } else if (profiles.size() > 1) {
    reason = fmt::format("more than one MIG profile ({})", fmt::join(profiles, ", "));
  }
  if (!reason.empty()) {
    const std::string product = b.product(primary.name, {"MIG", "INVALID"});
    b.warn("migStrategy single: {}; nvidia.com/gpu.product={} with count 0", reason, product);
    base_labels(b, "nvidia.com/gpu", product, 0, 0, "none");
    b.set("nvidia.com/gpu.memory", "0");
    b.erase("kgpu.io/gpu.replicas.max");
    return;
  }

  const std::string& model = enabled.front()->name;
  const gpu::MigDevice& d = enabled.front()->mig_devices.front();
  size_t count = 0;
  for (const auto* g : enabled) count += g->mig_devices.size();
  Sharing s = sharing;
  if (s.strategy == "mps") {
    b.warn("MPS sharing is not supported with MIG; the MIG devices are labelled as not shared");
    s = Sharing{};
  }
  const ReplicaRange r = replica_range(s, enabled);
  const bool shared = r.max > 1;
  const std::string profile = gpu::mig::resource_profile(d.profile);
  base_labels(b, "nvidia.com/gpu", b.product(model, {"MIG", profile, shared && !s.renamed ? "SHARED" : ""}), count,
              r.min, shared ? s.strategy : "none");
  if (s.by_gpu.empty()) {
    b.erase("kgpu.io/gpu.replicas.max");
  } else {
    b.set("kgpu.io/gpu.replicas.max", num(r.max));
  }
  mig_attribute_labels(b, "nvidia.com/gpu", model, d);
}

// migStrategy mixed: nvidia.com/mig-<profile>.* per profile present; a time-sliced profile gets its
// replicas, the -SHARED product (unless renamed) and sharing-strategy time-slicing.
void mig_mixed_labels(Builder& b, const std::vector<const gpu::GpuInfo*>& usable, const LabelSharing& sharing) {
  struct Entry {
    const gpu::GpuInfo* gpu;
    const gpu::MigDevice* device;
  };
  std::map<std::string, std::vector<Entry>> by_profile;
  for (const auto* g : usable) {
    if (!mig_enabled(*g)) continue;
    if (g->mig_devices.empty()) b.warn("GPU {} has MIG enabled but no MIG devices", g->index);
    for (const auto& d : g->mig_devices) by_profile[gpu::mig::resource_profile(d.profile)].push_back({g, &d});
  }
  for (const auto& [profile, entries] : by_profile) {
    // The model with the most devices of this profile; entries are in GPU order, so a tie goes to
    // the model seen first (lowest GPU index).
    std::vector<std::pair<std::string, size_t>> per_model;
    for (const auto& e : entries) {
      auto it = std::find_if(per_model.begin(), per_model.end(), [&](const auto& p) { return p.first == e.gpu->name; });
      if (it == per_model.end()) {
        per_model.emplace_back(e.gpu->name, 1);
      } else {
        ++it->second;
      }
    }
    const auto best = std::max_element(per_model.begin(), per_model.end(),
                                       [](const auto& a, const auto& c) { return a.second < c.second; });
    const std::string& model = best->first;
    const std::string resource = "nvidia.com/mig-" + profile;
    if (per_model.size() > 1) {
      std::vector<std::string> names;
      for (const auto& [name, n] : per_model) names.push_back(fmt::format("{} x{}", name, n));
      b.warn("MIG profile {} exists on several GPU models ({}); {}.* describe {}", profile, fmt::join(names, ", "),
             resource, model);
    }
    const auto rep = std::find_if(entries.begin(), entries.end(), [&](const Entry& e) { return e.gpu->name == model; });
    const auto shared_it = sharing.mig_replicas.find(profile);
    const int replicas = shared_it == sharing.mig_replicas.end() ? 1 : std::max(shared_it->second, 1);
    const bool shared = replicas > 1;
    base_labels(b, resource, b.product(model, {"MIG", profile, shared && !sharing.renamed ? "SHARED" : ""}),
                entries.size(), replicas, shared ? "time-slicing" : "none");
    mig_attribute_labels(b, resource, model, *rep->device);
  }
}

// kgpu.io/gpu.models and kgpu.io/gpu-model.<product>=<count> for every model.
void model_labels(Builder& b, const std::vector<Model>& models) {
  const std::string prefix = "kgpu.io/gpu-model.";
  const size_t room = kMaxLabelValue - (prefix.size() - std::string_view("kgpu.io/").size());
  std::map<std::string, size_t> counts;
  for (const auto& m : models) {
    const std::string product = clean(m.name);
    std::string name = cut(product, room);
    if (name.empty()) {
      b.warn("GPU model \"{}\" has no characters usable in a label name; {}* left out for it", m.name, prefix);
      continue;
    }
    if (name != product) b.warn("{}{} is too long for a label name; shortened to {}{}", prefix, product, prefix, name);
    if (counts.contains(name)) b.warn("two GPU models share the label {}{}; their counts are added", prefix, name);
    counts[name] += m.gpus.size();
  }
  b.set("kgpu.io/gpu.models", num(models.size()));
  for (const auto& [name, n] : counts) b.set(prefix + name, num(n));
}

// Table rows: GPU-instance shape (gpu::mig::Shape::key) -> engines.
struct ShapeEngines {
  std::string_view shape;
  MigEngines engines;
};

// Source of truth: the "Supported MIG Profiles" tables of NVIDIA's Multi-Instance GPU User Guide
// (docs.nvidia.com/datacenter/tesla/mig-user-guide/supported-mig-profiles.html). Their "Hardware
// Units" column gives NVDECs / JPEG / OFA and "Copy Engines" the copy engines of each GPU-instance
// profile; these GPUs have no NVENC, so encoders are 0. A100 rows are the A100-SXM4-40GB table (the
// 80 GB parts have the same shapes under doubled memory names: 1g.5gb -> 1g.10gb, ...). Hopper rows
// are the H100 80 GB table, which the H100 94/96 GB and H200 141 GB tables repeat.
// Fields: copy, decoder, encoder, jpeg, ofa.
constexpr ShapeEngines kA100Engines[] = {
    {"1g", {1, 0, 0, 0, 0}}, {"1g+me", {1, 1, 0, 1, 1}}, {"1g.2x", {1, 1, 0, 0, 0}}, {"2g", {2, 1, 0, 0, 0}},
    {"3g", {3, 2, 0, 0, 0}}, {"4g", {4, 2, 0, 0, 0}},    {"7g", {7, 5, 0, 1, 1}},
};
constexpr ShapeEngines kHopperEngines[] = {
    {"1g", {1, 1, 0, 1, 0}}, {"1g+me", {1, 1, 0, 1, 1}}, {"1g.2x", {1, 1, 0, 1, 0}}, {"2g", {2, 2, 0, 2, 0}},
    {"3g", {3, 3, 0, 3, 0}}, {"4g", {4, 4, 0, 4, 0}},    {"7g", {8, 7, 0, 7, 1}},
};

// The GPU-instance shape of `d`: from its NVML profile id, else from its slice count, "+me" and
// (for one slice) the length of its memory run.
std::optional<std::string_view> shape_key(const gpu::MigDevice& d) {
  if (d.profile_id) {
    const auto* shape = gpu::mig::shape_by_profile_id(*d.profile_id);
    if (shape == nullptr) return std::nullopt;
    return shape->key;
  }
  const bool media = d.profile.ends_with("+me");
  if (d.gpu_slices == 1) {
    if (media) return "1g+me";
    if (d.placement_size == 1u) return "1g";
    if (d.placement_size == 2u) return "1g.2x";
    return std::nullopt;
  }
  if (media) return std::nullopt;
  switch (d.gpu_slices) {
    case 2:
      return "2g";
    case 3:
      return "3g";
    case 4:
      return "4g";
    case 7:
      return "7g";
    default:
      return std::nullopt;
  }
}

// Whole-word match of the model names the tables cover ("NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB
// HBM3", "NVIDIA H200", "NVIDIA GH200 480GB"), so that e.g. "RTX A1000" does not count as an A100.
std::span<const ShapeEngines> engine_table(std::string_view name) {
  std::string word;
  auto matches = [&](std::initializer_list<std::string_view> words) {
    return std::find(words.begin(), words.end(), word) != words.end();
  };
  for (size_t i = 0; i <= name.size(); ++i) {
    if (i < name.size() && is_alnum(name[i])) {
      word += static_cast<char>(std::toupper(static_cast<unsigned char>(name[i])));
      continue;
    }
    if (matches({"A100", "A100X"})) return kA100Engines;
    if (matches({"H100", "H200", "GH200"})) return kHopperEngines;
    word.clear();
  }
  return {};
}

}  // namespace

std::string sanitize_label_value(std::string_view raw) { return cut(clean(raw), kMaxLabelValue); }

bool is_valid_label_value(std::string_view value) {
  if (value.empty()) return true;
  if (value.size() > kMaxLabelValue || !is_alnum(value.front()) || !is_alnum(value.back())) return false;
  return std::all_of(value.begin(), value.end(), is_value_char);
}

bool is_valid_label_key(std::string_view key) {
  std::string_view name = key;
  if (const auto slash = key.find('/'); slash != std::string_view::npos) {
    if (!is_dns_subdomain(key.substr(0, slash))) return false;
    name = key.substr(slash + 1);
  }
  return !name.empty() && is_valid_label_value(name);
}

std::optional<MigEngines> mig_engines(std::string_view gpu_name, const gpu::MigDevice& device) {
  // A compute instance smaller than its GPU instance shares the GI's engines; the tables list GIs only.
  if (device.compute_slices != 0 && device.compute_slices < device.gpu_slices) return std::nullopt;
  const auto table = engine_table(gpu_name);
  const auto key = shape_key(device);
  if (table.empty() || !key) return std::nullopt;
  for (const auto& row : table) {
    if (row.shape == *key) return row.engines;
  }
  return std::nullopt;
}

// NVML's vGPU virtualization mode (a vGPU, seen from the guest).
constexpr int nvml_virtualization_vgpu = 2;

// nvidia.com/gpu.clique=<cluster UUID>.<clique ID> when the fabric-attached GPUs of the node agree
// on both (GFD's rule; GPUs not attached are skipped); none, with a warning, when they disagree.
void fabric_labels(Builder& b, const std::vector<const gpu::GpuInfo*>& usable) {
  std::set<std::string> clusters;
  std::set<unsigned> cliques;
  for (const auto* g : usable) {
    if (!g->fabric || !g->fabric->attached) continue;
    clusters.insert(g->fabric->cluster_uuid);
    cliques.insert(g->fabric->clique_id);
  }
  if (clusters.empty()) return;
  if (clusters.size() > 1 || cliques.size() > 1) {
    b.warn("the NVLink-fabric GPUs of this node report {} cluster UUIDs and {} clique IDs; no nvidia.com/gpu.clique",
           clusters.size(), cliques.size());
    return;
  }
  b.set("nvidia.com/gpu.clique", fmt::format("{}.{}", *clusters.begin(), *cliques.begin()));
}

Labels gfd_labels(const gpu::Inventory& inv, const LabelSharing& sharing, const LabelOptions& opt,
                  std::vector<std::string>* warnings) {
  Labels labels;
  Builder b(labels, warnings);
  if (opt.timestamp) b.set("nvidia.com/gfd.timestamp", num(*opt.timestamp));

  std::vector<const gpu::GpuInfo*> usable;
  for (const auto& g : inv.gpus) {
    if (g.lost || g.error) {
      b.warn("GPU {} ({}): {}; not counted in the labels", g.index, g.uuid.empty() ? g.name : g.uuid,
             g.error.value_or("lost"));
      continue;
    }
    usable.push_back(&g);
  }
  std::stable_sort(usable.begin(), usable.end(), [](const auto* a, const auto* c) { return a->index < c->index; });
  if (usable.empty()) {
    b.warn("no usable GPU: no GPU labels");
    return labels;
  }

  std::vector<Model> models;  // in order of their lowest GPU index
  for (const auto* g : usable) {
    auto it = std::find_if(models.begin(), models.end(), [&](const Model& m) { return m.name == g->name; });
    if (it == models.end()) it = models.insert(models.end(), Model{g->name, {}});
    it->gpus.push_back(g);
  }
  const Model* primary = &models.front();
  for (const auto& m : models) {
    if (m.gpus.size() > primary->gpus.size()) primary = &m;
  }
  if (models.size() > 1) {
    std::vector<std::string> names;
    for (const auto& m : models) names.push_back(fmt::format("{} x{}", m.name, m.gpus.size()));
    b.warn("{} GPU models on this node ({}); nvidia.com/gpu.* describe {}, kgpu.io/gpu-model.* count each",
           models.size(), fmt::join(names, ", "), primary->name);
  }

  std::string mig_strategy = opt.mig_strategy;
  if (mig_strategy != "none" && mig_strategy != "single" && mig_strategy != "mixed") {
    b.warn("migStrategy \"{}\" is not none, single or mixed; labelled as none", opt.mig_strategy);
    mig_strategy = "none";
  }
  const Sharing s = normalize(sharing, b);
  for (const auto& [index, r] : s.by_gpu) {
    if (std::none_of(usable.begin(), usable.end(), [&](const auto* g) { return g->index == index; })) {
      b.warn("replicas given for GPU {}, which is not a usable GPU of this node", index);
    }
  }

  version_labels(b, inv);

  std::string machine = "unknown";
  if (opt.machine) {
    machine = trim(*opt.machine, " \t\r\n");
    std::replace(machine.begin(), machine.end(), ' ', '-');  // GFD's rule
    if (machine.empty()) {
      machine = "unknown";
    } else if (!is_valid_label_value(machine)) {
      const std::string fixed = sanitize_label_value(*opt.machine);
      b.warn("machine type \"{}\" is not a valid label value; labelled as \"{}\"", *opt.machine, fixed);
      machine = fixed;
    }
  }
  b.set("nvidia.com/gpu.machine", machine);

  const bool any_mig_capable = std::any_of(usable.begin(), usable.end(), [](const auto* g) { return g->mig_capable; });
  const bool any_mig_enabled = std::any_of(usable.begin(), usable.end(), [](const auto* g) { return mig_enabled(*g); });
  b.set("nvidia.com/mig.capable", any_mig_capable ? "true" : "false");
  if (s.strategy == "mps" && any_mig_enabled) b.warn("MPS sharing is not supported on MIG-enabled GPUs");
  b.set("nvidia.com/mps.capable", s.strategy == "mps" && !any_mig_enabled ? "true" : "false");
  b.set("nvidia.com/gpu.mode", gpu_mode(usable, *primary, opt, b));

  whole_gpu_labels(b, *primary, s);
  if (mig_strategy != "none") b.set("nvidia.com/mig.strategy", mig_strategy);
  if (mig_strategy == "single") mig_single_labels(b, usable, *primary, s);
  if (mig_strategy == "mixed") mig_mixed_labels(b, usable, sharing);
  model_labels(b, models);
  fabric_labels(b, usable);
  // GFD labels a vGPU guest; it reads the PCI config space, kgpu NVML's virtualization mode.
  if (std::any_of(usable.begin(), usable.end(),
                  [](const auto* g) { return g->virtualization_mode == nvml_virtualization_vgpu; })) {
    b.set("nvidia.com/vgpu.present", "true");
  }
  return labels;
}

std::string render_features_file(const Labels& labels) {
  std::string out;
  for (const auto& [key, value] : labels) out += key + "=" + value + "\n";
  return out;
}

Result<void> write_features_file(const std::string& path, const Labels& labels) {
  const std::string text = render_features_file(labels);
  // A larger file, a directory or no file at all is an error here, and is replaced below.
  if (auto old = read_file_limited(path, text.size()); old && *old == text) return {};
  return write_file_atomically(path, text);
}

std::optional<std::string> read_machine_type(const std::string& path) {
  const auto text = read_file(path);
  if (!text) return std::nullopt;
  std::string machine = trim(*text, " \t\r\n");
  if (machine.empty()) return std::nullopt;
  return machine;
}

std::optional<uint32_t> read_pci_class(const std::string& bus_id, const std::string& devices_dir) {
  const auto colon = bus_id.find(':');
  if (colon == std::string::npos || colon == 0) return std::nullopt;
  uint32_t domain = 0;
  const char* first = bus_id.data();
  const auto [end, ec] = std::from_chars(first, first + colon, domain, 16);
  if (ec != std::errc() || end != first + colon) return std::nullopt;
  std::string rest = bus_id.substr(colon + 1);
  std::transform(rest.begin(), rest.end(), rest.begin(), [](unsigned char c) { return std::tolower(c); });
  if (rest.empty() || rest.find('/') != std::string::npos) return std::nullopt;

  std::ifstream in(fmt::format("{}/{:04x}:{}/class", devices_dir, domain, rest));
  std::string text;
  if (!(in >> text)) return std::nullopt;
  if (text.starts_with("0x") || text.starts_with("0X")) text.erase(0, 2);
  uint32_t value = 0;
  const auto [p, e] = std::from_chars(text.data(), text.data() + text.size(), value, 16);
  if (e != std::errc() || p != text.data() + text.size() || text.empty()) return std::nullopt;
  return value;
}

}  // namespace kgpu::labels
