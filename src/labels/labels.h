// Node labels compatible with NVIDIA's GPU Feature Discovery (GFD), and the NFD features file.
//
// gfd_labels() turns an inventory into the `nvidia.com/*` labels GFD publishes (see
// docs/labels.md for the list and the kgpu extensions under `kgpu.io/`). It is a pure function
// of its arguments: the caller reads the machine type and PCI classes and supplies the time.
// Every key and value it returns is valid for Kubernetes; anything that had to be shortened or
// cleaned up to get there is reported as a warning.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.h"
#include "gpu/types.h"

namespace kgpu::labels {

// How the whole-GPU resource (`nvidia.com/gpu`) is shared; computed by the caller from its plan.
// With migStrategy single this describes the MIG devices, which are then `nvidia.com/gpu`.
struct LabelSharing {
  std::string strategy = "none";  // "none" | "time-slicing" | "mps"
  int replicas = 1;               // replicas of nvidia.com/gpu (>= 1)
  bool renamed = false;           // advertised as nvidia.com/gpu.shared (renameByDefault): no -SHARED suffix
  // Extension: per-GPU replica counts (GPU index -> replicas) where they differ between GPUs; a GPU
  // not listed uses `replicas`. Empty = every GPU uses `replicas`.
  std::map<unsigned, int> replicas_by_gpu;
  // migStrategy mixed: time-sliced MIG profiles (profile as in the resource name, "1g.10gb" or
  // "1g.10gb.me" -> replicas), labelled as GFD does: nvidia.com/mig-<profile>.replicas, a -SHARED
  // product (unless renamed) and sharing-strategy time-slicing.
  std::map<std::string, int> mig_replicas;
};

struct LabelOptions {
  std::string mig_strategy = "none";   // none | single | mixed
  std::optional<std::string> machine;  // /sys/class/dmi/id/product_name contents; nullopt = "unknown"
  std::optional<int64_t> timestamp;    // unix seconds; nullopt = no gfd.timestamp (noTimestamp)
  // GPU index -> PCI class code (0x030200 = 3D controller), as read_pci_class() returns it; for
  // nvidia.com/gpu.mode. A GPU not listed has an unknown class.
  std::map<unsigned, uint32_t> pci_class;
};

using Labels = std::map<std::string, std::string>;

// The GFD label set for `inv`. Lost or unreadable GPUs are left out (and warned about). On a node
// with several GPU models the `nvidia.com/gpu.*` labels describe the model with the most GPUs (tie:
// the model of the lowest GPU index); `kgpu.io/gpu-model.<product>` counts every model. Problems
// that did not stop labelling (invalid MIG layouts, shortened values, unknown versions) are
// appended to `warnings` when it is not null, one line each.
Labels gfd_labels(const gpu::Inventory& inv, const LabelSharing& sharing, const LabelOptions& opt,
                  std::vector<std::string>* warnings = nullptr);

// A valid Kubernetes label value made from `raw`, following GFD's product-name rule: characters
// outside [A-Za-z0-9-_. ] are removed, each run of whitespace becomes one '-'; then leading and
// trailing characters that are not alphanumeric are removed and the result is cut to 63 characters
// (and trimmed again). May be empty.
std::string sanitize_label_value(std::string_view raw);

// Kubernetes label value: empty, or at most 63 characters of [A-Za-z0-9-_.] beginning and ending
// alphanumeric.
bool is_valid_label_value(std::string_view value);
// Kubernetes label key: an optional DNS-subdomain prefix (at most 253 characters) and '/', then a
// name that is a non-empty valid label value.
bool is_valid_label_key(std::string_view key);

// "key=value\n" per label, sorted by key (the NFD local-source format).
std::string render_features_file(const Labels& labels);

// Replaces `path` atomically with render_features_file(labels): creates the directory, writes a
// hidden temporary file (".<name>.tmp.XXXXXX", which NFD skips) in the same directory, fsyncs it,
// renames it over `path` and fsyncs the directory. On failure `path` is left as it was, no
// temporary file remains, and the error names the path and the system's reason. A file that holds
// these labels already is left untouched (not even its mtime changes).
Result<void> write_features_file(const std::string& path, const Labels& labels);

// The trimmed contents of the DMI product-name file; nullopt when it cannot be read or is empty.
std::optional<std::string> read_machine_type(const std::string& path = "/sys/class/dmi/id/product_name");

// The PCI class code of the device with NVML bus id `bus_id` ("00000000:18:00.0"), read from
// `<devices_dir>/0000:18:00.0/class`; nullopt when the id or the file cannot be read.
std::optional<uint32_t> read_pci_class(const std::string& bus_id,
                                       const std::string& devices_dir = "/sys/bus/pci/devices");

// Engines of one MIG device, as NVML reports them in nvmlDeviceAttributes_t (shared*Count).
struct MigEngines {
  unsigned copy = 0, decoder = 0, encoder = 0, jpeg = 0, ofa = 0;
  bool operator==(const MigEngines&) const = default;
};

// Engine counts of `device` on a GPU named `gpu_name`, from NVIDIA's published MIG profile tables
// (A100, H100, H200; see labels.cc). nullopt when the model or the GPU-instance shape is not in
// those tables, or the device is a compute instance smaller than its GPU instance.
std::optional<MigEngines> mig_engines(std::string_view gpu_name, const gpu::MigDevice& device);

}  // namespace kgpu::labels
