// MIG management through NVML: a GPU's layout (mode, GPU instances and their placements, compute
// instances), the profiles its model offers, the mode change, and replacing a GPU's instances with
// a rollback when a step fails. Used by `kgpu mig` (cli/mig_cmd.cc) and the agent's MIG manager.
//
// Only compute instances that span their GPU instance are made (the `<g>g.<mem>gb` profiles of
// mig-parted's configs); compute-instance profiles (`<c>c.<g>g.<mem>gb`) are refused by name.
//
// Thread safety: plain functions over a NodeGpus, which serialises nothing itself: callers must not
// change one GPU's layout from two threads at once.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/error.h"
#include "gpu/mig.h"
#include "gpu/node.h"

namespace kgpu::gpu::mig {

struct Instance {
  const Shape* shape = nullptr;
  std::string profile;  // "3g.40gb"
  unsigned gpu_instance_id = 0;
  unsigned start = 0;
  bool compute_instance = false;  // a compute instance spans it (the MIG device exists)
};

struct Layout {
  bool enabled = false, pending = false;
  std::vector<Instance> instances;  // by start
  // The profiles, sorted ("1g.10gb", "1g.10gb", "3g.40gb"): two layouts with the same profiles serve the same.
  std::vector<std::string> profiles() const;
};

// The profiles GPU `index` offers; empty (no error) for a model without MIG.
Result<std::vector<Offer>> offers(const NodeGpus& node, unsigned index);
// kNotSupported for a model without MIG.
Result<Layout> read_layout(const NodeGpus& node, unsigned index);

// Sets the MIG mode. Returns true when the change waits for a GPU reset (processes held the GPU).
Result<bool> set_mode(const NodeGpus& node, unsigned index, bool enable);

// Placements for `profiles` (names from `offers`): tries the largest first, then other orders
// (as mig-parted does), and says why none fits.
Result<std::vector<std::pair<const Offer*, unsigned>>> plan(const std::vector<Offer>& offers,
                                                           const std::vector<std::string>& profiles);

// Replaces GPU `index`'s instances with `want` (MIG must be on): destroys every compute and GPU
// instance, then creates each GPU instance at its start with its compute instance. When a step
// fails, what was created is destroyed and the previous layout created again; the error names the
// failed step and says whether the previous layout was restored.
Result<void> replace_instances(const NodeGpus& node, unsigned index, const std::vector<std::pair<const Offer*, unsigned>>& want);

// One instance at a time (dynamic MIG: a DRA claim's partition). create_instance makes a GPU
// instance of `offer` at memory slice `start` with a compute instance spanning it; an instance of
// that profile already there (a create repeated after a crash) is taken as it is, given its compute
// instance when it lacks one. A GPU instance created here whose compute instance then fails is
// destroyed again. destroy_instance removes the instance of `shape` at `start` (its compute
// instances first); none there is a success. MIG must be on. Errors name the GPU, the profile and
// the placement, and say when a process holds the instance.
Result<Instance> create_instance(const NodeGpus& node, unsigned index, const Offer& offer, unsigned start);
Result<void> destroy_instance(const NodeGpus& node, unsigned index, const Shape& shape, unsigned start);

}  // namespace kgpu::gpu::mig
