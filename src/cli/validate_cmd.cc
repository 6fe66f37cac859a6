#include "cli/validate_cmd.h"

#include <fmt/format.h>

#include <iostream>
#include <memory>

#include "agent/validate.h"
#include "apiclient/client.h"
#include "apiclient/config.h"
#include "common/log.h"

namespace kgpu::cli {

namespace {

struct ValidateFlags {
  const std::string* nvml_library = nullptr;
  agent::ValidateOptions o;
  std::string kubeconfig;
  long long timeout_s = 300;
  bool json = false, label = false;
};

ValidateFlags& validate_flags() {
  static ValidateFlags f;
  return f;
}

}  // namespace

CLI::App* add_validate_command(CLI::App& app, const std::string& nvml_library) {
  auto& f = validate_flags();
  f.nvml_library = &nvml_library;
  auto* cmd = app.add_subcommand(
      "validate", "Validate this node before its GPUs take work: driver, NVML, device plugin, CDI spec, a GPU Job");
  cmd->add_option("--dev-root", f.o.dev_root, "Root of /dev on the host")->capture_default_str();
  cmd->add_option("--device-plugin-dir", f.o.plugin_dir, "The kubelet's device-plugin directory (empty: skip)")
      ->capture_default_str();
  cmd->add_option("--cdi-root", f.o.cdi_root, "Where the agent writes the CDI spec (empty: skip)")->capture_default_str();
  cmd->add_option("--gpu", f.o.gpu, "Validate this GPU alone (index or UUID)");
  cmd->add_option("--kubeconfig", f.kubeconfig, "Kubeconfig for the workload step and the labels (in a pod: its service account)");
  cmd->add_option("--node-name", f.o.node_name, "This node's name")->envname("NODE_NAME");
  cmd->add_option("--namespace", f.o.ns, "Namespace of the workload Job")->capture_default_str();
  cmd->add_option("--workload-image", f.o.image,
                  "Image of a GPU Job to run on this node (e.g. a CUDA sample); without it the step is skipped");
  cmd->add_option("--workload-timeout", f.timeout_s, "Seconds the Job may take")->check(CLI::Range(1, 86400))->capture_default_str();
  cmd->add_flag("--label-node", f.label, "Set kgpu.io/validation.<step>=passed|failed on the node (API access)");
  cmd->add_flag("--json", f.json, "Print JSON");
  return cmd;
}

int run_validate_command() {
  auto& f = validate_flags();
  f.o.nvml_library = *f.nvml_library;
  f.o.workload_timeout = std::chrono::seconds(f.timeout_s);
  std::unique_ptr<kube::Client> client;
  const bool wants_api = !f.o.image.empty() || f.label;
  if (wants_api) {
    if (f.o.node_name.empty()) {
      std::cerr << "kgpu validate: the workload step and --label-node need --node-name (or NODE_NAME)\n";
      return 2;
    }
    kube::LoadOptions lo;
    lo.kubeconfig = f.kubeconfig;
    auto c = kube::Client::connect(lo, "kgpu-validate");
    if (!c) {
      std::cerr << "kgpu validate: API access: " << c.error().message << "\n";
      return 2;
    }
    client = std::move(*c);
    f.o.client = client.get();
  }
  const auto report = agent::validate_node(f.o);
  std::cout << (f.json ? report.json() : report.text());
  if (f.label && client) {
    nlohmann::json labels = nlohmann::json::object();
    for (const auto& s : report.steps) {
      labels["kgpu.io/validation." + s.name] =
          s.status == agent::StepStatus::kSkipped ? nlohmann::json(nullptr) : nlohmann::json(agent::step_status_name(s.status));
    }
    auto r = client->patch(kube::resources::kNodes, "", f.o.node_name, kube::PatchType::kMerge,
                           {{"metadata", {{"labels", labels}}}});
    if (!r) {
      std::cerr << "kgpu validate: labelling node " << f.o.node_name << ": " << r.error().text() << "\n";
      return 1;
    }
  }
  return report.passed() ? 0 : 1;
}

}  // namespace kgpu::cli
