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

bool Profiler::setup_group(Group& grp, const std::vector<EntityPair>& members, const std::string& what,
                           const std::string& tag) {
  const auto& s = lib_->symbols();
  const Handle h = conn_->handle();
  const std::string name = fmt::format("{}-{}-{}", name_prefix_, ++sequence_, tag);
  Return r = lib_->call(s.dcgmGroupCreate, h, kGroupEmpty, name.c_str(), &grp.id);
  if (r == kOk) {
    grp.created = true;
    for (const auto& m : members) {
      r = lib_->call(s.dcgmGroupAddEntity, h, grp.id, m.entityGroupId, m.entityId);
      if (r != kOk) break;
    }
  }
  if (r != kOk) {
    log::warn(fmt::format("DCGM: cannot make a group for {}: {}; their profiling series are omitted", what,
                          lib_->error_string(r)));
    return r != kConnectionNotValid;
  }
  const long long every_us = std::max<long long>(100000, opt_.interval.count() * 1000LL);
  auto watch = [&](const std::vector<unsigned short>& fields) -> Return {
    bool ok = false;
    const FieldGroupId fg = field_group(fields, &ok);
    if (!ok) return kGenericError;
    const Return w = lib_->call(s.dcgmWatchFields, h, grp.id, fg, every_us, 0.0, 2);
    if (w == kOk) grp.field_groups.push_back(fg);
    return w;
  };
  if (const Return all = watch(opt_.fields); all == kOk) {
    grp.served.insert(opt_.fields.begin(), opt_.fields.end());
    return true;
  } else if (all == kConnectionNotValid) {
    return false;
  }
  // Some field cannot be watched there: find out which, one by one.
  std::vector<std::string> refused;
  for (auto f : opt_.fields) {
    const Return one = watch({f});
    if (one == kOk) {
      grp.served.insert(f);
    } else {
      if (one == kConnectionNotValid) return false;
      refused.push_back(fmt::format("{} ({})", field_list({f}), return_name(one)));
    }
  }
  std::string list;
  for (const auto& x : refused) list += list.empty() ? x : ", " + x;
  log::warn(fmt::format("DCGM does not serve {} on {}; those series are omitted there", list, what));
  return true;
}

void Profiler::drop_group(Group& grp) {
  if (conn_ && grp.created) {
    const auto& s = lib_->symbols();
    const Handle h = conn_->handle();
    for (auto fg : grp.field_groups) lib_->call(s.dcgmUnwatchFields, h, grp.id, fg);
    lib_->call(s.dcgmGroupDestroy, h, grp.id);
  }
  grp = Group{};
}

void Profiler::setup_gpu(Gpu& g) {
  if (setup_group(g.whole, {{kEntityGpu, g.id}}, fmt::format("GPU {} (DCGM GPU {})", g.uuid, g.id),
                  fmt::format("gpu{}", g.id))) {
    setup_instances(g);
  }
  note_watched(g);
}

void Profiler::setup_instances(Gpu& g) {
  if (g.instances.empty()) return;
  std::vector<EntityPair> members;
  std::string nvml_ids, dcgm_ids;
  for (const auto& i : g.instances) {
    members.push_back({kEntityGpuInstance, i.id});
    nvml_ids += fmt::format("{}{}", nvml_ids.empty() ? "" : ", ", i.nvml_id);
    dcgm_ids += fmt::format("{}{}", dcgm_ids.empty() ? "" : ", ", i.id);
  }
  setup_group(g.mig, members,
              fmt::format("the MIG GPU instances {} of GPU {} (DCGM GPU instances {})", nvml_ids, g.uuid, dcgm_ids),
              fmt::format("gpu{}-mig", g.id));
}

void Profiler::note_watched(const Gpu& g) {
  watched_[g.uuid] = g.whole.served;
  std::erase_if(watched_instances_, [&](const auto& kv) { return kv.first.gpu_uuid == g.uuid; });
  for (const auto& i : g.instances) watched_instances_[{g.uuid, i.nvml_id}] = g.mig.served;
}

