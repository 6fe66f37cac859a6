#include "dra/driver.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <optional>
#include <set>

#include "common/files.h"
#include "common/log.h"
#include "k8s/api/json.h"

namespace kgpu::dra {

namespace {

using nlohmann::json;

json device_json(const PreparedDevice& d) {
  json j = {{"requests", d.request_names},
            {"pool", d.pool_name},
            {"device", d.device_name},
            {"cdiDeviceIds", d.cdi_device_ids}};
  if (d.partition) {
    j["partition"] = {{"gpu", d.partition->gpu_index}, {"profileId", d.partition->profile_id}, {"start", d.partition->start}};
  }
  return j;
}

std::optional<Partition> partition_of(const Device& d) {
  if (!d.partition || d.shape == nullptr || !d.placement_start) return std::nullopt;
  return Partition{d.gpu_index, d.shape->profile_id, *d.placement_start};
}

// The string at `key` of `j`, or an error naming the field.
Result<std::string> text_field(const json& j, const char* key, std::string_view where) {
  const auto it = j.find(key);
  if (it == j.end() || !it->is_string()) return fail(ErrorCode::kInvalidArgument, "{}.{}: want a string", where, key);
  return it->get<std::string>();
}

Result<std::vector<std::string>> text_list(const json& j, const char* key, std::string_view where) {
  const auto it = j.find(key);
  if (it == j.end() || !it->is_array()) return fail(ErrorCode::kInvalidArgument, "{}.{}: want a list", where, key);
  std::vector<std::string> out;
  for (const auto& x : *it) {
    if (!x.is_string()) return fail(ErrorCode::kInvalidArgument, "{}.{}[]: want a string", where, key);
    out.push_back(x.get<std::string>());
  }
  return out;
}

sharing::PlannedDevice planned(const Device& d) {
  sharing::PlannedDevice p;
  p.id = d.uuid;
  p.uuid = d.uuid;
  p.gpu_index = d.gpu_index;
  p.index = d.type == DeviceType::kMig ? fmt::format("{}:{}", d.gpu_index, d.gpu_instance_id.value_or(0))
                                       : std::to_string(d.gpu_index);
  p.gpu_uuid = d.type == DeviceType::kMig ? d.parent_uuid : d.uuid;
  p.minor = d.minor;
  if (d.type == DeviceType::kMig) {
    p.mig_gi = d.gpu_instance_id;
    p.mig_ci = d.compute_instance_id.value_or(0);
  }
  return p;
}

// A claim uid as the kubelet sends it goes into file names: letters, digits and '-' only.
std::optional<std::string> bad_uid(const ClaimRef& ref) {
  const bool ok = !ref.uid.empty() && ref.uid.size() <= 128 && std::ranges::all_of(ref.uid, [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
  });
  if (ok) return std::nullopt;
  return fmt::format("claim {}/{}: uid {:?} is not a Kubernetes uid (letters, digits and '-', at most 128)", ref.ns,
                     ref.name, ref.uid.substr(0, 160));
}

std::string host_path(const std::string& root, const std::string& path) {
  if (root.empty() || root == "/") return path;
  return (root.ends_with('/') ? root.substr(0, root.size() - 1) : root) + path;
}

}  // namespace

Driver::Driver(DriverOptions options) : opt_(std::move(options)) {}

std::string Driver::cdi_kind() const { return fmt::format("k8s.{}/claim", opt_.driver_name); }

std::string Driver::cdi_spec_path(const std::string& uid) const {
  return fmt::format("{}/k8s.{}-claim_{}.json", opt_.cdi_root, opt_.driver_name, uid);
}

std::string Driver::checkpoint_path() const { return opt_.state_dir + "/checkpoint.json"; }

Result<void> Driver::start() {
  std::error_code ec;
  std::filesystem::create_directories(opt_.state_dir, ec);
  if (ec) return fail(ErrorCode::kPermissionDenied, "DRA state directory {}: {}", opt_.state_dir, ec.message());
  std::lock_guard lock(mu_);
  claims_.clear();
  load_error_.clear();
  const std::string path = checkpoint_path();
  auto text = read_file_limited(path, kMaxCheckpointBytes);
  if (!text) {
    if (text.error().code == ErrorCode::kNotFound) return {};
    load_error_ = text.error().message;
  } else {
    const auto bad = [&](const std::string& why) { load_error_ = fmt::format("checkpoint {}: {}", path, why); };
    const json j = json::parse(*text, nullptr, false);
    if (j.is_discarded() || !j.is_object()) {
      bad("not JSON");
    } else if (j.value("version", 0) != kCheckpointVersion) {
      bad(fmt::format("version {} (this agent reads version {})", j.contains("version") ? j["version"].dump() : "none",
                      kCheckpointVersion));
    } else if (j.value("driver", "") != opt_.driver_name) {
      bad(fmt::format("written for driver '{}', this is {}", j.value("driver", ""), opt_.driver_name));
    } else if (!j.contains("claims") || !j["claims"].is_object() || j["claims"].size() > kMaxClaims) {
      bad(fmt::format("claims: want an object of at most {} entries", kMaxClaims));
    } else {
      std::map<std::string, Entry> loaded;
      for (const auto& [uid, c] : j["claims"].items()) {
        const std::string where = "claims." + uid;
        Entry e;
        auto ns = text_field(c, "namespace", where);
        auto name = text_field(c, "name", where);
        if (!ns || !name || !c.contains("devices") || !c["devices"].is_array()) {
          bad(fmt::format("{}: want namespace, name and devices", where));
          break;
        }
        e.ns = *ns;
        e.name = *name;
        e.mps = c.value("mps", false);
        for (const auto& d : c["devices"]) {
          auto req = text_list(d, "requests", where);
          auto pool = text_field(d, "pool", where);
          auto dev = text_field(d, "device", where);
          auto ids = text_list(d, "cdiDeviceIds", where);
          if (!req || !pool || !dev || !ids) {
            bad(fmt::format("{}.devices[]: want requests, pool, device and cdiDeviceIds", where));
            break;
          }
          PreparedDevice pd{*req, *pool, *dev, *ids, std::nullopt};
          if (d.contains("partition")) {
            const json& p = d["partition"];
            const auto num = [&](const char* k) -> std::optional<unsigned> {
              if (!p.is_object() || !p.contains(k) || !p[k].is_number_unsigned() || p[k].get<uint64_t>() > 1024) {
                return std::nullopt;
              }
              return p[k].get<unsigned>();
            };
            const auto gpu = num("gpu"), profile = num("profileId"), start = num("start");
            if (!gpu || !profile || !start) {
              bad(fmt::format("{}.devices[].partition: want gpu, profileId and start", where));
              break;
            }
            pd.partition = Partition{*gpu, *profile, *start};
          }
          e.devices.push_back(std::move(pd));
        }
        if (!load_error_.empty()) break;
        loaded.emplace(uid, std::move(e));
      }
      if (load_error_.empty()) claims_ = std::move(loaded);
    }
  }
  if (!load_error_.empty()) {
    // Kept for inspection; the driver starts empty (a repeated Prepare re-reads the API).
    std::filesystem::rename(path, path + ".corrupt", ec);
    log::error("DRA checkpoint not used: " + load_error_, {log::kv("driver", opt_.driver_name)});
  }
  return {};
}

Result<void> Driver::save_locked() {
  json claims = json::object();
  for (const auto& [uid, e] : claims_) {
    json devices = json::array();
    for (const auto& d : e.devices) devices.push_back(device_json(d));
    claims[uid] = {{"namespace", e.ns}, {"name", e.name}, {"devices", devices}, {"mps", e.mps}};
  }
  const json j = {{"version", kCheckpointVersion}, {"driver", opt_.driver_name}, {"claims", claims}};
  const std::string text = j.dump(1) + "\n";
  if (text.size() > kMaxCheckpointBytes) {
    return fail(ErrorCode::kInvalidArgument, "checkpoint {}: {} bytes, more than {}", checkpoint_path(), text.size(),
                kMaxCheckpointBytes);
  }
  return write_file_atomically(checkpoint_path(), text, 0600);
}

Result<std::vector<PreparedDevice>> Driver::prepare_one(const ClaimRef& ref, bool& mps) {
  const std::string who = fmt::format("claim {}/{} ({})", ref.ns, ref.name, ref.uid);
  if (!opt_.get_claim) return fail(ErrorCode::kUnavailable, "{}: no API access to read the claim", who);
  auto claim = opt_.get_claim(ref.ns, ref.name);
  if (!claim) return std::unexpected(claim.error().wrap(who));
  const json& c = *claim;
  const std::string uid = k8s::api::text(c, {"metadata", "uid"});
  if (uid != ref.uid) {
    return fail(ErrorCode::kInvalidArgument, "{}: the API has uid '{}' for that name (deleted and recreated?)", who,
                uid);
  }
  const json* results = nullptr;
  if (c.contains("status") && c["status"].contains("allocation") && c["status"]["allocation"].contains("devices")) {
    const json& d = c["status"]["allocation"]["devices"];
    if (d.contains("results") && d["results"].is_array()) results = &d["results"];
  }
  if (results == nullptr)
    return fail(ErrorCode::kInvalidArgument, "{}: not allocated (no status.allocation.devices.results)", who);

  const std::vector<Device> node_devices = opt_.devices ? opt_.devices() : std::vector<Device>{};
  struct Chosen {
    const Device* device;
    std::string request;
    SharingSettings settings;
  };
  std::vector<Chosen> chosen;
  std::vector<Device> keep = node_devices;  // `chosen` points into this copy
  for (size_t i = 0; i < results->size(); ++i) {
    const json& r = (*results)[i];
    if (r.value("driver", "") != opt_.driver_name) continue;
    const std::string pool = r.value("pool", "");
    const std::string name = r.value("device", "");
    const std::string request = r.value("request", "");
    if (pool != opt_.node_name) {
      return fail(ErrorCode::kInvalidArgument, "{}: results[{}] is device {} of pool '{}', not this node's pool '{}'",
                  who, i, name, pool, opt_.node_name);
    }
    const Device* d = find_device(keep, name);
    if (d == nullptr) {
      return fail(ErrorCode::kNotFound, "{}: results[{}]: device {} is not on node {} (MIG layout changed?)", who, i,
                  name, opt_.node_name);
    }
    if (opt_.healthy && !opt_.healthy(*d)) {
      return fail(ErrorCode::kUnavailable, "{}: results[{}]: device {} ({}) is unhealthy", who, i, name, d->uuid);
    }
    auto s = settings_for(c, opt_.driver_name, request, d->type);
    if (!s) return std::unexpected(s.error().wrap(who));
    chosen.push_back({d, request, *s});
  }
  if (chosen.empty()) {
    return fail(ErrorCode::kInvalidArgument, "{}: no device allocated by driver {} in pool {}", who, opt_.driver_name,
                opt_.node_name);
  }

  // One sharing setting for the claim: devices of one claim share one MPS setup.
  std::optional<SharingSettings> mps_settings;
  for (const auto& ch : chosen) {
    if (ch.settings.strategy != SharingStrategy::kMps) continue;
    if (mps_settings && !(*mps_settings == ch.settings)) {
      return fail(ErrorCode::kInvalidArgument, "{}: devices of one claim have different MPS settings", who);
    }
    mps_settings = ch.settings;
  }
  MpsClaim mps_claim;
  json mps_edits;
  if (mps_settings) {
    mps_claim.claim_uid = ref.uid;
    mps_claim.settings = *mps_settings;
    mps_claim.pipe_dir = host_path(opt_.cdi_config.mps_root, fmt::format("/claim-{}/pipe", ref.uid));
    mps_claim.log_dir = host_path(opt_.cdi_config.mps_root, fmt::format("/claim-{}/log", ref.uid));
    json env = json::array({"CUDA_MPS_PIPE_DIRECTORY=/tmp/nvidia-mps", "CUDA_MPS_LOG_DIRECTORY=/tmp/nvidia-mps-log"});
    if (mps_settings->active_thread_percentage) {
      env.push_back(fmt::format("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE={}", *mps_settings->active_thread_percentage));
    }
    if (mps_settings->pinned_memory_bytes) {
      // Client side: one limit per device ordinal the container sees, in MiB ("0=1024M,1=1024M").
      std::vector<std::string> limits;
      size_t ordinal = 0;
      for (const auto& ch : chosen) {
        if (ch.settings.strategy == SharingStrategy::kMps) {
          limits.push_back(fmt::format("{}={}M", ordinal, *mps_settings->pinned_memory_bytes >> 20));
        }
        ++ordinal;
      }
      env.push_back(fmt::format("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT={}", fmt::join(limits, ",")));
    }
    mps_edits = {{"env", env},
                 {"mounts",
                  json::array({sharing::cdi_mount({"/tmp/nvidia-mps", mps_claim.pipe_dir, false}),
                               sharing::cdi_mount({"/tmp/nvidia-mps-log", mps_claim.log_dir, false}),
                               sharing::cdi_mount({"/dev/shm", host_path(opt_.cdi_config.mps_root, "/shm"), false})})}};
    for (const auto& ch : chosen) {
      if (ch.settings.strategy != SharingStrategy::kMps) continue;
      mps_claim.uuids.push_back(ch.device->uuid);
      mps_claim.gpu_indices.push_back(ch.device->gpu_index);
    }
  }

  // Partitions (dynamic MIG): checkpointed first, then created; undone if a later step fails.
  std::vector<PreparedDevice> partitions;
  for (const auto& ch : chosen) {
    if (!ch.device->partition) continue;
    auto p = partition_of(*ch.device);
    if (!p) return fail(ErrorCode::kInternal, "{}: device {} has no placement", who, ch.device->name);
    partitions.push_back({{ch.request}, opt_.node_name, ch.device->name, {}, p});
  }
  std::vector<Device> created;  // the partitions as they exist now
  created.reserve(partitions.size());
  struct Undo {
    Driver& d;
    const std::string& uid;
    std::vector<PreparedDevice>& partitions;
    bool armed = true;
    ~Undo() {
      if (!armed || partitions.empty()) return;
      (void)d.destroy_partitions_locked(partitions);
      d.claims_.erase(uid);
      (void)d.save_locked();
    }
  } undo{*this, ref.uid, partitions};
  if (!partitions.empty()) {
    if (!opt_.create_partition || !opt_.destroy_partition) {
      undo.armed = false;
      return fail(ErrorCode::kNotSupported, "{}: device {} is a MIG partition and dynamic MIG is off on this node", who,
                  partitions.front().device_name);
    }
    claims_[ref.uid] = Entry{ref.ns, ref.name, partitions, false};
    if (auto ok = save_locked(); !ok) {
      claims_.erase(ref.uid);
      undo.armed = false;
      return std::unexpected(ok.error().wrap(who));
    }
    for (auto& ch : chosen) {
      if (!ch.device->partition) continue;
      auto d = opt_.create_partition(*ch.device);
      if (!d) return std::unexpected(d.error().wrap(who + ": MIG partition " + ch.device->name));
      created.push_back(std::move(*d));
      ch.device = &created.back();
    }
  }

  json devices = json::array();
  std::vector<PreparedDevice> out;
  for (const auto& ch : chosen) {
    auto edits = sharing::cdi_device_edits(planned(*ch.device), opt_.cdi_config, opt_.host);
    if (!edits) return std::unexpected(edits.error().wrap(who));
    if (ch.settings.strategy == SharingStrategy::kMps) {
      for (const auto& key : {"env", "mounts"}) {
        for (const auto& x : mps_edits[key]) (*edits)[key].push_back(x);
      }
    }
    // Two results for one device (two requests): one entry naming both requests.
    auto it = std::find_if(out.begin(), out.end(), [&](const auto& p) { return p.device_name == ch.device->name; });
    if (it != out.end()) {
      it->request_names.push_back(ch.request);
      continue;
    }
    const std::string cdi_name = fmt::format("{}-{}", ref.uid, ch.device->name);
    devices.push_back({{"name", cdi_name}, {"containerEdits", *edits}});
    std::optional<Partition> part;
    for (const auto& p : partitions)
      if (p.device_name == ch.device->name) part = p.partition;
    out.push_back(
        {{ch.request}, opt_.node_name, ch.device->name, {fmt::format("{}={}", cdi_kind(), cdi_name)}, part});
  }
  if (mps_settings && opt_.start_mps) {
    std::error_code ec;
    std::filesystem::create_directories(mps_claim.pipe_dir, ec);
    std::filesystem::create_directories(mps_claim.log_dir, ec);
    if (auto ok = opt_.start_mps(mps_claim); !ok) return std::unexpected(ok.error().wrap(who + ": MPS"));
  }
  mps = mps_settings.has_value();
  const std::string text =
      sharing::cdi_spec_text(cdi_kind(), std::move(devices), sharing::cdi_common_edits(opt_.cdi_config, opt_.host));
  if (auto ok = write_file_atomically(cdi_spec_path(ref.uid), text); !ok) {
    if (mps && opt_.stop_mps) opt_.stop_mps(ref.uid);
    return std::unexpected(ok.error().wrap(who + ": CDI spec"));
  }
  undo.armed = false;
  return out;
}

std::string Driver::destroy_partitions_locked(const std::vector<PreparedDevice>& devices) {
  std::string first;
  for (const auto& d : devices) {
    if (!d.partition || !opt_.destroy_partition) continue;
    if (auto ok = opt_.destroy_partition(*d.partition); !ok) {
      log::warn("DRA: MIG partition not destroyed: " + ok.error().message, {log::kv("device", d.device_name)});
      if (first.empty()) first = ok.error().message;
    }
  }
  return first;
}

std::vector<Partition> Driver::partitions() const {
  std::lock_guard lock(mu_);
  std::vector<Partition> out;
  for (const auto& [uid, e] : claims_)
    for (const auto& d : e.devices)
      if (d.partition) out.push_back(*d.partition);
  return out;
}

std::map<std::string, PrepareResult> Driver::prepare(const std::vector<ClaimRef>& claims) {
  std::map<std::string, PrepareResult> out;
  std::lock_guard lock(mu_);
  for (const auto& ref : claims) {
    PrepareResult& r = out[ref.uid];
    if (auto bad = bad_uid(ref)) {
      r.error = *bad;
      continue;
    }
    if (auto it = claims_.find(ref.uid); it != claims_.end()) {
      if (::access(cdi_spec_path(ref.uid).c_str(), F_OK) == 0) {
        r.devices = it->second.devices;
        continue;
      }
      // The spec is gone (a wiped /var/run): prepare again from the API.
      claims_.erase(it);
    }
    if (claims_.size() >= kMaxClaims) {
      r.error = fmt::format("claim {}/{} ({}): {} claims are prepared on this node already (the limit)", ref.ns,
                            ref.name, ref.uid, kMaxClaims);
      continue;
    }
    bool mps = false;
    auto devices = prepare_one(ref, mps);
    if (!devices) {
      r.error = devices.error().message;
      log::warn("DRA prepare failed: " + r.error, {log::kv("claim", ref.uid)});
      continue;
    }
    claims_[ref.uid] = Entry{ref.ns, ref.name, *devices, mps};
    if (auto ok = save_locked(); !ok) {
      claims_.erase(ref.uid);
      ::unlink(cdi_spec_path(ref.uid).c_str());
      if (mps && opt_.stop_mps) opt_.stop_mps(ref.uid);
      (void)destroy_partitions_locked(*devices);
      (void)save_locked();
      r.error = fmt::format("claim {}/{} ({}): {}", ref.ns, ref.name, ref.uid, ok.error().message);
      continue;
    }
    r.devices = std::move(*devices);
    log::info("DRA claim prepared", {log::kv("claim", ref.uid), log::kv("name", ref.ns + "/" + ref.name)});
  }
  return out;
}

std::map<std::string, std::string> Driver::unprepare(const std::vector<ClaimRef>& claims) {
  std::map<std::string, std::string> out;
  std::lock_guard lock(mu_);
  for (const auto& ref : claims) {
    std::string& err = out[ref.uid];
    if (auto bad = bad_uid(ref)) {
      err = *bad;
      continue;
    }
    const std::string spec = cdi_spec_path(ref.uid);
    if (::unlink(spec.c_str()) != 0 && errno != ENOENT) {
      err = fmt::format("claim {} ({}): cannot remove the CDI spec {}: {}", ref.name, ref.uid, spec,
                        std::strerror(errno));
      continue;
    }
    auto it = claims_.find(ref.uid);
    if (it == claims_.end()) continue;
    if (const std::string undone = destroy_partitions_locked(it->second.devices); !undone.empty()) {
      err = fmt::format("claim {} ({}): MIG partition not destroyed: {}", ref.name, ref.uid, undone);
      continue;
    }
    const bool mps = it->second.mps;
    Entry saved = it->second;
    claims_.erase(it);
    if (auto ok = save_locked(); !ok) {
      claims_[ref.uid] = std::move(saved);
      err = fmt::format("claim {} ({}): {}", ref.name, ref.uid, ok.error().message);
      continue;
    }
    if (mps && opt_.stop_mps) opt_.stop_mps(ref.uid);
    log::info("DRA claim unprepared", {log::kv("claim", ref.uid)});
  }
  return out;
}

std::map<std::string, std::vector<PreparedDevice>> Driver::prepared() const {
  std::lock_guard lock(mu_);
  std::map<std::string, std::vector<PreparedDevice>> out;
  for (const auto& [uid, e] : claims_) out[uid] = e.devices;
  return out;
}

}  // namespace kgpu::dra
