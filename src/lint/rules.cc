// The rule table and the checks behind it. Thresholds and detection heuristics are documented per
// rule in docs/lint.md.
#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include "k8s/objects.h"
#include "lint/lint.h"

namespace kgpu::lint {

namespace {

constexpr std::array kRules = {
    RuleInfo{
        "GPU001", "gpu-request-not-limit", Severity::kError,
        "A GPU is requested without a limit, or its request differs from its limit (GPUs cannot be overcommitted).",
        "Set the GPU count under resources.limits only (the request defaults to it), or make request == limit."},
    RuleInfo{"GPU002", "gpu-fractional", Severity::kError,
             "A GPU quantity is not a whole number (0.5, 500m): extended resources are counted in whole units.",
             "Request a whole number; for a fraction of a GPU request a MIG slice or use time-slicing replicas."},
    RuleInfo{"GPU003", "gpu-resource-name", Severity::kError,
             "A resource name looks like a misspelled NVIDIA GPU resource; no node advertises it, so the pod stays "
             "Pending.",
             "Use nvidia.com/gpu, nvidia.com/gpu.shared or nvidia.com/mig-<n>g.<m>gb (lower case, as the device plugin "
             "advertises them)."},
    RuleInfo{"GPU004", "single-gpu-rolling-update", Severity::kWarning,
             "A single-replica GPU Deployment uses the RollingUpdate strategy: a rollout needs a second GPU while "
             "the old pod still holds the first.",
             "Set spec.strategy.type: Recreate (or rollingUpdate.maxSurge: 0)."},
    RuleInfo{"GPU005", "gpu-taint-not-tolerated", Severity::kWarning,
             "A GPU workload does not tolerate the GPU node taint nvidia.com/gpu=present:NoSchedule, so it cannot "
             "schedule on tainted GPU nodes.",
             "Add a toleration {key: nvidia.com/gpu, operator: Exists, effect: NoSchedule} to the pod spec."},
    RuleInfo{"GPU006", "privileged-gpu-container", Severity::kError,
             "A GPU container runs with privileged: true, which exposes every GPU on the node and bypasses the "
             "device plugin.",
             "Remove privileged: true and request GPUs through resources.limits (the device plugin and CDI inject "
             "the devices)."},
    RuleInfo{"GPU007", "host-nvidia-device", Severity::kError,
             "A hostPath volume mounts /dev/nvidia* device nodes into the pod, bypassing the scheduler and the device "
             "plugin.",
             "Remove the hostPath volume and request nvidia.com/gpu instead."},
    RuleInfo{"GPU008", "manual-visible-devices", Severity::kError,
             "NVIDIA_VISIBLE_DEVICES is set by hand; it is not a substitute for a GPU request and can bypass the "
             "scheduler.",
             "Remove the variable and request nvidia.com/gpu; the device plugin sets it for the GPUs it allocates."},
    RuleInfo{"GPU009", "gpu-job-without-deadline", Severity::kWarning,
             "A GPU Job (or CronJob job template) has neither activeDeadlineSeconds nor ttlSecondsAfterFinished, so "
             "a hung or finished Job can hold GPUs or clutter the cluster indefinitely.",
             "Set spec.activeDeadlineSeconds (hung runs) and/or spec.ttlSecondsAfterFinished (finished Jobs)."},
    RuleInfo{"GPU010", "inference-startup-probe", Severity::kWarning,
             "An inference server has no startupProbe, or its budget (initialDelaySeconds + periodSeconds x "
             "failureThreshold) is shorter than model loading takes.",
             "Add a startupProbe on the health endpoint with periodSeconds: 10 and failureThreshold: 60 (10 "
             "minutes)."},
    RuleInfo{"GPU011", "inference-shm", Severity::kWarning,
             "An inference server has no memory-backed /dev/shm; the container default (64 MiB) breaks NCCL and "
             "tensor parallelism.",
             "Mount an emptyDir {medium: Memory, sizeLimit: 2Gi} at /dev/shm."},
    RuleInfo{"GPU012", "inference-model-cache", Severity::kWarning,
             "An inference server has no persistent volume at its model cache, so every restart downloads the model "
             "again.",
             "Mount a PersistentVolumeClaim at /root/.cache/huggingface (or at $HF_HOME / --download-dir)."},
    RuleInfo{"GPU013", "token-literal", Severity::kError,
             "A token or API key of a GPU workload is written in the manifest as a literal value.",
             "Store it in a Secret and reference it with env[].valueFrom.secretKeyRef."},
    RuleInfo{"GPU014", "image-not-pinned", Severity::kWarning,
             "A GPU workload's image has no tag or uses :latest, so a restart can silently change the server.",
             "Pin a version tag (vllm/vllm-openai:v0.32.0) or a digest (@sha256:...)."},
    RuleInfo{"GPU015", "hpa-cpu-on-llm", Severity::kWarning,
             "A HorizontalPodAutoscaler scales an LLM inference server on CPU or memory (or on the default CPU "
             "metric); CPU does not track GPU inference load.",
             "Scale on queue depth (vllm:num_requests_waiting) with a Pods, Object or External metric (Prometheus "
             "Adapter or KEDA)."},
    RuleInfo{"GPU016", "time-slicing-fail-requests", Severity::kWarning,
             "A device-plugin time-slicing config does not set failRequestsGreaterThanOne: true, so pods asking for "
             "several replicas are admitted without getting more compute.",
             "Set sharing.timeSlicing.failRequestsGreaterThanOne: true."},
    RuleInfo{"GPU017", "dra-api-version", Severity::kWarning,
             "A Dynamic Resource Allocation object uses a beta/alpha API instead of resource.k8s.io/v1 (GA since "
             "Kubernetes 1.34).",
             "Use apiVersion: resource.k8s.io/v1 (and the v1 field layout: requests[].exactly)."},
    RuleInfo{"GPU018", "sticky-xid-alert", Severity::kWarning,
             "An alert compares DCGM_FI_DEV_XID_ERRORS with > 0; the gauge keeps the last XID forever, so the alert "
             "never resolves.",
             "Alert on changes(DCGM_FI_DEV_XID_ERRORS[10m]) > 0, or on increase(kgpu_xid_events_total[10m]) > 0."},
};

const RuleInfo& rule(std::string_view id) {
  for (const RuleInfo& r : kRules) {
    if (r.id == id) return r;
  }
  std::abort();  // a typo in this file
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool contains(std::string_view s, std::string_view part) { return s.find(part) != std::string_view::npos; }

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
  std::string s = lower(suffix);
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

bool is_gpu_resource(std::string_view name) { return name.starts_with("nvidia.com/"); }

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
  const std::string ld = lower(domain);
  const std::string ls = lower(suffix);
  const bool gpu_word = contains(ls, "gpu") || ls.starts_with("mig") || contains(ls, "nvidia");
  const bool near_domain = ld == "nvidia" || (!ld.empty() && edit_distance(ld, "nvidia.com") <= 2);
  if (!near_domain && !(domain.empty() && gpu_word)) return std::nullopt;
  if (auto fixed = fix_gpu_suffix(suffix)) return "nvidia.com/" + *fixed;
  if (near_domain) return "nvidia.com/" + std::string(suffix);
  return std::string("nvidia.com/gpu");
}

// -----------------------------------------------------------------------------------------------
// Context

class Emitter {
 public:
  Emitter(const k8s::Document& doc, const std::set<std::string_view>& disabled, std::vector<Finding>* out)
      : doc_(doc), disabled_(disabled), out_(out) {
    if (doc.metadata.namespace_.empty()) {
      object_ = fmt::format("{} {}", doc.kind, doc.metadata.name);
    } else {
      object_ = fmt::format("{} {}/{}", doc.kind, doc.metadata.namespace_, doc.metadata.name);
    }
    if (auto it = doc.metadata.annotations.find("kgpu.io/lint-disable"); it != doc.metadata.annotations.end()) {
      std::string_view list = it->second;
      while (!list.empty()) {
        const size_t comma = list.find(',');
        std::string item = lower(list.substr(0, comma));
        std::erase_if(item, [](char c) { return std::isspace(static_cast<unsigned char>(c)); });
        if (item == "all") all_disabled_ = true;
        if (const RuleInfo* r = find_rule(item)) annotation_disabled_.insert(r->id);
        if (comma == std::string_view::npos) break;
        list.remove_prefix(comma + 1);
      }
    }
  }