std::optional<std::map<unsigned, std::vector<Profiler::Instance>>> Profiler::read_hierarchy(bool warn) {
  // About 72 KiB: on the heap, zeroed.
  auto h = std::make_unique<MigHierarchy>();
  h->version = kMigHierarchyVersion;
  const Return r = lib_->call(lib_->symbols().dcgmGetGpuInstanceHierarchy, conn_->handle(), h.get());
  if (r != kOk) {
    const std::string why = lib_->error_string(r);
    if (warn && why != hierarchy_problem_) {
      log::warn(
          fmt::format("DCGM does not list its MIG GPU instances (dcgmGetGpuInstanceHierarchy: {}); the "
                      "DCGM profiling series of MIG instances are omitted",
                      why));
      hierarchy_problem_ = why;
    }
    return std::nullopt;
  }
  hierarchy_problem_.clear();
  std::map<unsigned, std::string> uuid_of;
  for (const auto& g : gpus_) uuid_of[g.id] = g.uuid;
  std::map<unsigned, std::vector<Instance>> out;
  const unsigned n = std::min(h->count, kMaxHierarchyEntries);
  for (unsigned k = 0; k < n; ++k) {
    const MigHierarchyEntry& e = h->entityList[k];
    if (e.entity.entityGroupId != kEntityGpuInstance || e.parent.entityGroupId != kEntityGpu) continue;
    const auto parent = uuid_of.find(e.parent.entityId);
    if (parent == uuid_of.end()) continue;  // a GPU without a readable UUID
    const std::string uuid(e.info.gpuUuid, strnlen(e.info.gpuUuid, sizeof e.info.gpuUuid));
    auto& list = out[e.parent.entityId];
    const bool twice = std::ranges::any_of(list, [&](const Instance& i) { return i.nvml_id == e.info.nvmlInstanceId; });
    if ((!uuid.empty() && uuid != parent->second) || twice) {
      log::warn(
          fmt::format("DCGM lists GPU instance {} (DCGM id {}) under GPU {} as {}; its profiling series are "
                      "omitted",
                      e.info.nvmlInstanceId, e.entity.entityId, parent->second,
                      twice ? "a second instance with that id" : "belonging to '" + uuid.substr(0, 64) + "'"));
      continue;
    }
    list.push_back({e.entity.entityId, e.info.nvmlInstanceId});
  }
  for (auto& [id, list] : out) std::ranges::sort(list, {}, &Instance::nvml_id);
  return out;
}

void Profiler::refresh_instances() {
  auto found = read_hierarchy(true);
  if (!found) return;
  for (auto& g : gpus_) {
    if (!conn_) return;
    std::vector<Instance> now;
    if (auto it = found->find(g.id); it != found->end()) now = std::move(it->second);
    if (now == g.instances) continue;
    drop_group(g.mig);
    g.instances = std::move(now);
    std::string ids;
    for (const auto& i : g.instances) ids += fmt::format("{}{}", ids.empty() ? "" : ", ", i.nvml_id);
    log::info(fmt::format("DCGM's MIG layout of GPU {} changed: GPU instances {}", g.uuid, ids.empty() ? "none" : ids));
    setup_instances(g);
    note_watched(g);
  }
}

void Profiler::check_layout(const std::vector<gpu::Telemetry>& ts) {
  if (!conn_) return;
  std::map<unsigned, std::string> uuid_of;  // NVML index -> GPU UUID, for GPUs NVML still reads
  std::set<std::string> lost;
  for (const auto& t : ts) {
    if (t.gpu_instance_id) continue;
    if (t.lost) lost.insert(t.uuid);
    uuid_of[t.gpu_index] = t.uuid;
  }
  std::set<InstanceKey> nvml, ours;
  for (const auto& g : gpus_) {
    if (lost.contains(g.uuid)) continue;
    for (const auto& i : g.instances) ours.insert({g.uuid, i.nvml_id});
  }
  for (const auto& t : ts) {
    if (!t.gpu_instance_id) continue;
    const auto u = uuid_of.find(t.gpu_index);
    if (u == uuid_of.end() || lost.contains(u->second) ||
        std::ranges::none_of(gpus_, [&](const Gpu& g) { return g.uuid == u->second; })) {
      continue;
    }
    nvml.insert({u->second, *t.gpu_instance_id});
  }
  if (nvml == ours) {
    next_layout_try_ = {};
    return;
  }
  const auto now = clock_.steady_now();
  if (now < next_layout_try_) return;
  next_layout_try_ = now + opt_.retry;
  refresh_instances();
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
  // MIG GPU instances: a DCGM that cannot list them serves the GPUs; fill() asks again, and says
  // why, once NVML shows instances.
  if (auto found = read_hierarchy(false)) {
    for (auto& g : gpus_) {
      if (auto it = found->find(g.id); it != found->end()) g.instances = std::move(it->second);
    }
  }
  for (auto& g : gpus_) setup_gpu(g);
  if (!conn_) return false;
  auto empty = [](const auto& kv) { return kv.second.empty(); };
  if (std::ranges::all_of(watched_, empty) && std::ranges::all_of(watched_instances_, empty)) {
    return give_up("no GPU serves any of " + field_list(opt_.fields));
  }
  lib_->call(s.dcgmUpdateAllFields, h, 1);  // the first values before the first sample
  problem_.clear();
  std::string served;
  for (const auto& g : gpus_) {
    served += fmt::format("{}{} ({} fields)", served.empty() ? "" : ", ", g.uuid, g.whole.served.size());
    if (g.instances.empty()) continue;
    std::string gis;
    for (const auto& i : g.instances) gis += fmt::format("{}{}", gis.empty() ? "" : ", ", i.nvml_id);
    served += fmt::format(" with MIG GPU instances {} ({} fields)", gis, g.mig.served.size());
  }
  log::info(fmt::format("reading profiling fields through {}: {}", endpoint_.describe(), served),
            {log::kv("library", lib_->path())});
  return true;
}

