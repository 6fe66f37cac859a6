#include "agent/validate.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "apiclient/client.h"
#include "common/files.h"
#include "gpu/nvml/library.h"
#include "health/fault_actions.h"
#include "sharing/allocate.h"

namespace kgpu::agent {

namespace {

constexpr size_t kMaxCdiBytes = 4 << 20;

StepResult passed(std::string name, std::string detail) { return {std::move(name), StepStatus::kPassed, std::move(detail)}; }
StepResult failed(std::string name, std::string detail) { return {std::move(name), StepStatus::kFailed, std::move(detail)}; }
StepResult skipped(std::string name, std::string detail) {
  return {std::move(name), StepStatus::kSkipped, std::move(detail)};
}

// A connection to the Unix socket at `path` is accepted.
bool accepts(const std::string& path) {
  sockaddr_un addr{};
  if (path.size() >= sizeof addr.sun_path) return false;
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path.c_str());
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  ::close(fd);
  return ok;
}

StepResult plugin_step(const ValidateOptions& o) {
  if (o.plugin_dir.empty()) return skipped("device-plugin", "no device-plugin directory given");
  std::error_code ec;
  std::vector<std::string> serving, dead;
  for (const auto& e : std::filesystem::directory_iterator(o.plugin_dir, ec)) {
    const auto name = e.path().filename().string();
    if (!name.starts_with("nvidia-") || !name.ends_with(".sock")) continue;
    (accepts(e.path().string()) ? serving : dead).push_back(name);
  }
  if (ec) return failed("device-plugin", fmt::format("{}: {}", o.plugin_dir, ec.message()));
  if (serving.empty()) {
    return failed("device-plugin", dead.empty() ? fmt::format("no kgpu device-plugin socket in {}", o.plugin_dir)
                                                : fmt::format("{} in {} accept no connection", fmt::join(dead, ", "),
                                                              o.plugin_dir));
  }
  return passed("device-plugin", fmt::format("serving: {}", fmt::join(serving, ", ")));
}

StepResult workload_step(const ValidateOptions& o) {
  if (o.client == nullptr || o.image.empty()) {
    return skipped("workload", "no workload image (--workload-image) or no API access");
  }
  const std::string name = fmt::format("kgpu-validate-{}", o.node_name);
  nlohmann::json job = {
      {"apiVersion", "batch/v1"},
      {"kind", "Job"},
      {"metadata", {{"name", name}, {"namespace", o.ns}, {"labels", {{"app.kubernetes.io/name", "kgpu-validate"}}}}},
      {"spec",
       {{"backoffLimit", 0},
        {"ttlSecondsAfterFinished", 600},
        {"template",
         {{"metadata", {{"labels", {{"app.kubernetes.io/name", "kgpu-validate"}}}}},
          {"spec",
           {{"restartPolicy", "Never"},
            {"nodeName", o.node_name},
            {"tolerations", nlohmann::json::array({{{"operator", "Exists"}}})},
            {"containers",
             nlohmann::json::array({{{"name", "cuda"},
                                     {"image", o.image},
                                     {"resources", {{"limits", {{"nvidia.com/gpu", "1"}}}}}}})}}}}}}}};
  kube::DeleteOptions background;
  background.propagation_policy = "Background";
  (void)o.client->remove(kube::resources::kJobs, o.ns, name, background);  // an earlier run's
  // The earlier Job is gone once its name is free again.
  for (int i = 0; i < 100; ++i) {
    auto created = o.client->create(kube::resources::kJobs, o.ns, job);
    if (created) break;
    if (!created.error().already_exists()) return failed("workload", "creating the Job: " + created.error().text());
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  const auto deadline = std::chrono::steady_clock::now() + o.workload_timeout;
  std::string outcome;
  while (std::chrono::steady_clock::now() < deadline) {
    auto j = o.client->get(kube::resources::kJobs, o.ns, name);
    if (j) {
      const auto st = j->value("status", nlohmann::json::object());
      if (st.value("succeeded", 0) > 0) {
        outcome = "ok";
        break;
      }
      if (st.value("failed", 0) > 0) {
        outcome = "the pod failed";
        break;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  (void)o.client->remove(kube::resources::kJobs, o.ns, name, background);
  if (outcome == "ok") return passed("workload", fmt::format("Job {}/{} ({}) completed on {}", o.ns, name, o.image, o.node_name));
  if (outcome.empty()) outcome = fmt::format("not complete after {} s", o.workload_timeout.count());
  return failed("workload", fmt::format("Job {}/{} ({}) on {}: {}", o.ns, name, o.image, o.node_name, outcome));
}

}  // namespace

const char* step_status_name(StepStatus s) {
  switch (s) {
    case StepStatus::kPassed:
      return "passed";
    case StepStatus::kFailed:
      return "failed";
    default:
      return "skipped";
  }
}

Result<void> validate_gpu(const gpu::NodeGpus& node, unsigned index, const std::string& uuid) {
  const auto p = node.probe(index);
  if (p.error) return fail(ErrorCode::kUnavailable, "GPU {}: NVML: {}", index, *p.error);
  if (!uuid.empty() && p.uuid != uuid) {
    return fail(ErrorCode::kUnavailable, "GPU {} answers as {}, not {}", index, p.uuid, uuid);
  }
  const auto f = node.fault_signals(index);
  const std::string who = fmt::format("GPU {} ({})", index, p.uuid);
  if (f.lost) return fail(ErrorCode::kGpuLost, "{} is lost", who);
  if (f.remap_pending.value_or(false)) return fail(ErrorCode::kUnavailable, "{}: a row remap is pending", who);
  if (f.remap_failure.value_or(false)) return fail(ErrorCode::kUnavailable, "{}: row remapping failed", who);
  if (f.ecc_volatile_uncorrected.value_or(0) > 0) {
    return fail(ErrorCode::kUnavailable, "{}: {} uncorrected volatile ECC errors", who, *f.ecc_volatile_uncorrected);
  }
  if (auto a = node.recovery_action(index); a && *a != 0) {
    return fail(ErrorCode::kUnavailable, "{}: the driver asks for {}", who, health::recovery_action_name(*a));
  }
  return {};
}

Result<void> validate_cdi(const std::string& cdi_root, const std::vector<std::string>& uuids) {
  const std::string path = fmt::format("{}/{}-{}.json", cdi_root, sharing::kCdiVendor, sharing::kCdiClass);
  auto text = read_file_limited(path, kMaxCdiBytes);
  if (!text) return std::unexpected(text.error());
  auto spec = nlohmann::json::parse(*text, nullptr, false);
  if (spec.is_discarded() || !spec.is_object()) return fail(ErrorCode::kInvalidArgument, "{}: not JSON", path);
  const std::string kind = fmt::format("{}/{}", sharing::kCdiVendor, sharing::kCdiClass);
  if (spec.value("kind", "") != kind) {
    return fail(ErrorCode::kInvalidArgument, "{}: kind is '{}', not {}", path, spec.value("kind", ""), kind);
  }
  std::set<std::string> names;
  for (const auto& d : spec.value("devices", nlohmann::json::array())) {
    if (d.is_object() && d.contains("name") && d["name"].is_string()) names.insert(d["name"].get<std::string>());
  }
  for (const auto& u : uuids) {
    if (!names.contains(u)) return fail(ErrorCode::kNotFound, "{}: no device {}", path, u);
  }
  return {};
}

ValidationReport validate_node(const ValidateOptions& o) {
  ValidationReport report;
  auto opened = gpu::NodeGpus::open(nvml::resolve_library_path(o.nvml_library));
  std::vector<std::pair<unsigned, std::string>> gpus;  // the GPUs to check
  if (!opened) {
    report.steps.push_back(failed("driver", "NVML: " + opened.error().message));
    report.steps.push_back(skipped("nvml", "NVML is not up"));
  } else {
    auto& node = **opened;
    auto inv = node.inventory();
    const std::string ctl = (std::filesystem::path(o.dev_root) / "dev/nvidiactl").string();
    if (!inv) {
      report.steps.push_back(failed("driver", "NVML inventory: " + inv.error().message));
    } else if (!std::filesystem::exists(ctl)) {
      report.steps.push_back(failed("driver", fmt::format("driver {}, but {} does not exist", inv->driver_version, ctl)));
    } else {
      report.steps.push_back(passed("driver", fmt::format("driver {}, {} present", inv->driver_version, ctl)));
    }
    auto n = node.device_count();
    if (n) {
      for (unsigned i = 0; i < *n; ++i) {
        const auto p = node.probe(i);
        if (o.gpu.empty() || o.gpu == std::to_string(i) || o.gpu == p.uuid) gpus.emplace_back(i, p.uuid);
      }
    }
    if (!n) {
      report.steps.push_back(failed("nvml", "cannot count GPUs: " + n.error().message));
    } else if (gpus.empty()) {
      report.steps.push_back(failed("nvml", o.gpu.empty() ? "no GPU" : fmt::format("no GPU {}", o.gpu)));
    } else {
      std::vector<std::string> problems;
      for (const auto& [i, uuid] : gpus) {
        if (auto ok = validate_gpu(node, i, uuid); !ok) problems.push_back(ok.error().message);
      }
      report.steps.push_back(problems.empty()
                                 ? passed("nvml", fmt::format("{} GPU(s) answer and are healthy", gpus.size()))
                                 : failed("nvml", fmt::format("{}", fmt::join(problems, "; "))));
    }
  }
  report.steps.push_back(plugin_step(o));
  if (o.cdi_root.empty()) {
    report.steps.push_back(skipped("cdi", "no CDI directory given"));
  } else {
    std::vector<std::string> uuids;
    for (const auto& [i, u] : gpus) {
      if (!u.empty()) uuids.push_back(u);
    }
    auto ok = validate_cdi(o.cdi_root, uuids);
    report.steps.push_back(ok ? passed("cdi", fmt::format("{} names the {} GPU(s)", o.cdi_root, uuids.size()))
                              : failed("cdi", ok.error().message));
  }
  report.steps.push_back(workload_step(o));
  return report;
}

bool ValidationReport::passed() const {
  for (const auto& s : steps) {
    if (s.status == StepStatus::kFailed) return false;
  }
  return true;
}

std::string ValidationReport::text() const {
  std::string out;
  for (const auto& s : steps) out += fmt::format("{:<14} {:<7} {}\n", s.name, step_status_name(s.status), s.detail);
  out += passed() ? "validation passed\n" : "validation FAILED\n";
  return out;
}

std::string ValidationReport::json() const {
  nlohmann::json j = {{"passed", passed()}, {"steps", nlohmann::json::array()}};
  for (const auto& s : steps) j["steps"].push_back({{"name", s.name}, {"status", step_status_name(s.status)}, {"detail", s.detail}});
  return j.dump(2) + "\n";
}

}  // namespace kgpu::agent
