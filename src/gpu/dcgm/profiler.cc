#include "gpu/dcgm/profiler.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "common/log.h"

namespace kgpu::dcgm {

namespace {

// Fields NVML GPM provides on Hopper and later (the sampler reads them there).
constexpr unsigned short kGpmFields[] = {kFieldProfGrEngineActive, kFieldProfPipeTensorActive, kFieldProfDramActive,
                                         kFieldProfPcieTxBytes, kFieldProfPcieRxBytes};

bool gpm_backed(unsigned short id) { return std::ranges::find(kGpmFields, id) != std::end(kGpmFields); }

std::string field_list(const std::vector<unsigned short>& ids) {
  std::string out;
  for (auto id : ids) {
    if (!out.empty()) out += ", ";
    const char* n = profiling_field_name(id);
    out += n != nullptr ? n : fmt::format("field {}", id);
  }
  return out;
}

// Which sentinel a blank value is ("blank", "not found", "not supported", "not permissioned").
const char* blank_kind(long long offset) {
  switch (offset) {
    case 0:
      return "a blank value";
    case 1:
      return "NOT_FOUND";
    case 2:
      return "NOT_SUPPORTED";
    case 3:
      return "NOT_PERMISSIONED";
    default:
      return "a blank value";
  }
}

}  // namespace

Profiler::Profiler(ProfilerOptions options)
    : opt_(std::move(options)), clock_(opt_.clock != nullptr ? *opt_.clock : Clock::real()) {
  name_prefix_ = fmt::format("kgpu-{}-{:x}", ::getpid(),
                             std::chrono::system_clock::now().time_since_epoch().count() & 0xffffffffffULL);
  stale_after_ = std::max<std::chrono::steady_clock::duration>(opt_.stale_after, 10 * opt_.interval);
  std::ranges::sort(opt_.fields);
  auto [first, last] = std::ranges::unique(opt_.fields);
  opt_.fields.erase(first, last);
  if (opt_.fields.size() > kMaxFieldsPerGroup) opt_.fields.resize(kMaxFieldsPerGroup);
}

Profiler::~Profiler() { teardown(true); }

void Profiler::set_problem(const std::string& p, bool warn) {
  if (p == problem_) return;
  problem_ = p;
  if (warn && !p.empty()) log::warn("DCGM profiling fields unavailable: " + p);
}

bool Profiler::start() {
  if (opt_.fields.empty()) {
    set_problem("no profiling field is enabled in the counters", false);
    return false;
  }
  auto where = parse_endpoint(opt_.remote);
  if (!where) {
    set_problem(where.error().message);
    return false;
  }
  endpoint_ = *where;
  auto lib = Library::open(opt_.library);
  if (!lib) {
    set_problem(lib.error().message, false);  // the caller reports which fields this costs
    return false;
  }
  lib_ = std::move(*lib);
  if (auto ok = lib_->init(!endpoint_.embedded); !ok) {
    set_problem(ok.error().message);
    return false;
  }
  library_ok_ = true;
  return connect();
}

FieldGroupId Profiler::field_group(const std::vector<unsigned short>& fields, bool* ok) {
  *ok = true;
  if (auto it = field_groups_.find(fields); it != field_groups_.end()) return it->second;
  const std::string name = fmt::format("{}-{}-fields", name_prefix_, ++sequence_);
  FieldGroupId id = 0;
  const Return r = lib_->call(lib_->symbols().dcgmFieldGroupCreate, conn_->handle(), static_cast<int>(fields.size()),
                              fields.data(), name.c_str(), &id);
  if (r != kOk) {
    log::warn(fmt::format("DCGM: cannot create a field group for {}: {}", field_list(fields), lib_->error_string(r)));
    *ok = false;
    return 0;
  }
  field_groups_[fields] = id;
  return id;
}

void Profiler::setup_gpu(Gpu& g) {
  const auto& s = lib_->symbols();
  const Handle h = conn_->handle();
  const std::string name = fmt::format("{}-{}-gpu{}", name_prefix_, ++sequence_, g.id);
  Return r = lib_->call(s.dcgmGroupCreate, h, kGroupEmpty, name.c_str(), &g.group);
  if (r == kOk) {
    g.grouped = true;
    r = lib_->call(s.dcgmGroupAddEntity, h, g.group, kEntityGpu, g.id);
  }
  if (r != kOk) {
    log::warn(fmt::format("DCGM: cannot make a group for GPU {} (DCGM GPU {}): {}; its profiling series are omitted",
                          g.uuid, g.id, lib_->error_string(r)));
    return;
  }
  const long long every_us = std::max<long long>(100000, opt_.interval.count() * 1000LL);
  auto watch = [&](const std::vector<unsigned short>& fields) -> Return {
    bool ok = false;
    const FieldGroupId fg = field_group(fields, &ok);
    if (!ok) return kGenericError;
    const Return w = lib_->call(s.dcgmWatchFields, h, g.group, fg, every_us, 0.0, 2);
    if (w == kOk) g.field_groups.push_back(fg);
    return w;
  };
  auto& served = watched_[g.uuid];
  if (const Return all = watch(opt_.fields); all == kOk) {
    served.insert(opt_.fields.begin(), opt_.fields.end());
    return;
  } else if (all == kConnectionNotValid) {
    return;
  }
  // Some field cannot be watched on this GPU: find out which, one by one.
  std::vector<std::string> refused;
  for (auto f : opt_.fields) {
    const Return one = watch({f});
    if (one == kOk) {
      served.insert(f);
    } else {
      refused.push_back(fmt::format("{} ({})", field_list({f}), return_name(one)));
    }
  }
  std::string list;
  for (const auto& x : refused) list += list.empty() ? x : ", " + x;
  log::warn(fmt::format("DCGM does not serve {} on GPU {} (DCGM GPU {}); those series are omitted for this GPU", list,
                        g.uuid, g.id));
}

bool Profiler::connect() {
  auto c = Connection::open(*lib_, endpoint_, opt_.connect_timeout);
  if (!c) {
    set_problem(c.error().message);
    next_try_ = clock_.steady_now() + opt_.retry;
    return false;
  }
  conn_ = std::move(*c);
  const auto& s = lib_->symbols();
  const Handle h = conn_->handle();
  auto give_up = [&](const std::string& why) {
    set_problem(fmt::format("{}: {}", endpoint_.describe(), why));
    teardown(true);
    next_try_ = clock_.steady_now() + opt_.retry;
    return false;
  };
  unsigned ids[kMaxDevices] = {};
  int count = 0;
  if (Return r = lib_->call(s.dcgmGetAllSupportedDevices, h, ids, &count); r != kOk) {
    return give_up("dcgmGetAllSupportedDevices: " + lib_->error_string(r));
  }
  count = std::clamp(count, 0, static_cast<int>(kMaxDevices));
  if (count == 0) return give_up("DCGM sees no GPU it supports");
  // DCGM's GPU ids are its own: match them to NVML's GPUs by UUID.
  std::vector<EntityPair> entities;
  for (int i = 0; i < count; ++i) entities.push_back({kEntityGpu, ids[i]});
  values_.assign(entities.size(), FieldValue{});
  for (auto& v : values_) v.version = kFieldValueVersion;
  unsigned short uuid_field = kFieldGpuUuid;
  if (Return r = lib_->call(s.dcgmEntitiesGetLatestValues, h, entities.data(), static_cast<unsigned>(entities.size()),
                            &uuid_field, 1u, kLiveData, values_.data());
      r != kOk) {
    return give_up("reading the GPUs' UUIDs: " + lib_->error_string(r));
  }
  gpus_.clear();
  for (const auto& v : values_) {
    const std::string uuid(v.value.str, strnlen(v.value.str, sizeof v.value.str));
    if (v.status != kOk || v.fieldType != kTypeString || !uuid.starts_with("GPU-")) {
      log::warn(fmt::format("DCGM GPU {} has no readable UUID ({}); its profiling series are omitted", v.entityId,
                            v.status != kOk ? return_name(v.status) : "'" + uuid.substr(0, 64) + "'"));
      continue;
    }
    Gpu g;
    g.id = v.entityId;
    g.uuid = uuid;
    gpus_.push_back(std::move(g));
  }
  for (auto& g : gpus_) setup_gpu(g);
  if (!conn_) return false;
  if (watched_.empty() || std::ranges::all_of(watched_, [](const auto& kv) { return kv.second.empty(); })) {
    return give_up("no GPU serves any of " + field_list(opt_.fields));
  }
  lib_->call(s.dcgmUpdateAllFields, h, 1);  // the first values before the first sample
  problem_.clear();
  std::string gpus;
  for (const auto& [uuid, fields] : watched_)
    gpus += fmt::format("{}{} ({} fields)", gpus.empty() ? "" : ", ", uuid, fields.size());
  log::info(fmt::format("reading profiling fields through {}: {}", endpoint_.describe(), gpus),
            {log::kv("library", lib_->path())});
  return true;
}

void Profiler::teardown(bool alive) {
  if (!conn_) return;
  if (alive) {
    const auto& s = lib_->symbols();
    const Handle h = conn_->handle();
    for (const auto& g : gpus_) {
      for (auto fg : g.field_groups) lib_->call(s.dcgmUnwatchFields, h, g.group, fg);
      if (g.grouped) lib_->call(s.dcgmGroupDestroy, h, g.group);
    }
    for (const auto& [fields, fg] : field_groups_) lib_->call(s.dcgmFieldGroupDestroy, h, fg);
  }
  conn_.reset();
  gpus_.clear();
  field_groups_.clear();
  watched_.clear();
  gpu_status_.clear();
  seen_.clear();
  stale_logged_.clear();
}

Readings Profiler::read() {
  Readings out;
  if (!conn_) {
    if (!library_ok_ || clock_.steady_now() < next_try_ || !connect()) return out;
  }
  std::vector<EntityPair> entities;
  std::map<unsigned, const Gpu*> by_id;
  for (const auto& g : gpus_) {
    if (watched_[g.uuid].empty()) continue;
    entities.push_back({kEntityGpu, g.id});
    by_id[g.id] = &g;
  }
  if (entities.empty()) return out;
  const size_t n = entities.size() * opt_.fields.size();
  if (values_.size() < n) values_.resize(n);
  for (size_t i = 0; i < n; ++i) {
    values_[i].version = kFieldValueVersion;
    values_[i].status = kNoData;
  }
  const Return r = lib_->call(lib_->symbols().dcgmEntitiesGetLatestValues, conn_->handle(), entities.data(),
                              static_cast<unsigned>(entities.size()), opt_.fields.data(),
                              static_cast<unsigned>(opt_.fields.size()), 0u, values_.data());
  if (r == kConnectionNotValid) {
    set_problem(fmt::format("lost {} ({}); profiling series are omitted until it answers again (retried every {} s)",
                            endpoint_.describe(), lib_->error_string(r), opt_.retry.count() / 1000));
    teardown(false);
    next_try_ = clock_.steady_now() + opt_.retry;
    return out;
  }
  if (r != kOk) {
    set_problem(fmt::format("dcgmEntitiesGetLatestValues through {}: {}", endpoint_.describe(), lib_->error_string(r)));
    return out;
  }
  set_problem("");
  // Per GPU: the first status other than OK / not yet there, and the field it came with.
  std::map<std::string, std::pair<Return, unsigned short>> status;
  for (size_t i = 0; i < n; ++i) {
    const FieldValue& v = values_[i];
    auto g = by_id.find(v.entityId);
    if (v.entityGroupId != kEntityGpu || g == by_id.end()) continue;
    const std::string& uuid = g->second->uuid;
    status.try_emplace(uuid, kOk, 0);
    if (v.status == kNotWatched || v.status == kNoData) continue;
    if (v.status != kOk) {
      if (status[uuid].first == kOk) status[uuid] = {v.status, v.fieldId};
      continue;
    }
    double x = 0;
    long long blank_offset = -1;
    if (v.fieldType == kTypeDouble) {
      if (is_blank(v.value.dbl)) blank_offset = static_cast<long long>(v.value.dbl - kDoubleBlank);
      x = v.value.dbl;
    } else if (v.fieldType == kTypeInt64) {
      if (is_blank(v.value.i64)) blank_offset = v.value.i64 - kInt64Blank;
      x = static_cast<double>(v.value.i64);
    } else {
      continue;
    }
    const auto key = std::make_pair(uuid, v.fieldId);
    if (blank_offset >= 0) {
      if (blank_logged_.insert(key).second) {
        log::warn(fmt::format("DCGM answers {} for {} on GPU {}; that series is omitted while it does",
                              blank_kind(blank_offset), field_list({v.fieldId}), uuid));
      }
      continue;
    }
    blank_logged_.erase(key);
    const auto now = clock_.steady_now();
    auto [seen, first] = seen_.try_emplace(key, Seen{v.ts, now});
    if (!first && seen->second.ts != v.ts) seen->second = Seen{v.ts, now};
    if (now - seen->second.since > stale_after_) {
      if (stale_logged_.insert(key).second) {
        log::warn(fmt::format("DCGM has not refreshed {} on GPU {} for {} s; that series is omitted until it does",
                              field_list({v.fieldId}), uuid,
                              std::chrono::duration_cast<std::chrono::seconds>(now - seen->second.since).count()));
      }
      continue;
    }
    stale_logged_.erase(key);
    out[uuid][v.fieldId] = x;
  }
  for (const auto& [uuid, first] : status) {
    const auto [st, field] = first;
    const auto prev = gpu_status_.find(uuid);
    const Return before = prev == gpu_status_.end() ? kOk : prev->second;
    if (st == before) continue;
    if (st != kOk) {
      log::warn(fmt::format("DCGM reports {} for GPU {} ({}); the series it affects are omitted until it recovers",
                            lib_->error_string(st), uuid, field_list({field})));
    } else {
      log::info(fmt::format("DCGM reads GPU {} again", uuid));
    }
    gpu_status_[uuid] = st;
  }
  return out;
}

void Profiler::fill(std::vector<gpu::Telemetry>& ts) {
  const Readings r = read();
  if (r.empty()) return;
  for (auto& t : ts) {
    if (t.gpu_instance_id || t.lost) continue;
    const auto it = r.find(t.uuid);
    if (it == r.end()) continue;
    for (const auto& [id, v] : it->second) {
      // NVML GPM's reading wins where the sampler has one (Hopper and later).
      auto keep = [&](std::optional<double>& member) {
        if (!member) member = v;
      };
      switch (id) {
        case kFieldProfGrEngineActive:
          keep(t.gr_engine_active);
          break;
        case kFieldProfPipeTensorActive:
          keep(t.tensor_active);
          break;
        case kFieldProfDramActive:
          keep(t.dram_active);
          break;
        case kFieldProfPcieTxBytes:
          keep(t.pcie_tx_bytes_per_s);
          break;
        case kFieldProfPcieRxBytes:
          keep(t.pcie_rx_bytes_per_s);
          break;
        default:
          t.prof_fields[id] = v;
      }
    }
  }
}

std::string missing_fields_message(const gpu::Inventory& inv, const std::vector<unsigned short>& wanted,
                                   const std::string& dcgm_problem) {
  // GPUs grouped by the fields they lack.
  std::map<std::vector<unsigned short>, std::vector<std::string>> lacking;
  for (const auto& g : inv.gpus) {
    std::vector<unsigned short> missing;
    for (auto id : wanted) {
      if (!(g.gpm_supported && gpm_backed(id))) missing.push_back(id);
    }
    std::ranges::sort(missing);
    missing.erase(std::unique(missing.begin(), missing.end()), missing.end());
    if (missing.empty()) continue;
    lacking[missing].push_back(
        fmt::format("GPU {} ({}{})", g.index, g.name, g.architecture_name.empty() ? "" : ", " + g.architecture_name));
  }
  std::string out;
  for (const auto& [fields, gpus] : lacking) {
    std::string names;
    for (const auto& n : gpus) names += names.empty() ? n : ", " + n;
    if (!out.empty()) out += "; ";
    out += fmt::format("{} not exported for {}", field_list(fields), names);
  }
  if (out.empty()) return out;
  return out + fmt::format(
                   ": NVML provides profiling fields only through GPM on Hopper and newer; DCGM provides them on Volta "
                   "and newer but is not available ({}). Install DCGM on the node (the agent loads libdcgm.so.4 or "
                   ".so.3), or run nv-hostengine and point -r / DCGM_REMOTE_HOSTENGINE_INFO at it",
                   dcgm_problem);
}

}  // namespace kgpu::dcgm