  bool enabled(std::string_view id) const {
    return !all_disabled_ && !disabled_.contains(id) && !annotation_disabled_.contains(id);
  }

  void emit(std::string_view id, int line, std::string message, std::string fix = "") {
    if (!enabled(id)) return;
    const RuleInfo& r = rule(id);
    out_->push_back(Finding{&r, std::string(doc_.source), line > 0 ? line : doc_.line, object_, std::move(message),
                            fix.empty() ? std::string(r.fix) : std::move(fix)});
  }

  const k8s::Document& doc() const { return doc_; }

 private:
  const k8s::Document& doc_;
  const std::set<std::string_view>& disabled_;
  std::vector<Finding>* out_;
  std::string object_;
  bool all_disabled_ = false;
  std::set<std::string_view> annotation_disabled_;
};

int key_line(const k8s::Node* map, std::string_view key) {
  const k8s::Entry* e = map != nullptr ? map->find_entry(key) : nullptr;
  return e != nullptr ? e->key_line() : 0;
}

std::string_view raw_quantity(const k8s::Container& c, std::string_view section, std::string_view name) {
  const k8s::Node* m = c.raw != nullptr ? c.raw->at({"resources", section}) : nullptr;
  const k8s::Node* v = m != nullptr ? m->find(name) : nullptr;
  return v != nullptr ? v->text() : std::string_view();
}

bool requests_gpus(const k8s::Container& c) {
  for (const auto* m : {&c.resources.limits, &c.resources.requests}) {
    for (const auto& [name, q] : *m) {
      if (is_gpu_resource(name) && !q->is_zero()) return true;
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

bool is_hand_set_visible_devices(const k8s::EnvVar& e) {
  if (e.name != "NVIDIA_VISIBLE_DEVICES" || !e.value) return false;
  const std::string v = lower(*e.value);
  return !v.empty() && v != "void" && v != "none";
}

bool is_nvidia_device_path(std::string_view path) { return path.starts_with("/dev/nvidia"); }

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

constexpr std::array<std::string_view, 4> kInferenceServers = {"vllm", "text-generation-inference", "tritonserver",
                                                               "sglang"};

bool is_inference_server(const k8s::Container& c) {
  const auto mentions = [](std::string_view text) {
    const std::string l = lower(text);
    return std::any_of(kInferenceServers.begin(), kInferenceServers.end(), [&](auto s) { return contains(l, s); });
  };
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

struct PodContext {
  const k8s::PodSpec* spec = nullptr;
  int spec_line = 0;                           // of the pod spec's `spec:` (the Document's line if absent)
  std::set<std::string_view> claim_templates;  // StatefulSet volumeClaimTemplates names
};

// -----------------------------------------------------------------------------------------------
// Container and pod rules

void check_resources(Emitter& e, const k8s::Container& c) {
  for (const auto& [name, req] : c.resources.requests) {
    if (!is_gpu_resource(name)) continue;
    auto lim = c.resources.limits.find(name);
    if (lim == c.resources.limits.end()) {
      e.emit("GPU001", req.line,
             fmt::format("container '{}' requests {}: {} without a limit; GPUs must be set in limits", c.name, name,
                         raw_quantity(c, "requests", name)),
             fmt::format("Move '{}: {}' from resources.requests to resources.limits.", name,
                         raw_quantity(c, "requests", name)));
    } else if (lim->second.value != req.value) {
      e.emit("GPU001", req.line,
             fmt::format("container '{}' requests {}: {} but its limit is {}; GPU requests must equal limits", c.name,
                         name, raw_quantity(c, "requests", name), raw_quantity(c, "limits", name)),
             fmt::format("Set the request to the limit ({}), or remove the request.", raw_quantity(c, "limits", name)));
    }
  }
  for (const auto& [section, map] :
       {std::pair{"limits", &c.resources.limits}, std::pair{"requests", &c.resources.requests}}) {
    for (const auto& [name, q] : *map) {
      if (!is_gpu_resource(name) || q->is_integer()) continue;
      const std::string_view raw = raw_quantity(c, section, name);
      e.emit("GPU002", q.line,
             fmt::format("container '{}' sets {}.{}: {}, not a whole number of GPUs", c.name, section, name, raw),
             fmt::format("Use a whole number ({} rounds up to {}); for a fraction, request a MIG slice such as "
                         "nvidia.com/mig-1g.10gb: 1 or use time-slicing.",
                         raw, q->value()));
    }
  }
  if (c.raw == nullptr) return;
  for (std::string_view section : {"limits", "requests"}) {
    const k8s::Node* m = c.raw->at({"resources", section});
    if (m == nullptr || !m->is_map()) continue;
    for (const k8s::Entry& entry : m->entries()) {
      if (auto fixed = misspelled_gpu_resource(entry.key())) {
        e.emit("GPU003", entry.key_line(),
               fmt::format("container '{}' {} '{}', which no device plugin advertises", c.name, section, entry.key()),
               fmt::format("Did you mean '{}'?", *fixed));
      }
    }
  }
}

void check_security(Emitter& e, const PodContext& pod) {
  const k8s::PodSpec& spec = *pod.spec;
  const bool related = gpu_related(spec);
  for (const k8s::Volume& v : spec.volumes) {
    if (v.host_path && is_nvidia_device_path(*v.host_path)) {
      e.emit("GPU007", v.host_path.line,
             fmt::format("volume '{}' mounts host path '{}' into the pod", v.name, *v.host_path));
    }
  }
  for (const auto* list : {&spec.containers, &spec.init_containers}) {
    for (const k8s::Container& c : *list) {
      if (related && c.privileged && *c.privileged) {
        e.emit("GPU006", c.privileged.line, fmt::format("container '{}' sets privileged: true", c.name));
      }
      for (const k8s::EnvVar& env : c.env) {
        if (is_hand_set_visible_devices(env)) {
          e.emit("GPU008", env.value.line,
                 fmt::format("container '{}' sets NVIDIA_VISIBLE_DEVICES={} by hand", c.name, *env.value));
        }
      }
    }
  }
}

bool is_secret_name(std::string_view name) {
  const std::string u(name);
  return u == "HF_TOKEN" || u == "HUGGING_FACE_HUB_TOKEN" || u.ends_with("_TOKEN") || u.ends_with("_API_KEY") ||
         u == "API_KEY" || u == "TOKEN";
}

void check_tokens(Emitter& e, const k8s::Container& c) {
  for (const k8s::EnvVar& env : c.env) {
    if (!is_secret_name(env.name) || !env.value || env.value->empty() || env.value->starts_with("$(")) continue;
    e.emit("GPU013", env.value.line,
           fmt::format("container '{}' sets {} to a literal value in the manifest", c.name, env.name),
           fmt::format("Create a Secret (kubectl create secret generic ... --from-literal=token=...) and use "
                       "valueFrom.secretKeyRef for {}.",
                       env.name));
  }
  for (size_t i = 0; i < c.args.size(); ++i) {
    const std::string_view a = *c.args[i];
    for (std::string_view flag : {"--api-key", "--hf-token"}) {
      std::string_view value;
      int line = c.args[i].line;
      if (a == flag && i + 1 < c.args.size()) {
        value = *c.args[i + 1];
        line = c.args[i + 1].line;
      } else if (a.starts_with(flag) && a.size() > flag.size() && a[flag.size()] == '=') {
        value = a.substr(flag.size() + 1);
      } else {
        continue;
      }
      if (value.empty() || value.starts_with("$(")) continue;
      e.emit("GPU013", line, fmt::format("container '{}' passes {} as a literal argument", c.name, flag),
             fmt::format("Put the value in a Secret, expose it as an env var from secretKeyRef and pass {} $(VAR).",
                         flag));
    }
  }
}

void check_image(Emitter& e, const k8s::Container& c) {
  if (!c.image) return;
  const std::string_view image = *c.image;
  if (contains(image, "@")) return;  // a digest pins it
  const size_t slash = image.rfind('/');
  const std::string_view last = slash == std::string_view::npos ? image : image.substr(slash + 1);
  const size_t colon = last.find(':');
  if (colon == std::string_view::npos) {
    e.emit("GPU014", c.image.line,
           fmt::format("container '{}' image '{}' has no tag (it pulls :latest)", c.name, image));
  } else if (last.substr(colon + 1) == "latest") {
    e.emit("GPU014", c.image.line, fmt::format("container '{}' image '{}' uses the :latest tag", c.name, image));
  }
}

std::string trim_slash(std::string_view p) {
  while (p.size() > 1 && p.back() == '/') p.remove_suffix(1);
  return std::string(p);
}

bool path_under(std::string_view path, std::string_view dir) {
  const std::string p = trim_slash(path);
  const std::string d = trim_slash(dir);
  return p == d || (p.starts_with(d) && (d == "/" || p[d.size()] == '/'));
}

const k8s::Volume* find_volume(const k8s::PodSpec& spec, std::string_view name) {
  for (const k8s::Volume& v : spec.volumes) {
    if (v.name == name) return &v;
  }
  return nullptr;
}

bool is_persistent(const PodContext& pod, std::string_view volume_name) {
  if (pod.claim_templates.contains(volume_name)) return true;
  const k8s::Volume* v = find_volume(*pod.spec, volume_name);
  if (v == nullptr) return false;
  if (v->persistent_volume_claim) return true;
  if (v->host_path && !v->host_path->starts_with("/dev")) return true;
  return v->raw != nullptr && (v->raw->find("nfs") != nullptr || v->raw->find("csi") != nullptr);
}

// Where the server keeps model weights: the Hugging Face cache (default or from the environment),
// --download-dir / --model-repository and any absolute path passed as an argument (a local model).
std::vector<std::string> model_paths(const k8s::Container& c) {
  std::vector<std::string> out = {"/root/.cache/huggingface"};
  for (const k8s::EnvVar& env : c.env) {
    if ((env.name == "HF_HOME" || env.name == "HF_HUB_CACHE" || env.name == "TRANSFORMERS_CACHE" ||
         env.name == "HUGGINGFACE_HUB_CACHE") &&
        env.value && env.value->starts_with("/")) {
      out.emplace_back(*env.value);
    }
  }
  for (const auto* list : {&c.command, &c.args}) {
    for (const k8s::Text& t : *list) {
      std::string_view a = *t;
      if (const size_t eq = a.find('='); a.starts_with("--") && eq != std::string_view::npos) a = a.substr(eq + 1);
      if (a.starts_with("/")) out.emplace_back(a);
    }
  }
  return out;
}

void check_inference(Emitter& e, const PodContext& pod, const k8s::Container& c, int min_budget) {
  if (!c.startup_probe) {
    e.emit("GPU010", c.line,
           fmt::format("inference server container '{}' has no startupProbe{}", c.name,
                       c.liveness_probe ? "; its livenessProbe can restart it while the model is still loading" : ""));
  } else {
    const k8s::Probe& p = *c.startup_probe;
    // Saturating: absurd probe values must not wrap into a "too short" budget.
    int64_t product = 0, budget = 0;
    if (__builtin_mul_overflow(p.period_seconds.value_or(10), p.failure_threshold.value_or(3), &product) ||
        __builtin_add_overflow(product, p.initial_delay_seconds.value_or(0), &budget)) {
      budget = INT64_MAX;
    }
    if (budget < min_budget) {
      e.emit(
          "GPU010", p.line,
          fmt::format("inference server container '{}' startupProbe allows {} s (initialDelaySeconds {} + "
                      "periodSeconds {} x failureThreshold {}); loading a model needs at least {} s",
                      c.name, budget, p.initial_delay_seconds.value_or(0), p.period_seconds.value_or(10),
                      p.failure_threshold.value_or(3), min_budget),
          fmt::format("Raise failureThreshold to {} (periodSeconds {}) for a 600 s budget.",
                      (600 + p.period_seconds.value_or(10) - 1) / std::max<int64_t>(p.period_seconds.value_or(10), 1),
                      p.period_seconds.value_or(10)));
    }
  }

  const k8s::VolumeMount* shm = nullptr;
  for (const k8s::VolumeMount& m : c.volume_mounts) {
    if (trim_slash(m.mount_path) == "/dev/shm") shm = &m;
  }
  if (shm == nullptr) {
    e.emit("GPU011", c.line, fmt::format("inference server container '{}' mounts nothing at /dev/shm", c.name));
  } else {
    const k8s::Volume* v = find_volume(*pod.spec, shm->name);
    if (v == nullptr || !v->empty_dir || *v->empty_dir_medium != "Memory") {
      e.emit("GPU011", shm->line,
             fmt::format("inference server container '{}' mounts volume '{}' at /dev/shm, which is not an emptyDir "
                         "with medium: Memory",
                         c.name, shm->name));
    }
  }

  const std::vector<std::string> paths = model_paths(c);
  bool cached = false;
  for (const k8s::VolumeMount& m : c.volume_mounts) {
    if (!is_persistent(pod, m.name)) continue;
    for (const std::string& p : paths) cached = cached || path_under(p, m.mount_path);
  }
  if (!cached) {
    e.emit("GPU012", c.line,
           fmt::format("inference server container '{}' has no persistent volume at its model cache ({})", c.name,
                       paths.size() > 1 ? fmt::format("{} or {}", paths[0], paths[1]) : paths[0]),
           fmt::format("Mount a PersistentVolumeClaim at {}.", paths.size() > 1 ? paths[1] : paths[0]));
  }
}

void check_pod(Emitter& e, const PodContext& pod, const Options& options) {
  const k8s::PodSpec& spec = *pod.spec;
  const bool gpus = uses_gpus(spec);
  for (const auto* list : {&spec.containers, &spec.init_containers}) {
    for (const k8s::Container& c : *list) {
      check_resources(e, c);
      if (gpus) check_image(e, c);
    }
  }
  check_security(e, pod);
  if (gpus && !k8s::tolerates(spec.tolerations, k8s::Taint{"nvidia.com/gpu", "present", "NoSchedule", 0})) {
    e.emit("GPU005", pod.spec_line,
           "GPU workload has no toleration for the GPU node taint nvidia.com/gpu=present:NoSchedule");
  }
  const bool inference = has_inference_server(spec);
  for (const auto* list : {&spec.containers, &spec.init_containers}) {
    for (const k8s::Container& c : *list) {
      if (gpus || inference) check_tokens(e, c);
    }
  }
  for (const k8s::Container& c : spec.containers) {
    if (is_inference_server(c)) check_inference(e, pod, c, options.min_startup_budget_s);
  }
}

// -----------------------------------------------------------------------------------------------
// Object rules

struct TargetKey {
  std::string_view kind, namespace_, name;
};

int spec_key_line(const k8s::Document& doc) { return key_line(doc.root, "spec"); }

void check_deployment(Emitter& e, const k8s::Workload& w, const std::vector<TargetKey>& scaled) {
  const k8s::Document& doc = e.doc();
  if (doc.kind != "Deployment" || !uses_gpus(w.pod_template.spec)) return;
  if (w.replicas.value_or(1) > 1) return;
  // An HPA in the same input that keeps at least two replicas: a rollout has a pod to spare.
  const auto same = [&](const TargetKey& t) {
    return t.kind == "Deployment" && t.name == doc.metadata.name &&
           (t.namespace_.empty() || doc.metadata.namespace_.empty() || t.namespace_ == doc.metadata.namespace_);
  };
  if (std::any_of(scaled.begin(), scaled.end(), same)) return;
  if (w.strategy_type.value_or("RollingUpdate") != "RollingUpdate") return;
  const k8s::Node* strategy = doc.root->at({"spec", "strategy"});
  if (const k8s::Node* surge = doc.root->at({"spec", "strategy", "rollingUpdate", "maxSurge"})) {
    if (surge->as_int(true) == 0 || surge->text() == "0%") return;
  }
  int line = w.strategy_type.line;
  if (line == 0) line = key_line(doc.root->find("spec"), "strategy");
  if (line == 0) line = w.replicas.line;
  if (line == 0) line = spec_key_line(doc);
  e.emit("GPU004", line,
         fmt::format("Deployment with {} replica{} and GPUs uses the {} strategy; a rollout needs a second GPU",
                     w.replicas.value_or(1), w.replicas.value_or(1) == 1 ? "" : "s",
                     w.strategy_type ? "RollingUpdate" : "default RollingUpdate"),
         strategy != nullptr ? "Set spec.strategy.type: Recreate (and remove rollingUpdate), or set "
                               "rollingUpdate.maxSurge: 0."
                             : "Add spec.strategy: {type: Recreate}.");
}

void check_job(Emitter& e, const k8s::Job& job, int line, std::string_view what) {
  if (!uses_gpus(job.pod_template.spec) || job.active_deadline_seconds || job.ttl_seconds_after_finished) return;
  e.emit("GPU009", line, fmt::format("GPU {} sets neither activeDeadlineSeconds nor ttlSecondsAfterFinished", what));
}

// Whether the data value `key` is written as a literal block scalar (`key: |`), so that its
// lines are the source lines after the key's. The tree keeps a scalar's line (the key's), not its
// style: a multi-line value is taken for a literal block unless the next key comes sooner than its
// lines would end, or the source is JSON (strings with \n escapes).
bool is_literal_block(const k8s::Document& doc, const k8s::Node* data, std::string_view key, std::string_view text) {
  if (data == nullptr || doc.source.ends_with(".json")) return false;
  const auto newlines = std::count(text.begin(), text.end(), '\n');
  if (newlines == 0) return false;
  const auto entries = data->entries();
  for (size_t i = 0; i < entries.size(); ++i) {
    if (entries[i].key() != key) continue;
    if (i + 1 < entries.size() && entries[i + 1].key_line() <= entries[i].key_line() + newlines) return false;
    return true;
  }
  return false;
}

void check_time_slicing(Emitter& e, const k8s::ConfigMap& cm) {
  const k8s::Node* data = e.doc().root->find("data");
  for (const auto& [key, text] : cm.data) {
    if (!contains(*text, "timeSlicing")) continue;
    YAML::Node config;
    try {
      config = YAML::Load(std::string(*text));
    } catch (const YAML::Exception&) {
      continue;
    }
    if (!config.IsMap() || !config["sharing"].IsMap()) continue;
    const YAML::Node sharing = config["sharing"];
    const bool block = is_literal_block(e.doc(), data, key, *text);
    const auto line_of = [&](const YAML::Mark& m) { return block ? text.line + 1 + m.line : text.line; };
    for (auto it = sharing.begin(); it != sharing.end(); ++it) {
      if (it->first.Scalar() != "timeSlicing" || !it->second.IsMap()) continue;
      bool set = false;
      int line = line_of(it->first.Mark());
      for (auto f = it->second.begin(); f != it->second.end(); ++f) {
        if (f->first.Scalar() != "failRequestsGreaterThanOne") continue;
        line = line_of(f->first.Mark());
        const std::string v = lower(f->second.IsScalar() ? f->second.Scalar() : "");
        set = v == "true";
      }
      if (!set) {
        e.emit("GPU016", line,
               fmt::format("time-slicing config '{}' does not set failRequestsGreaterThanOne: true", key));
      }
    }
  }
}

void check_dra(Emitter& e) {
  const k8s::Document& doc = e.doc();
  static constexpr std::array<std::string_view, 4> kinds = {"ResourceClaim", "ResourceClaimTemplate", "DeviceClass",
                                                            "ResourceSlice"};
  if (std::find(kinds.begin(), kinds.end(), doc.kind) == kinds.end() || doc.api_group() != "resource.k8s.io") return;
  if (doc.api_version == "resource.k8s.io/v1") return;
  e.emit("GPU017", key_line(doc.root, "apiVersion"),
         fmt::format("{} uses apiVersion {}; DRA is GA as resource.k8s.io/v1", doc.kind, doc.api_version));
}

// Is the metric at `pos` inside a range function that turns the sticky gauge into events?
bool wrapped_in_change_function(std::string_view expr, size_t pos) {
  int depth = 0;
  for (size_t i = pos; i-- > 0;) {
    if (expr[i] == ')') {
      ++depth;
    } else if (expr[i] == '(') {
      if (depth > 0) {
        --depth;
        continue;
      }
      size_t end = i;
      while (end > 0 && std::isspace(static_cast<unsigned char>(expr[end - 1]))) --end;
      size_t start = end;
      while (start > 0 && (std::isalnum(static_cast<unsigned char>(expr[start - 1])) || expr[start - 1] == '_')) {
        --start;
      }
      const std::string_view fn = expr.substr(start, end - start);
      for (std::string_view f : {"changes", "increase", "delta", "idelta", "rate", "irate", "resets"}) {
        if (fn == f) return true;
      }
    }
  }
  return false;
}

// True when the metric occurrence ending at `end` is compared with zero right away: `> 0`, `!= 0`,
// `>= 1`, with or without `bool`.
bool compared_with_zero_at(std::string_view expr, size_t end) {
  size_t i = end;
  auto skip_space = [&] {
    while (i < expr.size() && std::isspace(static_cast<unsigned char>(expr[i]))) ++i;
  };
  // Label matchers, a range, and the closing parentheses of wrappers that keep the value sticky
  // (max by (gpu) (X), max_over_time(X[5m])).
  while (true) {
    skip_space();
    if (i < expr.size() && (expr[i] == '{' || expr[i] == '[')) {
      const size_t close = expr.find(expr[i] == '{' ? '}' : ']', i);
      if (close == std::string_view::npos) return false;
      i = close + 1;
    } else if (i < expr.size() && expr[i] == ')') {
      ++i;
    } else {
      break;
    }
  }
  std::string_view op;
  if (expr.substr(i, 2) == "!=" || expr.substr(i, 2) == ">=") {
    op = expr.substr(i, 2);
  } else if (i < expr.size() && expr[i] == '>') {
    op = ">";
  } else {
    return false;
  }
  i += op.size();
  skip_space();
  if (expr.substr(i, 4) == "bool") {
    i += 4;
    skip_space();
  }
  size_t k = i;
  while (k < expr.size() && (std::isdigit(static_cast<unsigned char>(expr[k])) || expr[k] == '.')) ++k;
  const std::string_view number = expr.substr(i, k - i);
  if (number.empty() || (k < expr.size() && (std::isalnum(static_cast<unsigned char>(expr[k])) || expr[k] == '_'))) {
    return false;
  }
  const double v = std::strtod(std::string(number).c_str(), nullptr);
  return (op == ">" && v == 0) || (op == "!=" && v == 0) || (op == ">=" && v > 0 && v <= 1);
}

// An `and` / `unless` with a change function elsewhere makes the alert resolve.
bool has_change_guard(std::string_view expr) {
  for (std::string_view f : {"changes(", "increase(", "delta(", "idelta(", "rate(", "irate(", "resets("}) {
    if (expr.find(f) != std::string_view::npos) return true;
  }
  return false;
}

void check_alerts(Emitter& e, const k8s::PrometheusRule& pr) {
  static constexpr std::string_view kMetric = "DCGM_FI_DEV_XID_ERRORS";
  for (const k8s::PrometheusRuleGroup& g : pr.groups) {
    for (const k8s::PrometheusRuleEntry& r : g.rules) {
      if (!r.alert || !r.expr) continue;
      const std::string_view expr = *r.expr;
      bool sticky = false;
      for (size_t at = expr.find(kMetric); at != std::string_view::npos; at = expr.find(kMetric, at + 1)) {
        const size_t end = at + kMetric.size();
        const bool whole =
            (at == 0 || !(std::isalnum(static_cast<unsigned char>(expr[at - 1])) || expr[at - 1] == '_')) &&
            (end == expr.size() || !(std::isalnum(static_cast<unsigned char>(expr[end])) || expr[end] == '_'));
        if (whole && !wrapped_in_change_function(expr, at) && compared_with_zero_at(expr, end)) sticky = true;
      }
      if (sticky && !has_change_guard(expr)) {
        e.emit("GPU018", r.expr.line,
               fmt::format("alert '{}' fires on '{}': the XID gauge keeps its last value, so the alert never resolves",
                           *r.alert, expr));
      }
    }
  }
}


void check_hpa(Emitter& e, const k8s::HorizontalPodAutoscaler& hpa, const std::vector<TargetKey>& inference) {
  const auto& ref = hpa.scale_target_ref;
  const std::string_view ns = e.doc().metadata.namespace_;
  const auto match = [&](const TargetKey& t) {
    return t.kind == ref.kind && t.name == ref.name && (ns.empty() || t.namespace_.empty() || t.namespace_ == ns);
  };
  if (std::none_of(inference.begin(), inference.end(), match)) return;
  const std::string target = fmt::format("{} {}", ref.kind, ref.name);
  if (hpa.metrics.empty()) {
    e.emit("GPU015", spec_key_line(e.doc()),
           fmt::format("HPA scales inference server {} on the default metric (80% CPU)", target));
    return;
  }
  for (const k8s::MetricSpec& m : hpa.metrics) {
    if ((m.type == "Resource" || m.type == "ContainerResource") && (m.name == "cpu" || m.name == "memory")) {
      e.emit("GPU015", m.line, fmt::format("HPA scales inference server {} on {} {}", target, m.type, m.name));
    }
  }
}

// Workloads that an HPA of the input keeps at two replicas or more.
std::vector<TargetKey> multi_replica_targets(std::span<const k8s::Document> docs) {
  std::vector<TargetKey> out;
  for (const k8s::Document& d : docs) {
    if (auto hpa = k8s::as_horizontal_pod_autoscaler(d); hpa && hpa->min_replicas.value_or(1) >= 2) {
      out.push_back({hpa->scale_target_ref.kind, d.metadata.namespace_, hpa->scale_target_ref.name});
    }
  }
  return out;
}

std::vector<TargetKey> inference_targets(std::span<const k8s::Document> docs) {
  std::vector<TargetKey> out;
  for (const k8s::Document& d : docs) {
    if (d.kind != "Deployment" && d.kind != "StatefulSet" && d.kind != "ReplicaSet") continue;
    if (auto w = k8s::as_workload(d); w && has_inference_server(w->pod_template.spec)) {
      out.push_back({d.kind, d.metadata.namespace_, d.metadata.name});
    }
  }
  return out;
}

void check_quota(Emitter& e) {
  const k8s::Node* hard = e.doc().root->at({"spec", "hard"});
  if (hard == nullptr || !hard->is_map()) return;
  for (const k8s::Entry& entry : hard->entries()) {
    std::string_view name = entry.key();
    std::string_view prefix;
    for (std::string_view p : {"requests.", "limits."}) {
      if (name.starts_with(p)) prefix = p;
    }
    name.remove_prefix(prefix.size());
    if (auto fixed = misspelled_gpu_resource(name)) {
      e.emit("GPU003", entry.key_line(),
             fmt::format("quota names '{}', which no device plugin advertises", entry.key()),
             fmt::format("Did you mean '{}{}'?", prefix, *fixed));
    }
  }
}

PodContext pod_context(const k8s::Document& doc, const k8s::PodSpec& spec) {
  PodContext p{&spec, spec.line > 0 ? spec.line : doc.line, {}};
  if (const k8s::Node* templates = doc.root->at({"spec", "volumeClaimTemplates"})) {
    for (const k8s::Node& t : templates->items()) {
      if (const k8s::Node* name = t.at({"metadata", "name"})) p.claim_templates.insert(name->text());
    }
  }
  return p;
}

void lint_document(const k8s::Document& doc, const std::set<std::string_view>& disabled, const Options& options,
                   const std::vector<TargetKey>& inference, const std::vector<TargetKey>& scaled,
                   std::vector<Finding>* out) {
  Emitter e(doc, disabled, out);
  if (auto pod = k8s::as_pod(doc)) {
    check_pod(e, pod_context(doc, pod->spec), options);
  } else if (auto w = k8s::as_workload(doc)) {
    check_pod(e, pod_context(doc, w->pod_template.spec), options);
    check_deployment(e, *w, scaled);
  } else if (auto job = k8s::as_job(doc)) {
    check_pod(e, pod_context(doc, job->pod_template.spec), options);
    check_job(e, *job, spec_key_line(doc), "Job");
  } else if (auto cron = k8s::as_cron_job(doc)) {
    check_pod(e, pod_context(doc, cron->job_template.pod_template.spec), options);
    const int line = key_line(doc.root->at({"spec", "jobTemplate"}), "spec");
    check_job(e, cron->job_template, line > 0 ? line : cron->job_template_line, "CronJob job template");
  } else if (auto cm = k8s::as_config_map(doc)) {
    check_time_slicing(e, *cm);
  } else if (auto pr = k8s::as_prometheus_rule(doc)) {
    check_alerts(e, *pr);
  } else if (auto hpa = k8s::as_horizontal_pod_autoscaler(doc)) {
    check_hpa(e, *hpa, inference);
  } else if (doc.kind == "ResourceQuota") {
    check_quota(e);
  } else {
    check_dra(e);
  }
}

}  // namespace

const char* severity_name(Severity s) {
  switch (s) {
    case Severity::kError:
      return "error";
    case Severity::kWarning:
      return "warning";
    case Severity::kInfo:
      return "info";
  }
  return "error";
}

const char* sarif_level(Severity s) { return s == Severity::kInfo ? "note" : severity_name(s); }

std::span<const RuleInfo> rules() { return kRules; }

const RuleInfo* find_rule(std::string_view id_or_name) {
  const std::string l = lower(id_or_name);
  for (const RuleInfo& r : kRules) {
    if (lower(r.id) == l || r.name == l) return &r;
  }
  return nullptr;
}

std::string Finding::to_string() const {
  return fmt::format("{}:{}: {} {} ({}): {} [{}]\n    fix: {}", file, line, severity_name(rule->severity), rule->id,
                     rule->name, message, object, fix);
}

Result<Options> make_options(const std::vector<std::string>& disabled) {
  Options o;
  for (const std::string& item : disabled) {
    std::string_view list = item;
    while (!list.empty()) {
      const size_t comma = list.find(',');
      const std::string_view one = list.substr(0, comma);
      if (!one.empty()) {
        const RuleInfo* r = find_rule(one);
        if (r == nullptr) {
          return fail(ErrorCode::kInvalidArgument, "unknown rule '{}' (kgpu lint --list-rules lists them)", one);
        }
        o.disabled.emplace_back(r->id);
      }
      if (comma == std::string_view::npos) break;
      list.remove_prefix(comma + 1);
    }
  }
  return o;
}

std::vector<k8s::LoadError> input_errors(std::span<const k8s::Document> docs) {
  std::vector<k8s::LoadError> out;
  for (const k8s::Document& doc : docs) {
    for (k8s::Issue& issue : k8s::quantity_issues(doc)) {
      const std::string object = doc.metadata.namespace_.empty()
                                     ? fmt::format("{} {}", doc.kind, doc.metadata.name)
                                     : fmt::format("{} {}/{}", doc.kind, doc.metadata.namespace_, doc.metadata.name);
      out.push_back(k8s::LoadError{std::string(doc.source), issue.line > 0 ? issue.line : doc.line,
                                   fmt::format("{}: {}", object, issue.message)});
    }
  }
  return out;
}

std::vector<Finding> lint(std::span<const k8s::Document> docs, const Options& options) {
  std::set<std::string_view> disabled;
  for (const std::string& d : options.disabled) {
    if (const RuleInfo* r = find_rule(d)) disabled.insert(r->id);
  }
  const std::vector<TargetKey> inference = inference_targets(docs);
  const std::vector<TargetKey> scaled = multi_replica_targets(docs);
  std::vector<Finding> out;
  for (const k8s::Document& doc : docs) lint_document(doc, disabled, options, inference, scaled, &out);
  std::sort(out.begin(), out.end(), [](const Finding& a, const Finding& b) {
    return std::tie(a.file, a.line, a.rule->id, a.message) < std::tie(b.file, b.line, b.rule->id, b.message);
  });
  return out;
}

}  // namespace kgpu::lint
