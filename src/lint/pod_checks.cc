// The checks of a pod spec (in a Pod, a workload's template, a Job or CronJob): GPU resources,
// security (privileged, host devices, NVIDIA_VISIBLE_DEVICES), tokens, images, tolerations and
// inference servers' probes, /dev/shm and model cache.
#include "lint/checks.h"

namespace kgpu::lint {

namespace {

// -----------------------------------------------------------------------------------------------
// Container and pod rules
void check_resources(Emitter& e, const k8s::Container& c) {
  for (const auto& [name, req] : c.resources.requests) {
    if (!k8s::is_nvidia_resource(name)) continue;
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
      if (!k8s::is_nvidia_resource(name) || q->is_integer()) continue;
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
    const k8s::Value* m = c.raw->at({"resources", section});
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
        if (is_hand_set_visible_devices(env) && !pod.node_agent) {
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
  if (!c.image || image_pinned(*c.image)) return;
  const std::string_view image = *c.image;
  const size_t slash = image.rfind('/');
  const std::string_view last = slash == std::string_view::npos ? image : image.substr(slash + 1);
  if (last.find(':') == std::string_view::npos) {
    e.emit("GPU014", c.image.line,
           fmt::format("container '{}' image '{}' has no tag (it pulls :latest)", c.name, image));
  } else {
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
    const int64_t budget = startup_budget_s(p);
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

}  // namespace

int key_line(const k8s::Value* map, std::string_view key) {
  const k8s::Entry* e = map != nullptr ? map->find_entry(key) : nullptr;
  return e != nullptr ? e->key_line() : 0;
}

std::string_view raw_quantity(const k8s::Container& c, std::string_view section, std::string_view name) {
  const k8s::Value* m = c.raw != nullptr ? c.raw->at({"resources", section}) : nullptr;
  const k8s::Value* v = m != nullptr ? m->find(name) : nullptr;
  return v != nullptr ? v->text() : std::string_view();
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

PodContext pod_context(const k8s::Document& doc, const k8s::PodSpec& spec) {
  PodContext p{&spec, spec.line > 0 ? spec.line : doc.line, {}};
  for (const k8s::Volume& v : spec.volumes) {
    if (!v.host_path) continue;
    std::string_view path = *v.host_path;
    while (path.size() > 1 && path.ends_with('/')) path.remove_suffix(1);
    if (path == "/var/lib/kubelet/device-plugins" || path == "/var/lib/kubelet/pod-resources") p.node_agent = true;
  }
  if (const k8s::Value* templates = doc.root->at({"spec", "volumeClaimTemplates"})) {
    for (const k8s::Value& t : templates->items()) {
      if (const k8s::Value* name = t.at({"metadata", "name"})) p.claim_templates.insert(name->text());
    }
  }
  return p;
}

}  // namespace kgpu::lint