void Profiler::teardown(bool alive) {
  if (!conn_) return;
  if (alive) {
    for (auto& g : gpus_) {
      drop_group(g.mig);
      drop_group(g.whole);
    }
    for (const auto& [fields, fg] : field_groups_)
      lib_->call(lib_->symbols().dcgmFieldGroupDestroy, conn_->handle(), fg);
  }
  conn_.reset();
  gpus_.clear();
  field_groups_.clear();
  watched_.clear();
  watched_instances_.clear();
  gpu_status_.clear();
  seen_.clear();
  stale_logged_.clear();
  next_layout_try_ = {};
}

Readings Profiler::read() {
  Readings out;
  if (!conn_) {
    if (!library_ok_ || clock_.steady_now() < next_try_ || !connect()) return out;
  }
  // What each entity we read is: its name in logs and where its values go.
  struct Target {
    std::string name;
    const std::string* uuid;
    std::optional<unsigned> gi;
  };
  std::vector<EntityPair> entities;
  std::map<std::pair<int, unsigned>, Target> targets;
  for (const auto& g : gpus_) {
    if (!g.whole.served.empty()) {
      entities.push_back({kEntityGpu, g.id});
      targets[{kEntityGpu, g.id}] = {"GPU " + g.uuid, &g.uuid, std::nullopt};
    }
    if (g.mig.served.empty()) continue;
    for (const auto& i : g.instances) {
      entities.push_back({kEntityGpuInstance, i.id});
      targets[{kEntityGpuInstance, i.id}] = {fmt::format("GPU instance {} of GPU {}", i.nvml_id, g.uuid), &g.uuid,
                                             i.nvml_id};
    }
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
  // Per entity: the first status other than OK / not yet there, and the field it came with.
  std::map<std::string, std::pair<Return, unsigned short>> status;
  for (size_t i = 0; i < n; ++i) {
    const FieldValue& v = values_[i];
    const auto target = targets.find({v.entityGroupId, v.entityId});
    if (target == targets.end()) continue;
    const std::string& name = target->second.name;
    status.try_emplace(name, kOk, 0);
    if (v.status == kNotWatched || v.status == kNoData) continue;
    if (v.status != kOk) {
      if (status[name].first == kOk) status[name] = {v.status, v.fieldId};
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
    const auto key = std::make_pair(name, v.fieldId);
    if (blank_offset >= 0) {
      if (blank_logged_.insert(key).second) {
        log::warn(fmt::format("DCGM answers {} for {} on {}; that series is omitted while it does",
                              blank_kind(blank_offset), field_list({v.fieldId}), name));
      }
      continue;
    }
    blank_logged_.erase(key);
    const auto now = clock_.steady_now();
    auto [seen, first] = seen_.try_emplace(key, Seen{v.ts, now});
    if (!first && seen->second.ts != v.ts) seen->second = Seen{v.ts, now};
    if (now - seen->second.since > stale_after_) {
      if (stale_logged_.insert(key).second) {
        log::warn(fmt::format("DCGM has not refreshed {} on {} for {} s; that series is omitted until it does",
                              field_list({v.fieldId}), name,
                              std::chrono::duration_cast<std::chrono::seconds>(now - seen->second.since).count()));
      }
      continue;
    }
    stale_logged_.erase(key);
    const Target& t = target->second;
    if (t.gi) {
      out.instances[{*t.uuid, *t.gi}][v.fieldId] = x;
    } else {
      out.gpus[*t.uuid][v.fieldId] = x;
    }
  }
  for (const auto& [name, first] : status) {
    const auto [st, field] = first;
    const auto prev = gpu_status_.find(name);
    const Return before = prev == gpu_status_.end() ? kOk : prev->second;
    if (st == before) continue;
    if (st != kOk) {
      log::warn(fmt::format("DCGM reports {} for {} ({}); the series it affects are omitted until it recovers",
                            lib_->error_string(st), name, field_list({field})));
    } else {
      log::info(fmt::format("DCGM reads {} again", name));
    }
    gpu_status_[name] = st;
  }
  return out;
}

namespace {

// Sets the readings NVML left empty: NVML GPM's reading wins where the sampler has one (Hopper and later).
void apply(const Values& values, gpu::Telemetry& t) {
  for (const auto& [id, v] : values) {
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

}  // namespace

void Profiler::fill(std::vector<gpu::Telemetry>& ts) {
  check_layout(ts);
  const Readings r = read();
  if (r.empty()) return;
  std::map<unsigned, std::string> uuid_of;  // NVML index -> GPU UUID
  for (const auto& t : ts) {
    if (!t.gpu_instance_id) uuid_of[t.gpu_index] = t.uuid;
  }
  for (auto& t : ts) {
    if (t.lost) continue;
    if (!t.gpu_instance_id) {
      if (const auto it = r.gpus.find(t.uuid); it != r.gpus.end()) apply(it->second, t);
      continue;
    }
    const auto parent = uuid_of.find(t.gpu_index);
    if (parent == uuid_of.end()) continue;
    if (const auto it = r.instances.find({parent->second, *t.gpu_instance_id}); it != r.instances.end()) {
      apply(it->second, t);
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
