#include "cli/mig_cmd.h"

#include <fmt/format.h>

#include <iostream>

#include "common/files.h"
#include "gpu/mig_config.h"
#include "gpu/node.h"
#include "gpu/nvml/library.h"

namespace kgpu::cli {

namespace {

namespace mig = gpu::mig;

struct Flags {
  const std::string* nvml_library = nullptr;
  std::string file, config;
  bool dry_run = false;
  CLI::App *apply = nullptr, *assert_cmd = nullptr, *export_cmd = nullptr, *defaults = nullptr;
};

Flags& flags() {
  static Flags f;
  return f;
}

// The node's GPUs (index and PCI id) and the offers of the first MIG-capable one.
struct NodeFacts {
  std::vector<mig::GpuId> gpus;
  std::vector<mig::Offer> offers;
};

Result<NodeFacts> facts(const gpu::NodeGpus& node) {
  auto inv = node.inventory();
  if (!inv) return std::unexpected(inv.error());
  NodeFacts f;
  for (const auto& g : inv->gpus) {
    f.gpus.push_back({g.index, g.pci.device_id << 16 | g.pci.vendor_id});
    if (f.offers.empty()) {
      if (auto o = mig::offers(node, g.index)) f.offers = std::move(*o);
    }
  }
  return f;
}

Result<mig::ConfigFile> load(const Flags& fl, const NodeFacts& f) {
  if (fl.file.empty()) return mig::default_configs(f.offers);
  auto text = read_file_limited(fl.file, 1 << 20);
  if (!text) return std::unexpected(text.error());
  return mig::parse_config(*text, fl.file);
}

}  // namespace

CLI::App* add_mig_command(CLI::App& app, const std::string& nvml_library) {
  auto& f = flags();
  f.nvml_library = &nvml_library;
  auto* cmd = app.add_subcommand("mig", "MIG layouts by name (NVIDIA mig-parted's config format): apply, assert, export");
  cmd->require_subcommand(1);
  auto config_flags = [&](CLI::App* c) {
    c->add_option("-f,--config-file", f.file, "A mig-parted v1 config file (default: the built-in default configs)")
        ->envname("MIG_PARTED_CONFIG_FILE");
    c->add_option("-c,--selected-config", f.config, "The config to apply (e.g. all-1g.10gb, all-balanced)")
        ->envname("MIG_PARTED_SELECTED_CONFIG")
        ->required();
  };
  f.apply = cmd->add_subcommand("apply", "Change the GPUs whose layout differs from the selected config");
  config_flags(f.apply);
  f.apply->add_flag("--dry-run", f.dry_run, "Say what would change, change nothing");
  f.assert_cmd = cmd->add_subcommand("assert", "Exit 1 when the selected config is not what the GPUs have");
  config_flags(f.assert_cmd);
  f.export_cmd = cmd->add_subcommand("export", "Print the GPUs' layout as a v1 config named current");
  f.defaults = cmd->add_subcommand("defaults", "Print NVIDIA's default config names for this node's GPUs");
  return cmd;
}

int run_mig_command() {
  auto& fl = flags();
  auto opened = gpu::NodeGpus::open(nvml::resolve_library_path(*fl.nvml_library));
  if (!opened) {
    std::cerr << "kgpu mig: NVML: " << opened.error().message << "\n";
    return 1;
  }
  const auto& node = **opened;
  auto f = facts(node);
  if (!f) {
    std::cerr << "kgpu mig: " << f.error().message << "\n";
    return 1;
  }
  if (fl.export_cmd->parsed()) {
    auto e = mig::export_layout(node);
    if (!e) {
      std::cerr << "kgpu mig export: " << e.error().message << "\n";
      return 1;
    }
    std::cout << mig::format_config(*e);
    return 0;
  }
  if (fl.defaults->parsed()) {
    std::cout << mig::format_config(mig::default_configs(f->offers));
    return 0;
  }
  auto file = load(fl, *f);
  if (!file) {
    std::cerr << "kgpu mig: " << file.error().message << "\n";
    return 2;
  }
  auto targets = mig::select(*file, fl.config, f->gpus);
  if (!targets) {
    std::cerr << "kgpu mig: " << targets.error().message << "\n";
    return 2;
  }
  const bool only_check = fl.assert_cmd->parsed();
  auto changes = mig::apply(node, *targets, only_check || fl.dry_run);
  if (!changes) {
    std::cerr << "kgpu mig: " << changes.error().message << "\n";
    return 1;
  }
  int status = 0;
  for (const auto& c : *changes) {
    if (!c.error.empty()) {
      std::cout << fmt::format("GPU {}: FAILED: {}\n", c.index, c.error);
      status = 1;
    } else if (!c.changed) {
      std::cout << fmt::format("GPU {}: {} (unchanged)\n", c.index, c.before);
    } else if (only_check) {
      std::cout << fmt::format("GPU {}: {}, config {} wants {}\n", c.index, c.before, fl.config, c.after);
      status = 1;
    } else {
      std::cout << fmt::format("GPU {}: {} -> {}{}\n", c.index, c.before, c.after, fl.dry_run ? " (dry run)" : "");
    }
  }
  if (only_check && status != 0) std::cout << "selected configuration not currently applied\n";
  return status;
}

}  // namespace kgpu::cli
