#include "doctor/collect.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <nlohmann/json.hpp>

extern char** environ;

namespace kgpu::doctor {

namespace {

constexpr const char* kCoreKinds =
    "nodes,pods,events,deployments,replicasets,statefulsets,daemonsets,jobs,cronjobs,resourcequotas,priorityclasses,"
    "poddisruptionbudgets,namespaces,services,persistentvolumeclaims,horizontalpodautoscalers";
constexpr std::array<const char*, 7> kOptionalKinds = {"prometheusrules", "servicemonitors",        "podmonitors",
                                                       "resourceclaims",  "resourceclaimtemplates", "deviceclasses",
                                                       "resourceslices"};

std::string now_rfc3339() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

bool is_stack_pod(const nlohmann::json& pod) {
  const std::string name = pod.value("/metadata/name"_json_pointer, std::string());
  std::string app;
  if (auto it = pod["metadata"].find("labels"); it != pod["metadata"].end() && it->is_object()) {
    app = it->value("app", it->value("app.kubernetes.io/name", std::string()));
  }
  for (const std::string& s : {app, name}) {
    for (const char* prefix :
         {"nvidia-driver", "nvidia-container-toolkit", "nvidia-device-plugin", "nvidia-operator-validator",
          "nvidia-cuda-validator", "nvidia-mig-manager", "nvidia-dcgm-exporter", "kgpu-agent"}) {
      if (s.rfind(prefix, 0) == 0) return true;
    }
  }
  return false;
}

bool requests_gpu(const nlohmann::json& pod) {
  const auto& cs = pod["spec"]["containers"];
  if (!cs.is_array()) return false;
  for (const auto& c : cs) {
    for (const char* k : {"limits", "requests"}) {
      auto r = c.find("resources");
      if (r == c.end() || !r->contains(k)) continue;
      for (const auto& [name, v] : (*r)[k].items()) {
        if (name.rfind("nvidia.com/", 0) == 0) return true;
      }
    }
  }
  return false;
}

bool failing(const nlohmann::json& pod) {
  const auto& st = pod["status"];
  if (st.value("phase", "") == "Failed") return true;
  if (auto cs = st.find("containerStatuses"); cs != st.end() && cs->is_array()) {
    for (const auto& c : *cs) {
      if (c.value("restartCount", 0) > 0 || !c.value("ready", true)) return true;
    }
  }
  return false;
}

}  // namespace

Result<std::string> run_capture(const std::vector<std::string>& argv) {
  // O_CLOEXEC: a child spawned by another thread must not inherit these ends (dup2 onto the
  // child's 1 and 2 clears the flag there).
  int out[2], err[2];
  if (pipe2(out, O_CLOEXEC) != 0) return fail(ErrorCode::kInternal, "pipe: {}", std::strerror(errno));
  if (pipe2(err, O_CLOEXEC) != 0) {
    const int e = errno;
    close(out[0]);
    close(out[1]);
    return fail(ErrorCode::kInternal, "pipe: {}", std::strerror(e));
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  posix_spawn_file_actions_adddup2(&fa, err[1], 2);
  posix_spawn_file_actions_addclose(&fa, out[0]);
  posix_spawn_file_actions_addclose(&fa, err[0]);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, args[0], &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  close(out[1]);
  close(err[1]);
  if (rc != 0) {
    close(out[0]);
    close(err[0]);
    return fail(ErrorCode::kNotFound, "cannot run {}: {}", argv[0], std::strerror(rc));
  }
  std::string stdout_text, stderr_text;
  std::array<pollfd, 2> fds = {pollfd{out[0], POLLIN, 0}, pollfd{err[0], POLLIN, 0}};
  int open_fds = 2;
  char buf[65536];
  while (open_fds > 0) {
    if (poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (auto& f : fds) {
      if (f.fd < 0 || (f.revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
      const ssize_t n = read(f.fd, buf, sizeof buf);
      if (n > 0) {
        (f.fd == out[0] ? stdout_text : stderr_text).append(buf, static_cast<size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        close(f.fd);
        f.fd = -1;
        --open_fds;
      }
    }
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    if (auto nl = stderr_text.find('\n'); nl != std::string::npos && nl + 1 < stderr_text.size()) {
      stderr_text.resize(std::min<size_t>(stderr_text.size(), 400));
    }
    while (!stderr_text.empty() && (stderr_text.back() == '\n' || stderr_text.back() == ' ')) stderr_text.pop_back();
    return fail(ErrorCode::kUnavailable, "{} exited with status {}: {}", argv[0],
                WIFEXITED(status) ? WEXITSTATUS(status) : -1, stderr_text);
  }
  return stdout_text;
}

Result<std::string> collect_snapshot(const CollectOptions& o) {
  const auto kubectl = [&](std::vector<std::string> args) {
    std::vector<std::string> argv = {o.kubectl};
    if (!o.context.empty()) argv.push_back("--context=" + o.context);
    if (!o.request_timeout.empty()) argv.push_back("--request-timeout=" + o.request_timeout);
    argv.insert(argv.end(), args.begin(), args.end());
    return run_capture(argv);
  };
  nlohmann::json items = nlohmann::json::array();
  nlohmann::json errors = nlohmann::json::array();
  const auto take = [&](nlohmann::json& l) {
    for (auto& it : l["items"]) items.push_back(std::move(it));
  };
  auto core = kubectl({"get", kCoreKinds, "-A", "-o", "json"});
  if (!core && core.error().code == ErrorCode::kNotFound) {
    return std::unexpected(core.error().wrap("collecting the snapshot"));  // no kubectl
  }
  if (core) {
    nlohmann::json list = nlohmann::json::parse(*core, nullptr, false);
    if (list.is_discarded() || !list.contains("items")) {
      return fail(ErrorCode::kInvalidArgument, "kubectl get did not print a JSON List");
    }
    take(list);
  } else {
    // One kind the user may not list (RBAC) fails the whole `get`: kind by kind, keeping the rest.
    int got = 0;
    std::string_view kinds = kCoreKinds;
    while (!kinds.empty()) {
      const size_t comma = kinds.find(',');
      const std::string kind(kinds.substr(0, comma));
      kinds = comma == std::string_view::npos ? std::string_view{} : kinds.substr(comma + 1);
      auto out = kubectl({"get", kind, "-A", "-o", "json"});
      if (!out) {
        errors.push_back(out.error().message);
        continue;
      }
      nlohmann::json l = nlohmann::json::parse(*out, nullptr, false);
      if (l.is_discarded() || !l.contains("items")) {
        errors.push_back(fmt::format("kubectl get {} did not print a JSON List", kind));
        continue;
      }
      take(l);
      ++got;
    }
    if (got == 0) return std::unexpected(core.error().wrap("collecting the snapshot"));
  }
  for (const char* kind : kOptionalKinds) {
    auto out = kubectl({"get", kind, "-A", "-o", "json"});
    if (!out) {
      errors.push_back(out.error().message);
      continue;
    }
    nlohmann::json l = nlohmann::json::parse(*out, nullptr, false);
    if (!l.is_discarded() && l.contains("items")) take(l);
  }
  std::string kubectl_version;
  if (auto v = kubectl({"version", "-o", "json"})) {
    auto j = nlohmann::json::parse(*v, nullptr, false);
    if (!j.is_discarded()) kubectl_version = j.value("/clientVersion/gitVersion"_json_pointer, std::string());
  }
  // Logs.
  nlohmann::json logs = nlohmann::json::array();
  int app_logs = 0;
  for (const auto& item : items) {
    if (item.value("kind", "") != "Pod") continue;
    const bool stack = is_stack_pod(item);
    if (!stack && !(requests_gpu(item) && failing(item) && app_logs < o.max_app_logs)) continue;
    if (!stack) ++app_logs;
    const std::string ns = item["metadata"].value("namespace", "default");
    const std::string name = item["metadata"].value("name", "");
    std::vector<std::pair<std::string, int64_t>> containers;
    for (const char* list_key : {"initContainerStatuses", "containerStatuses"}) {
      auto st = item["status"].find(list_key);
      if (st == item["status"].end() || !st->is_array()) continue;
      for (const auto& c : *st) containers.emplace_back(c.value("name", ""), c.value("restartCount", int64_t{0}));
    }
    for (const auto& [container, restarts] : containers) {
      for (bool previous : {false, true}) {
        if (previous && restarts == 0) continue;
        std::vector<std::string> args = {"logs", "-n", ns, name, "-c", container, "--tail=" + std::to_string(o.tail)};
        if (previous) args.push_back("--previous");
        auto text = kubectl(args);
        if (!text) continue;  // a container that has not started has no log
        logs.push_back({{"apiVersion", "kgpu.io/v1"},
                        {"kind", "ContainerLog"},
                        {"metadata", {{"namespace", ns}, {"name", name}}},
                        {"container", container},
                        {"previous", previous},
                        {"text", *text}});
      }
    }
  }
  nlohmann::json info = {{"apiVersion", "kgpu.io/v1"},
                         {"kind", "SnapshotInfo"},
                         {"metadata", {{"name", "snapshot"}}},
                         {"collectedAt", o.collected_at.empty() ? now_rfc3339() : o.collected_at},
                         {"kubectlVersion", kubectl_version},
                         {"context", o.context},
                         {"errors", errors}};
  nlohmann::json out = {{"apiVersion", "v1"}, {"kind", "List"}, {"metadata", nlohmann::json::object()}};
  nlohmann::json all = nlohmann::json::array();
  all.push_back(std::move(info));
  for (auto& it : items) all.push_back(std::move(it));
  for (auto& l : logs) all.push_back(std::move(l));
  out["items"] = std::move(all);
  return out.dump(1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

}  // namespace kgpu::doctor
