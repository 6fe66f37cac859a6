#include "gpu/mig_manage.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <functional>

#include "gpu/nvml/abi.h"
#include "gpu/nvml/library.h"

namespace kgpu::gpu::mig {

namespace {

using namespace kgpu::nvml;

constexpr unsigned kMaxInstances = 8;
constexpr size_t kMaxOrders = 5040;  // 7! orderings of seven instances

// The compute-instance profile index spanning `compute_slices` (NVML_COMPUTE_INSTANCE_PROFILE_*).
unsigned full_ci_profile(unsigned compute_slices) {
  switch (compute_slices) {
    case 1:
      return kComputeInstanceProfile1Slice;
    case 2:
      return kComputeInstanceProfile2Slice;
    case 3:
      return kComputeInstanceProfile3Slice;
    case 4:
      return kComputeInstanceProfile4Slice;
    case 6:
      return kComputeInstanceProfile6Slice;
    case 8:
      return kComputeInstanceProfile8Slice;
    default:
      return kComputeInstanceProfile7Slice;
  }
}

std::string describe(const Library& lib, Return r) { return lib.error_string(r); }

// The first GPU instance of the GPU (any profile), or nullopt when none is left.
Result<std::optional<GpuInstance>> first_instance(const Library& lib, Device dev) {
  for (const auto& s : shapes()) {
    GpuInstance gis[kMaxInstances] = {};
    unsigned count = 0;
    const Return r = lib.call(lib.symbols().nvmlDeviceGetGpuInstances, dev, s.profile_id, gis, &count);
    if (r == kErrorNotSupported || r == kErrorInvalidArgument) continue;  // a profile the model lacks
    if (r != kSuccess) return fail(ErrorCode::kUnavailable, "listing {} instances: {}", s.key, describe(lib, r));
    if (count > 0) return std::optional<GpuInstance>(gis[0]);
  }
  return std::optional<GpuInstance>();
}

// Destroys GPU instance `gi` (id `gi_id` of `shape`, null when unknown, on GPU `index`): its
// compute instances first. `where` (" (3g.40gb at 2)" or "") goes into the errors, which say when
// a process holds the instance.
Result<void> destroy_gi(const Library& lib, GpuInstance gi, const Shape* shape, unsigned index, unsigned gi_id,
                        const std::string& where) {
  const auto& sym = lib.symbols();
  const auto in_use = [](Return r) { return r == kErrorInUse ? " (a process is still on it)" : ""; };
  ComputeInstance cis[kMaxInstances] = {};
  unsigned count = 0;
  Return r = lib.call(sym.nvmlGpuInstanceGetComputeInstances, gi, full_ci_profile(shape ? shape->compute_slices : 7), cis,
                      &count);
  for (unsigned k = 0; r == kSuccess && k < count && k < kMaxInstances; ++k) {
    r = lib.call(sym.nvmlComputeInstanceDestroy, cis[k]);
    if (r != kSuccess) {
      return fail(ErrorCode::kUnavailable, "GPU {}: destroying the compute instance of GPU instance {}{}: {}{}", index,
                  gi_id, where, describe(lib, r), in_use(r));
    }
  }
  r = lib.call(sym.nvmlGpuInstanceDestroy, gi);
  if (r != kSuccess) {
    return fail(ErrorCode::kUnavailable, "GPU {}: destroying GPU instance {}{}: {}{}", index, gi_id, where,
                describe(lib, r), in_use(r));
  }
  return {};
}

Result<void> destroy_all(const Library& lib, Device dev, unsigned index) {
  const auto& sym = lib.symbols();
  for (unsigned guard = 0; guard < 2 * kMaxInstances; ++guard) {
    auto gi = first_instance(lib, dev);
    if (!gi) return std::unexpected(gi.error().wrap(fmt::format("GPU {}", index)));
    if (!*gi) return {};
    GpuInstanceInfo info{};
    Return r = lib.call(sym.nvmlGpuInstanceGetInfo, **gi, &info);
    if (r != kSuccess) return fail(ErrorCode::kUnavailable, "GPU {}: reading a GPU instance: {}", index, describe(lib, r));
    if (auto ok = destroy_gi(lib, **gi, shape_by_profile_id(info.profileId), index, info.id, ""); !ok) return ok;
  }
  return fail(ErrorCode::kInternal, "GPU {}: GPU instances remain after destroying {}", index, 2 * kMaxInstances);
}

Result<void> create_all(const Library& lib, Device dev, unsigned index,
                        const std::vector<std::pair<const Offer*, unsigned>>& want) {
  const auto& sym = lib.symbols();
  for (size_t k = 0; k < want.size(); ++k) {
    const auto& [offer, start] = want[k];
    const GpuInstancePlacement placement{start, offer->shape->memory_slices};
    GpuInstance gi = nullptr;
    Return r = lib.call(sym.nvmlDeviceCreateGpuInstanceWithPlacement, dev, offer->shape->profile_id, &placement, &gi);
    if (r != kSuccess) {
      return fail(ErrorCode::kUnavailable, "GPU {}: creating instance {} ({} at memory slice {}): {}", index, k,
                  offer->name, start, describe(lib, r));
    }
    ComputeInstance ci = nullptr;
    r = lib.call(sym.nvmlGpuInstanceCreateComputeInstance, gi, full_ci_profile(offer->shape->compute_slices), &ci);
    if (r != kSuccess) {
      return fail(ErrorCode::kUnavailable, "GPU {}: creating the compute instance of instance {} ({}): {}", index, k,
                  offer->name, describe(lib, r));
    }
  }
  return {};
}

}  // namespace

std::vector<std::string> Layout::profiles() const {
  std::vector<std::string> out;
  for (const auto& i : instances) out.push_back(i.profile);
  std::sort(out.begin(), out.end());
  return out;
}

Result<std::vector<Offer>> offers(const NodeGpus& node, unsigned index) {
  const auto& lib = node.library();
  auto dev = node.handle(index);
  if (!dev) return std::unexpected(dev.error());
  unsigned current = 0, pending = 0;
  const Return mode = lib.call(lib.symbols().nvmlDeviceGetMigMode, *dev, &current, &pending);
  if (mode == kErrorNotSupported || mode == kErrorFunctionNotFound) return std::vector<Offer>{};
  std::vector<Offer> out;
  for (const auto& s : shapes()) {
    GpuInstanceProfileInfo info{};
    if (lib.call(lib.symbols().nvmlDeviceGetGpuInstanceProfileInfo, *dev, s.nvml_profile_index, &info) != kSuccess) continue;
    out.push_back(Offer{&s, profile_name(s.compute_slices, info.memorySizeMB, s.media_engines), info.memorySizeMB,
                        info.multiprocessorCount, info.copyEngineCount, info.decoderCount, info.encoderCount,
                        info.jpegCount, info.ofaCount});
  }
  return out;
}

Result<Layout> read_layout(const NodeGpus& node, unsigned index) {
  const auto& lib = node.library();
  const auto& sym = lib.symbols();
  auto dev = node.handle(index);
  if (!dev) return std::unexpected(dev.error());
  unsigned current = 0, pending = 0;
  Return r = lib.call(sym.nvmlDeviceGetMigMode, *dev, &current, &pending);
  if (r != kSuccess) return fail(ErrorCode::kNotSupported, "GPU {}: MIG mode: {}", index, describe(lib, r));
  Layout l;
  l.enabled = current == kMigEnable;
  l.pending = pending == kMigEnable;
  if (!l.enabled) return l;
  auto offered = offers(node, index);
  if (!offered) return std::unexpected(offered.error());
  for (const auto& o : *offered) {
    GpuInstance gis[kMaxInstances] = {};
    unsigned count = 0;
    r = lib.call(sym.nvmlDeviceGetGpuInstances, *dev, o.shape->profile_id, gis, &count);
    if (r != kSuccess) continue;
    for (unsigned k = 0; k < count && k < kMaxInstances; ++k) {
      GpuInstanceInfo info{};
      if (lib.call(sym.nvmlGpuInstanceGetInfo, gis[k], &info) != kSuccess) continue;
      ComputeInstance cis[kMaxInstances] = {};
      unsigned ncis = 0;
      const bool ci = lib.call(sym.nvmlGpuInstanceGetComputeInstances, gis[k], full_ci_profile(o.shape->compute_slices),
                               cis, &ncis) == kSuccess &&
                      ncis > 0;
      l.instances.push_back(Instance{o.shape, o.name, info.id, info.placement.start, ci});
    }
  }
  std::sort(l.instances.begin(), l.instances.end(), [](const Instance& a, const Instance& b) { return a.start < b.start; });
  return l;
}

Result<bool> set_mode(const NodeGpus& node, unsigned index, bool enable) {
  const auto& lib = node.library();
  auto dev = node.handle(index);
  if (!dev) return std::unexpected(dev.error());
  Return activation = kSuccess;
  const Return r = lib.call(lib.symbols().nvmlDeviceSetMigMode, *dev, enable ? kMigEnable : kMigDisable, &activation);
  if (r != kSuccess) {
    return fail(r == kErrorNotSupported ? ErrorCode::kNotSupported : ErrorCode::kUnavailable,
                "GPU {}: setting MIG mode {}: {}{}", index, enable ? "on" : "off", describe(lib, r),
                r == kErrorInUse ? " (destroy its MIG instances first)" : "");
  }
  return activation != kSuccess;
}

Result<std::vector<std::pair<const Offer*, unsigned>>> plan(const std::vector<Offer>& offered,
                                                           const std::vector<std::string>& profiles) {
  std::vector<const Offer*> want;
  for (const auto& p : profiles) {
    const auto it = std::find_if(offered.begin(), offered.end(), [&](const Offer& o) { return o.name == p; });
    if (it == offered.end()) {
      std::vector<std::string> names;
      for (const auto& o : offered) names.push_back(o.name);
      if (std::count(p.begin(), p.end(), '.') >= 2 && p.find('c') != std::string::npos && p.find('c') < p.find('.')) {
        return fail(ErrorCode::kInvalidArgument, "profile {}: compute-instance profiles are not supported", p);
      }
      return fail(ErrorCode::kInvalidArgument, "profile {} is not offered by this GPU (offered: {})", p,
                  names.empty() ? "none: MIG is not supported" : fmt::format("{}", fmt::join(names, ", ")));
    }
    want.push_back(&*it);
  }
  if (want.size() > kComputeSlices) {
    return fail(ErrorCode::kInvalidArgument, "{} instances: a GPU holds at most {}", want.size(), kComputeSlices);
  }
  // Largest first, then every other order.
  std::sort(want.begin(), want.end(), [](const Offer* a, const Offer* b) {
    return std::tie(a->shape->compute_slices, a->shape->memory_slices, a->name) >
           std::tie(b->shape->compute_slices, b->shape->memory_slices, b->name);
  });
  std::string first_error;
  auto order = want;
  std::sort(order.begin(), order.end(), std::less<const Offer*>());
  for (size_t attempt = 0; attempt <= kMaxOrders; ++attempt) {
    const auto& try_order = attempt == 0 ? want : order;
    std::vector<std::pair<const Shape*, std::optional<unsigned>>> requests;
    for (const auto* o : try_order) requests.emplace_back(o->shape, std::nullopt);
    auto placed = place(requests);
    if (placed) {
      std::vector<std::pair<const Offer*, unsigned>> out;
      for (size_t k = 0; k < try_order.size(); ++k) out.emplace_back(try_order[k], (*placed)[k].start);
      return out;
    }
    if (attempt == 0) first_error = placed.error().message;
    if (attempt > 0 && !std::next_permutation(order.begin(), order.end(), std::less<const Offer*>())) break;
  }
  return fail(ErrorCode::kInvalidArgument, "{} do not fit one GPU in any order ({})", fmt::join(profiles, ", "),
              first_error);
}

namespace {

// Destroys the instances of `index` that `keep` does not list (by shape and start) and creates
// those of `keep` that are missing: the rollback to a layout after a failure midway.
Result<void> restore(const NodeGpus& node, unsigned index, Device dev,
                     const std::vector<std::pair<const Offer*, unsigned>>& keep) {
  const auto& lib = node.library();
  const auto& sym = lib.symbols();
  auto now = read_layout(node, index);
  if (!now) return std::unexpected(now.error());
  auto kept = [&](const Instance& i) {
    return std::any_of(keep.begin(), keep.end(), [&](const auto& k) { return k.first->shape == i.shape && k.second == i.start; });
  };
  for (const auto& i : now->instances) {
    if (kept(i)) continue;
    for (const auto& s : shapes()) {
      if (&s != i.shape) continue;
      GpuInstance gis[kMaxInstances] = {};
      unsigned count = 0;
      if (lib.call(sym.nvmlDeviceGetGpuInstances, dev, s.profile_id, gis, &count) != kSuccess) continue;
      for (unsigned k = 0; k < count; ++k) {
        GpuInstanceInfo info{};
        if (lib.call(sym.nvmlGpuInstanceGetInfo, gis[k], &info) != kSuccess || info.id != i.gpu_instance_id) continue;
        if (auto ok = destroy_gi(lib, gis[k], &s, index, info.id, ""); !ok) return ok;
      }
    }
  }
  std::vector<std::pair<const Offer*, unsigned>> missing;
  for (const auto& k : keep) {
    const bool present = std::any_of(now->instances.begin(), now->instances.end(),
                                     [&](const Instance& i) { return i.shape == k.first->shape && i.start == k.second; });
    if (!present) missing.push_back(k);
  }
  return create_all(lib, dev, index, missing);
}

}  // namespace

Result<void> replace_instances(const NodeGpus& node, unsigned index,
                               const std::vector<std::pair<const Offer*, unsigned>>& want) {
  const auto& lib = node.library();
  auto dev = node.handle(index);
  if (!dev) return std::unexpected(dev.error());
  auto before = read_layout(node, index);
  if (!before) return std::unexpected(before.error());
  if (!before->enabled) return fail(ErrorCode::kInvalidArgument, "GPU {}: MIG is off", index);
  // Processes on the GPU: nothing is touched (a reflash would fail halfway on their instance).
  if (auto procs = node.processes(index); procs && !procs->empty()) {
    std::vector<std::string> pids;
    for (const auto& p : *procs) pids.push_back(std::to_string(p.pid));
    return fail(ErrorCode::kUnavailable, "GPU {}: {} process(es) are still on it (pids {}): nothing changed", index,
                procs->size(), fmt::join(pids, ", "));
  }
  auto offered = offers(node, index);
  if (!offered) return std::unexpected(offered.error());
  std::vector<std::pair<const Offer*, unsigned>> previous;
  for (const auto& i : before->instances) {
    for (const auto& o : *offered) {
      if (o.shape == i.shape) previous.emplace_back(&o, i.start);
    }
  }
  auto step = destroy_all(lib, *dev, index);
  if (step) step = create_all(lib, *dev, index, want);
  if (step) return {};
  // Roll back: what was created goes, the previous layout comes back.
  auto back = restore(node, index, *dev, previous);
  if (back) {
    return fail(step.error().code, "{}; the previous layout ({}) was restored", step.error().message,
                before->profiles().empty() ? "no instances" : fmt::format("{}", fmt::join(before->profiles(), ", ")));
  }
  return fail(step.error().code, "{}; restoring the previous layout failed too: {}", step.error().message,
              back.error().message);
}

namespace {

// The GPU instance of `shape` at memory slice `start`, or nullopt.
Result<std::optional<std::pair<GpuInstance, unsigned>>> instance_at(const Library& lib, Device dev, unsigned index,
                                                                   const Shape& shape, unsigned start) {
  GpuInstance gis[kMaxInstances] = {};
  unsigned count = 0;
  const Return r = lib.call(lib.symbols().nvmlDeviceGetGpuInstances, dev, shape.profile_id, gis, &count);
  if (r == kErrorNotSupported || r == kErrorInvalidArgument) return std::optional<std::pair<GpuInstance, unsigned>>();
  if (r != kSuccess) return fail(ErrorCode::kUnavailable, "GPU {}: listing {} instances: {}", index, shape.key, describe(lib, r));
  for (unsigned k = 0; k < count && k < kMaxInstances; ++k) {
    GpuInstanceInfo info{};
    if (lib.call(lib.symbols().nvmlGpuInstanceGetInfo, gis[k], &info) != kSuccess) continue;
    if (info.placement.start == start) return std::optional(std::make_pair(gis[k], info.id));
  }
  return std::optional<std::pair<GpuInstance, unsigned>>();
}

unsigned compute_instances(const Library& lib, GpuInstance gi, const Shape& shape, ComputeInstance* cis) {
  unsigned count = 0;
  if (lib.call(lib.symbols().nvmlGpuInstanceGetComputeInstances, gi, full_ci_profile(shape.compute_slices), cis,
               &count) != kSuccess) {
    return 0;
  }
  return std::min(count, kMaxInstances);
}

}  // namespace

Result<Instance> create_instance(const NodeGpus& node, unsigned index, const Offer& offer, unsigned start) {
  const auto& lib = node.library();
  const auto& sym = lib.symbols();
  auto dev = node.handle(index);
  if (!dev) return std::unexpected(dev.error());
  const Shape& shape = *offer.shape;
  const std::string what = fmt::format("GPU {}: {} at memory slice {}", index, offer.name, start);
  auto found = instance_at(lib, *dev, index, shape, start);
  if (!found) return std::unexpected(found.error());
  GpuInstance gi = nullptr;
  unsigned gi_id = 0;
  bool created = false;
  if (*found) {
    std::tie(gi, gi_id) = **found;
  } else {
    const GpuInstancePlacement placement{start, shape.memory_slices};
    const Return r = lib.call(sym.nvmlDeviceCreateGpuInstanceWithPlacement, *dev, shape.profile_id, &placement, &gi);
    if (r != kSuccess) {
      return fail(ErrorCode::kUnavailable,
                  "{}: creating the GPU instance: {}{}", what, describe(lib, r),
                  r == kErrorInsufficientResources ? " (another instance overlaps that placement)" : "");
    }
    GpuInstanceInfo info{};
    if (lib.call(sym.nvmlGpuInstanceGetInfo, gi, &info) == kSuccess) gi_id = info.id;
    created = true;
  }
  ComputeInstance cis[kMaxInstances] = {};
  if (compute_instances(lib, gi, shape, cis) == 0) {
    ComputeInstance ci = nullptr;
    const Return r = lib.call(sym.nvmlGpuInstanceCreateComputeInstance, gi, full_ci_profile(shape.compute_slices), &ci);
    if (r != kSuccess) {
      if (created) (void)lib.call(sym.nvmlGpuInstanceDestroy, gi);
      return fail(ErrorCode::kUnavailable, "{}: creating the compute instance: {}{}", what, describe(lib, r),
                  created ? "; the GPU instance was destroyed again" : "");
    }
  }
  return Instance{&shape, offer.name, gi_id, start, true};
}

Result<void> destroy_instance(const NodeGpus& node, unsigned index, const Shape& shape, unsigned start) {
  const auto& lib = node.library();
  auto dev = node.handle(index);
  if (!dev) return std::unexpected(dev.error());
  auto found = instance_at(lib, *dev, index, shape, start);
  if (!found) return std::unexpected(found.error());
  if (!*found) return {};
  const auto [gi, gi_id] = **found;
  return destroy_gi(lib, gi, &shape, index, gi_id, fmt::format(" ({} at {})", shape.key, start));
}

}  // namespace kgpu::gpu::mig
