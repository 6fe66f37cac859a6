// NVIDIA mig-parted's config file (`version: v1`, `mig-configs`), the default config names its MIG
// Manager ships, and the choice of each GPU's target layout under one named config
// (docs/mig.md). The rules of mig-parted's spec v1:
//
// - top level: `version` (exactly "v1") and `mig-configs` (name -> a non-empty list); nothing else;
// - an entry: `devices` ("all" or a list of GPU indices, required), `mig-enabled` (required bool),
//   `mig-devices` (profile -> count; required when enabled, empty when not), `device-filter`
//   (optional; a PCI id "0x233010DE" = device 0x2330, vendor 0x10DE, or a list of them);
// - GPUs no entry of the chosen config names are left untouched; when entries overlap, the last
//   one that names a GPU decides.
//
// Errors name "<source>:<line>: <field>". Bounded like every kgpu YAML reader (1 MiB, depth,
// aliases); at most 1,024 configs, 64 entries each, 7 instances per profile.
// Thread safety: plain values and functions.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/error.h"
#include "gpu/mig_manage.h"

namespace kgpu::gpu::mig {

struct ConfigEntry {
  std::optional<std::vector<unsigned>> devices;  // nullopt: all
  std::vector<uint32_t> device_filter;           // NVML pciDeviceId form (device << 16 | vendor); empty: any
  bool enabled = false;
  std::vector<std::pair<std::string, unsigned>> profiles;  // mig-devices, in file order
  int line = 0;
};

struct ConfigFile {
  std::string source;
  std::map<std::string, std::vector<ConfigEntry>> configs;
};

Result<ConfigFile> parse_config(std::string_view text, const std::string& source);
// parse_config of the file at `path` (at most 1 MiB).
Result<ConfigFile> load_config_file(const std::string& path);

// The config as mig-parted writes it (`version: v1`, the names sorted).
std::string format_config(const ConfigFile& file);

// NVIDIA's default names for a GPU offering `offers`: all-disabled, all-enabled (MIG on, no
// instances), all-<profile> for every profile (as many as fit; '+' becomes '.' in the name:
// all-1g.10gb.me), and all-balanced (2 x 1g, 1 x 2g, 1 x 3g, the smallest memory of each size);
// every entry `devices: all`. Empty offers (no MIG): all-disabled alone.
ConfigFile default_configs(const std::vector<Offer>& offers);

// A GPU of the node: index and NVML's pciDeviceId (device << 16 | vendor).
struct GpuId {
  unsigned index = 0;
  uint32_t pci_id = 0;
};

// One GPU's target under a config.
struct Target {
  unsigned index = 0;
  bool enabled = false;
  std::vector<std::string> profiles;  // each instance (counts expanded), sorted
  int line = 0;                       // the entry's line
};

// The targets of config `name` for `gpus`, by index; GPUs no entry names are not listed. Errors:
// an unknown name (naming the known ones), a device index the node does not have.
Result<std::vector<Target>> select(const ConfigFile& file, const std::string& name, const std::vector<GpuId>& gpus);

// What applying targets did (or, in a dry run, would do) to one GPU.
struct Change {
  unsigned index = 0;
  bool changed = false;  // its layout differed from the target
  std::string before, after;  // "MIG off", "MIG on: 1g.10gb, 1g.10gb, 2g.20gb, 3g.40gb"
  std::string error;          // "" when applied (or nothing to do)
};

// "MIG off" / "MIG on: <profiles>" / "MIG on (pending off)".
std::string describe(const Layout& l);

// Applies `targets` GPU by GPU: a GPU whose layout already serves its target is not touched (so
// applying the same config again changes nothing); a changed GPU gets its mode (with a reset
// through NVML when the change waits for one) and then its instances (mig_manage.h's rollback on
// failure), and is read back to verify. A target that cannot be placed, or a profile the GPU does
// not offer, fails that GPU before anything on it changes. With `dry_run` nothing changes.
// Returns one Change per target, in order; the call fails only when NVML cannot be read.
Result<std::vector<Change>> apply(const NodeGpus& node, const std::vector<Target>& targets, bool dry_run = false);

// The node's layout as a config named `name` (mig-parted's export), one entry per GPU.
Result<ConfigFile> export_layout(const NodeGpus& node, const std::string& name = "current");

}  // namespace kgpu::gpu::mig
