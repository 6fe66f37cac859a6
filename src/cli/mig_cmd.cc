#include "cli/mig_cmd.h"

#include <fmt/format.h>

#include <iostream>
#include <map>
#include <optional>

#include "apiclient/client.h"
#include "apiclient/config.h"
#include "gpu/mig_config.h"
#include "gpu/mig_plan.h"
#include "gpu/node.h"
#include "gpu/nvml/library.h"
#include "scheduler/mig_planning.h"

namespace kgpu::cli {

namespace {

namespace mig = gpu::mig;

struct MigFlags {
  const std::string* nvml_library = nullptr;
  std::string file, config;
  bool dry_run = false;
  std::string kubeconfig, output = "text";
  bool label_nodes = false;
  CLI::App *apply = nullptr, *assert_cmd = nullptr, *export_cmd = nullptr, *defaults = nullptr, *plan = nullptr;
};

MigFlags& mig_flags() {
  static MigFlags f;
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

Result<mig::ConfigFile> load(const MigFlags& fl, const NodeFacts& f) {
  if (fl.file.empty()) return mig::default_configs(f.offers);
  return mig::load_config_file(fl.file);
}

int run_plan(const MigFlags& fl) {
  kube::LoadOptions lo;
  lo.kubeconfig = fl.kubeconfig;
  auto client = kube::Client::connect(lo, "kgpu-mig-plan");
  if (!client) {
    std::cerr << "kgpu mig plan: " << client.error().message << "\n";
    return 2;
  }
  auto nodes = (*client)->list_all(kube::resources::kNodes, "", {});
  auto pods = (*client)->list_all(kube::resources::kPods, "", {});
  if (!nodes || !pods) {
    std::cerr << "kgpu mig plan: reading the cluster: " << (nodes ? pods.error().text() : nodes.error().text()) << "\n";
    return 1;
  }
  std::optional<mig::ConfigFile> file;
  if (!fl.file.empty()) {
    auto parsed = mig::load_config_file(fl.file);
    if (!parsed) {
      std::cerr << "kgpu mig plan: " << parsed.error().message << "\n";
      return 2;
    }
    file = std::move(*parsed);
  }
  std::vector<const nlohmann::json*> node_ptrs, pod_ptrs;
  for (const auto& n : *nodes) node_ptrs.push_back(&n);
  for (const auto& p : *pods) pod_ptrs.push_back(&p);
  const mig::ClusterPlan plan = mig::plan_cluster(node_ptrs, pod_ptrs, file ? &*file : nullptr);
  const auto& choices = plan.choices;
  const auto& skipped = plan.skipped;
  const auto& pending = plan.unserved;
  if (fl.output == "json") {
    nlohmann::json j = nlohmann::json::array();
    for (const auto& c : choices) {
      j.push_back({{"node", c.node}, {"config", c.config}, {"change", c.change}, {"evictions", c.evictions},
                   {"served", c.served}, {"strandedSlices", c.stranded_slices}, {"why", c.why}});
    }
    std::cout << nlohmann::json{{"nodes", j}, {"unserved", pending.size()}, {"skipped", skipped}}.dump(2) << "\n";
  } else {
    for (const auto& c : choices) {
      std::cout << fmt::format("{}: {}{}\n    {}\n", c.node, c.config, c.change ? " (change)" : " (keep)", c.why);
    }
    for (const auto& s : skipped) std::cout << "skipped: " << s << "\n";
    std::cout << fmt::format("{} pending MIG request(s) no plan serves\n", pending.size());
  }
  if (!fl.label_nodes) return 0;
  int status = 0;
  for (const auto& c : choices) {
    if (!c.change || c.config.empty()) continue;
    auto r = scheduler::ask_mig_config(**client, c.node, c.config);
    if (!r) {
      std::cerr << "kgpu mig plan: labelling " << c.node << ": " << r.error().text() << "\n";
      status = 1;
    }
  }
  return status;
}

}  // namespace

CLI::App* add_mig_command(CLI::App& app, const std::string& nvml_library) {
  auto& f = mig_flags();
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
  f.plan = cmd->add_subcommand("plan", "Choose each MIG node's config from the pending and running MIG requests");
  f.plan->add_option("-f,--config-file", f.file, "A mig-parted v1 config file (default: NVIDIA's default names per GPU model)");
  f.plan->add_option("--kubeconfig", f.kubeconfig, "Kubeconfig (default: $KUBECONFIG, ~/.kube/config, in a pod its account)");
  f.plan->add_option("-o,--output", f.output, "text or json")->check(CLI::IsMember({"text", "json"}))->capture_default_str();
  f.plan->add_flag("--apply", f.label_nodes,
                   "Set nvidia.com/mig.config on the nodes whose config changes (and clear their state label, so "
                   "that waiting for success sees this change)");
  return cmd;
}

int run_mig_command() {
  auto& fl = mig_flags();
  if (fl.plan->parsed()) return run_plan(fl);
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
