// The guide's rule predicates (lint/rules.h), shared by `kgpu lint` and `kgpu doctor`.
#include "lint/rules.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdint>

#include "k8s/gpu_resources.h"
#include "lint/checks.h"

namespace kgpu::lint {

namespace {

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

// -----------------------------------------------------------------------------------------------
// GPU resource names
bool read_digits(std::string_view s, size_t* pos) {
  const size_t start = *pos;
  while (*pos < s.size() && std::isdigit(static_cast<unsigned char>(s[*pos]))) ++*pos;
  return *pos > start;
}

// mig-[<c>c.]<n>g.<m>gb[.me][.shared]
bool valid_mig_suffix(std::string_view s) {
  if (!s.starts_with("mig-")) return false;
  size_t p = 4;
  if (!read_digits(s, &p)) return false;
  if (p < s.size() && s[p] == 'c') {
    if (++p >= s.size() || s[p] != '.') return false;
    ++p;
    if (!read_digits(s, &p)) return false;
  }
  if (s.substr(p, 2) != "g.") return false;
  p += 2;
  if (!read_digits(s, &p)) return false;
  if (s.substr(p, 2) != "gb") return false;
  std::string_view rest = s.substr(p + 2);
  if (rest.starts_with(".me")) rest.remove_prefix(3);
  if (rest.starts_with(".shared")) rest.remove_prefix(7);
  return rest.empty();
}

bool valid_gpu_suffix(std::string_view s) { return s == "gpu" || s == "gpu.shared" || valid_mig_suffix(s); }

// The intended suffix for a misspelled one ("gpus" -> "gpu", "mig1g.10GB" -> "mig-1g.10gb"), or nullopt.
std::optional<std::string> fix_gpu_suffix(std::string_view suffix) {
  std::string s = ascii_lower(suffix);
  if (valid_gpu_suffix(s)) return s;
  if (size_t at = s.find("mig"); at != std::string::npos) {
    size_t p = at + 3;
    while (p < s.size() && !std::isdigit(static_cast<unsigned char>(s[p]))) ++p;
    const size_t n0 = p;
    if (read_digits(s, &p) && p < s.size() && s[p] == 'g') {
      const std::string n = s.substr(n0, p - n0);
      ++p;
      while (p < s.size() && !std::isdigit(static_cast<unsigned char>(s[p]))) ++p;
      const size_t m0 = p;
      if (read_digits(s, &p)) {
        const std::string m = s.substr(m0, p - m0);
        const std::string rest = s.substr(p);
        std::string out = fmt::format("mig-{}g.{}gb", n, m);
        if (contains(rest, "me")) out += ".me";
        if (contains(rest, "shared")) out += ".shared";
        return out;
      }
    }
    return std::nullopt;
  }
  std::string normalized = s;
  std::replace(normalized.begin(), normalized.end(), '-', '.');
  std::replace(normalized.begin(), normalized.end(), '_', '.');
  if (normalized.starts_with("nvidia.")) normalized.erase(0, 7);
  std::optional<std::string> best;
  size_t best_distance = 3;
  for (std::string_view candidate : {"gpu", "gpu.shared"}) {
    const size_t d = edit_distance(normalized, candidate);
    if (d < best_distance) {
      best_distance = d;
      best = std::string(candidate);
    }
  }
  return best;
}

constexpr std::array<std::string_view, 4> kInferenceServers = {"vllm", "text-generation-inference", "tritonserver",
                                                               "sglang"};

}  // namespace

// The name `name` was probably meant to be, when it looks like a misspelled NVIDIA GPU resource.
std::optional<std::string> misspelled_gpu_resource(std::string_view name) {
  const size_t slash = name.find('/');
  const std::string_view domain = slash == std::string_view::npos ? std::string_view() : name.substr(0, slash);
  const std::string_view suffix = slash == std::string_view::npos ? name : name.substr(slash + 1);
  if (domain == "nvidia.com") {
    if (valid_gpu_suffix(suffix)) return std::nullopt;
    // Other nvidia.com resources exist (KubeVirt passthrough devices): only near misses are typos.
    if (auto fixed = fix_gpu_suffix(suffix)) return "nvidia.com/" + *fixed;
    return std::nullopt;
  }
  const std::string ld = ascii_lower(domain);
  const std::string ls = ascii_lower(suffix);
  const bool gpu_word = contains(ls, "gpu") || ls.starts_with("mig") || contains(ls, "nvidia");
  const bool near_domain = ld == "nvidia" || (!ld.empty() && edit_distance(ld, "nvidia.com") <= 2);
  if (!near_domain && !(domain.empty() && gpu_word)) return std::nullopt;
  if (auto fixed = fix_gpu_suffix(suffix)) return "nvidia.com/" + *fixed;
  if (near_domain) return "nvidia.com/" + std::string(suffix);
  return std::string("nvidia.com/gpu");
}

bool requests_gpus(const k8s::Container& c) {
  for (const auto* m : {&c.resources.limits, &c.resources.requests}) {
    for (const auto& [name, q] : *m) {
      if (k8s::is_nvidia_resource(name) && !q->is_zero()) return true;
    }
  }
  return false;
}

bool uses_gpus(const k8s::PodSpec& spec) {
  if (!spec.resource_claims.empty()) return true;
  for (const auto* list : {&spec.containers, &spec.init_containers}) {
    for (const k8s::Container& c : *list) {
      if (requests_gpus(c)) return true;
    }
  }
  return false;
}

// Touches GPUs in any way: requests them, mounts their device nodes or names them by hand.
bool gpu_related(const k8s::PodSpec& spec) {
  if (uses_gpus(spec)) return true;
  for (const k8s::Volume& v : spec.volumes) {
    if (v.host_path && is_nvidia_device_path(*v.host_path)) return true;
  }
  for (const auto* list : {&spec.containers, &spec.init_containers}) {
    for (const k8s::Container& c : *list) {
      for (const k8s::EnvVar& e : c.env) {
        if (is_hand_set_visible_devices(e)) return true;
      }
    }
  }
  return false;
}

bool names_inference_server(std::string_view text) {
  const std::string l = ascii_lower(text);
  return std::any_of(kInferenceServers.begin(), kInferenceServers.end(), [&](auto s) { return contains(l, s); });
}

bool is_inference_server(const k8s::Container& c) {
  const auto mentions = names_inference_server;
  if (mentions(*c.image)) return true;
  // The program, not any argument: a test pod curling `release-vllm:8000` is not a server. With
  // a generic image the server is named by the command (`vllm serve`, `python -m vllm...`).
  const auto& program = c.command.empty() ? c.args : c.command;
  for (size_t i = 0; i < program.size() && i < 3; ++i) {
    if (mentions(*program[i])) return true;
  }
  return false;
}

bool has_inference_server(const k8s::PodSpec& spec) {
  return std::any_of(spec.containers.begin(), spec.containers.end(), is_inference_server);
}

bool image_pinned(std::string_view image) {
  if (contains(image, "@")) return true;  // a digest pins it
  const size_t slash = image.rfind('/');
  const std::string_view last = slash == std::string_view::npos ? image : image.substr(slash + 1);
  const size_t colon = last.find(':');
  return colon != std::string_view::npos && last.substr(colon + 1) != "latest";
}

int64_t startup_budget_s(const k8s::Probe& p) {
  // Saturating: absurd probe values must not wrap into a "too short" budget.
  int64_t product = 0, budget = 0;
  if (__builtin_mul_overflow(p.period_seconds.value_or(10), p.failure_threshold.value_or(3), &product) ||
      __builtin_add_overflow(product, p.initial_delay_seconds.value_or(0), &budget)) {
    budget = INT64_MAX;
  }
  return budget;
}

bool startup_probe_sufficient(const k8s::Container& c, int min_budget_s) {
  return c.startup_probe && startup_budget_s(*c.startup_probe) >= min_budget_s;
}

bool is_cpu_or_memory_metric(const k8s::MetricSpec& m) {
  return (m.type == "Resource" || m.type == "ContainerResource") && (m.name == "cpu" || m.name == "memory");
}

bool scales_on_cpu_or_memory(const k8s::HorizontalPodAutoscaler& hpa) {
  return hpa.metrics.empty() || std::any_of(hpa.metrics.begin(), hpa.metrics.end(), is_cpu_or_memory_metric);
}

}  // namespace kgpu::lint
