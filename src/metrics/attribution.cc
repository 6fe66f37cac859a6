#include "metrics/attribution.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace kgpu::metrics {

namespace {

bool is_hex(std::string_view s) {
  return !s.empty() &&
         std::all_of(s.begin(), s.end(), [](char c) { return std::isxdigit(static_cast<unsigned char>(c)); });
}

// The text between `prefix` and `suffix` in `s`, if both are there.
std::optional<std::string_view> between(std::string_view s, std::string_view prefix, std::string_view suffix) {
  const auto b = s.find(prefix);
  if (b == std::string_view::npos) return std::nullopt;
  const auto start = b + prefix.size();
  const auto e = suffix.empty() ? s.size() : s.find(suffix, start);
  if (e == std::string_view::npos) return std::nullopt;
  return s.substr(start, e - start);
}

std::optional<CgroupRef> parse_path(std::string_view path) {
  CgroupRef ref;
  // Pod UID: systemd "...-pod<uid_with_underscores>.slice", cgroupfs "/pod<uid>/".
  for (size_t pos = 0; (pos = path.find("pod", pos)) != std::string_view::npos; pos += 3) {
    const bool after_sep = pos > 0 && (path[pos - 1] == '-' || path[pos - 1] == '/');
    if (!after_sep) continue;
    std::string_view rest = path.substr(pos + 3);
    const auto end = rest.find_first_of("./");
    std::string uid(rest.substr(0, end));
    std::replace(uid.begin(), uid.end(), '_', '-');
    // Ordinary pods have 36-character UIDs; static (mirror) pods a 32-character hash.
    if ((uid.size() == 36 && std::count(uid.begin(), uid.end(), '-') == 4) || (uid.size() == 32 && is_hex(uid))) {
      ref.pod_uid = uid;
      break;
    }
  }
  if (ref.pod_uid.empty()) return std::nullopt;
  // Container id: the last path component.
  const auto slash = path.rfind('/');
  std::string_view last = path.substr(slash == std::string_view::npos ? 0 : slash + 1);
  for (std::string_view prefix : {"cri-containerd-", "crio-", "docker-", "cri-o-"}) {
    if (auto id = between(last, prefix, ".scope"); id && is_hex(*id)) {
      ref.container_id = std::string(*id);
      return ref;
    }
  }
  if (last.size() == 64 && is_hex(last)) ref.container_id = std::string(last);
  return ref;
}

}  // namespace

std::optional<CgroupRef> parse_cgroup(std::string_view content) {
  std::optional<CgroupRef> best;
  size_t start = 0;
  while (start < content.size()) {
    auto end = content.find('\n', start);
    if (end == std::string_view::npos) end = content.size();
    std::string_view line = content.substr(start, end - start);
    start = end + 1;
    // hierarchy-ID:controllers:path (cgroup v2: "0::/path")
    const auto c1 = line.find(':');
    const auto c2 = c1 == std::string_view::npos ? c1 : line.find(':', c1 + 1);
    if (c2 == std::string_view::npos) continue;
    if (auto ref = parse_path(line.substr(c2 + 1))) {
      if (!ref->container_id.empty()) return ref;
      if (!best) best = ref;
    }
  }
  return best;
}

ProcessResolver::ProcessResolver(std::string proc_root, std::string container_log_dir, std::string pod_log_dir,
                                 Clock& clock)
    : proc_root_(std::move(proc_root)),
      container_log_dir_(std::move(container_log_dir)),
      pod_log_dir_(std::move(pod_log_dir)),
      clock_(clock) {}

void ProcessResolver::rescan_locked() {
  namespace fs = std::filesystem;
  last_scan_ = clock_.steady_now();
  by_container_id_.clear();
  by_uid_.clear();
  std::error_code ec;
  // <pod>_<namespace>_<container>-<64 hex id>.log; pod names have no '_', namespaces neither.
  for (fs::directory_iterator it(container_log_dir_, ec), end; !ec && it != end; it.increment(ec)) {
    std::string name = it->path().filename().string();
    if (!name.ends_with(".log")) continue;
    name.resize(name.size() - 4);
    const auto dash = name.rfind('-');
    if (dash == std::string::npos || name.size() - dash - 1 != 64) continue;
    const std::string id = name.substr(dash + 1);
    const std::string head = name.substr(0, dash);
    const auto u1 = head.find('_');
    const auto u2 = u1 == std::string::npos ? u1 : head.find('_', u1 + 1);
    if (u2 == std::string::npos) continue;
    by_container_id_[id] = PodRef{head.substr(u1 + 1, u2 - u1 - 1), head.substr(0, u1), head.substr(u2 + 1)};
  }
  // <namespace>_<pod>_<uid>
  for (fs::directory_iterator it(pod_log_dir_, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    const auto u1 = name.find('_');
    const auto u2 = name.rfind('_');
    if (u1 == std::string::npos || u2 == u1) continue;
    by_uid_[name.substr(u2 + 1)] = {name.substr(0, u1), name.substr(u1 + 1, u2 - u1 - 1)};
  }
}

std::optional<PodRef> ProcessResolver::resolve(unsigned pid) {
  std::ifstream in(proc_root_ + "/" + std::to_string(pid) + "/cgroup");
  if (!in) return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  const auto ref = parse_cgroup(text.str());
  if (!ref) return std::nullopt;
  std::lock_guard lock(mu_);
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (auto it = by_container_id_.find(ref->container_id);
        !ref->container_id.empty() && it != by_container_id_.end()) {
      return it->second;
    }
    if (auto it = by_uid_.find(ref->pod_uid); ref->container_id.empty() && it != by_uid_.end()) {
      return PodRef{it->second.first, it->second.second, ""};
    }
    // A new container: rescan, but not more than once a second.
    if (clock_.steady_now() - last_scan_ < std::chrono::seconds(1)) break;
    rescan_locked();
  }
  // Known pod, unknown container name.
  if (auto it = by_uid_.find(ref->pod_uid); it != by_uid_.end()) return PodRef{it->second.first, it->second.second, ""};
  return std::nullopt;
}

std::optional<std::string> ProcessResolver::pod_uid(const std::string& ns, const std::string& pod) {
  std::lock_guard lock(mu_);
  for (int attempt = 0; attempt < 2; ++attempt) {
    for (const auto& [uid, names] : by_uid_) {
      if (names.first == ns && names.second == pod) return uid;
    }
    if (clock_.steady_now() - last_scan_ < std::chrono::seconds(1)) break;
    rescan_locked();
  }
  return std::nullopt;
}

std::vector<kubelet::ContainerDevice> claim_devices(const std::vector<kubelet::ContainerClaimDevice>& listed,
                                                    std::string_view driver, std::string_view pool,
                                                    const std::vector<gpu::DraName>& devices) {
  std::vector<kubelet::ContainerDevice> out;
  if (driver.empty()) return out;
  for (const auto& c : listed) {
    if (c.driver != driver || c.pool != pool) continue;
    const auto d = std::ranges::find(devices, c.device, &gpu::DraName::name);
    if (d == devices.end() || d->uuid.empty()) continue;
    out.push_back({c.ns, c.pod, c.container, std::string(driver), d->uuid});
  }
  return out;
}

}  // namespace kgpu::metrics
