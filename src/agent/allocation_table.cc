#include "agent/allocation_table.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>
#include <tuple>

#include "common/files.h"
#include "common/json_guard.h"
#include "common/timestamp.h"

namespace kgpu::agent {

namespace {

using ContainerKey = std::tuple<std::string, std::string, std::string, std::string>;  // ns, pod, container, resource

// PodResources devices grouped by container and resource.
std::map<ContainerKey, std::vector<std::string>> by_container(const std::vector<kubelet::ContainerDevice>& listed) {
  std::map<ContainerKey, std::vector<std::string>> out;
  for (const auto& d : listed) out[{d.ns, d.pod, d.container, d.resource}].push_back(d.device_id);
  return out;
}

bool same_set(std::vector<std::string> a, std::vector<std::string> b) {
  std::ranges::sort(a);
  std::ranges::sort(b);
  return a == b;
}

Result<std::vector<std::string>> id_list(const nlohmann::json& e, const char* key, const std::string& at) {
  const auto v = e.find(key);
  if (v == e.end()) return std::vector<std::string>{};
  if (!v->is_array()) return fail(ErrorCode::kInvalidArgument, "{}.{}: expected a list of device IDs", at, key);
  if (v->size() > kMaxIdsPerEntry) {
    return fail(ErrorCode::kInvalidArgument, "{}.{}: {} IDs, more than the limit of {}", at, key, v->size(),
                kMaxIdsPerEntry);
  }
  std::vector<std::string> out;
  for (size_t i = 0; i < v->size(); ++i) {
    const auto& id = (*v)[i];
    if (!id.is_string() || id.get_ref<const std::string&>().empty() || id.get_ref<const std::string&>().size() > 256) {
      return fail(ErrorCode::kInvalidArgument, "{}.{}[{}]: expected a device ID (1 to 256 characters)", at, key, i);
    }
    out.push_back(id.get<std::string>());
  }
  return out;
}

}  // namespace

void AllocationTable::add(AllocationEntry e) { entries_.push_back(std::move(e)); }

std::vector<AllocationTable::Holding> AllocationTable::holdings(
    const std::vector<kubelet::ContainerDevice>& listed) const {
  std::vector<Holding> out;
  for (const auto& e : entries_) out.push_back({e.uid, e.ns, e.pod, e.container, e.resource, e.actual_ids});
  for (const auto& [key, ids] : by_container(listed)) {
    const auto& [ns, pod, container, resource] = key;
    if (find(ns, pod, container, resource) != nullptr) continue;
    // Not yet reconciled: an unidentified entry with these kubelet IDs is this container.
    const bool pending = std::ranges::any_of(entries_, [&](const AllocationEntry& e) {
      return !e.identified() && e.resource == resource && same_set(e.kubelet_ids, ids);
    });
    if (!pending) out.push_back({"", ns, pod, container, resource, ids});
  }
  return out;
}

std::set<std::pair<std::string, std::string>> AllocationTable::served() const {
  std::set<std::pair<std::string, std::string>> out;
  for (const auto& e : entries_) {
    if (!e.uid.empty()) out.emplace(e.uid, e.container);
  }
  return out;
}

const AllocationEntry* AllocationTable::find(const std::string& ns, const std::string& pod, const std::string& container,
                                             const std::string& resource) const {
  for (const auto& e : entries_) {
    if (e.ns == ns && e.pod == pod && e.container == container && e.resource == resource) return &e;
  }
  return nullptr;
}

bool AllocationTable::reconcile(const std::vector<kubelet::ContainerDevice>& listed,
                                std::chrono::system_clock::time_point now, std::chrono::milliseconds grace) {
  const auto groups = by_container(listed);
  bool changed = false;
  for (auto& e : entries_) {
    if (e.identified()) continue;
    for (const auto& [key, ids] : groups) {
      const auto& [ns, pod, container, resource] = key;
      if (resource != e.resource || !same_set(ids, e.kubelet_ids) || find(ns, pod, container, resource) != nullptr) {
        continue;
      }
      e.ns = ns;
      e.pod = pod;
      e.container = container;
      changed = true;
      break;
    }
  }
  const auto before = entries_.size();
  std::erase_if(entries_, [&](const AllocationEntry& e) {
    if (e.identified() && groups.contains({e.ns, e.pod, e.container, e.resource})) return false;
    const auto at = parse_rfc3339(e.allocated_at);
    return !at || now - *at > grace;
  });
  return changed || entries_.size() != before;
}

std::vector<kubelet::ContainerDevice> AllocationTable::translate(
    const std::vector<kubelet::ContainerDevice>& listed) const {
  std::vector<kubelet::ContainerDevice> out;
  for (const auto& h : holdings(listed)) {
    if (h.pod.empty()) continue;
    for (const auto& id : h.ids) out.push_back({h.ns, h.pod, h.container, h.resource, id});
  }
  return out;
}

std::string AllocationTable::to_json() const {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& e : entries_) {
    list.push_back({{"uid", e.uid},
                    {"namespace", e.ns},
                    {"pod", e.pod},
                    {"container", e.container},
                    {"resource", e.resource},
                    {"kubeletIDs", e.kubelet_ids},
                    {"actualIDs", e.actual_ids},
                    {"allocatedAt", e.allocated_at},
                    {"assigned", e.assigned}});
  }
  return nlohmann::json{{"version", 1}, {"entries", std::move(list)}}.dump(1) + "\n";
}

Result<AllocationTable> AllocationTable::parse(std::string_view text) {
  if (text.size() > kMaxCheckpointBytes) {
    return fail(ErrorCode::kInvalidArgument, "{} bytes, more than the limit of {}", text.size(), kMaxCheckpointBytes);
  }
  if (!json_depth_within(text, 8)) return fail(ErrorCode::kInvalidArgument, "nested deeper than 8 levels");
  const auto doc = nlohmann::json::parse(text, nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) return fail(ErrorCode::kInvalidArgument, "not a JSON object");
  if (const auto v = doc.find("version"); v == doc.end() || *v != 1) return fail(ErrorCode::kInvalidArgument, "version: expected 1");
  const auto entries = doc.find("entries");
  if (entries == doc.end() || !entries->is_array()) return fail(ErrorCode::kInvalidArgument, "entries: expected a list");
  if (entries->size() > kMaxCheckpointEntries) {
    return fail(ErrorCode::kInvalidArgument, "entries: {}, more than the limit of {}", entries->size(),
                kMaxCheckpointEntries);
  }
  AllocationTable t;
  for (size_t i = 0; i < entries->size(); ++i) {
    const auto& j = (*entries)[i];
    const std::string at = fmt::format("entries[{}]", i);
    if (!j.is_object()) return fail(ErrorCode::kInvalidArgument, "{}: expected an object", at);
    AllocationEntry e;
    for (auto [key, field] : {std::pair{"uid", &e.uid}, {"namespace", &e.ns}, {"pod", &e.pod},
                              {"container", &e.container}, {"resource", &e.resource}, {"allocatedAt", &e.allocated_at}}) {
      const auto v = j.find(key);
      if (v == j.end()) continue;
      if (!v->is_string() || v->get_ref<const std::string&>().size() > 512) {
        return fail(ErrorCode::kInvalidArgument, "{}.{}: expected a string of at most 512 characters", at, key);
      }
      *field = v->get<std::string>();
    }
    if (e.resource.empty()) return fail(ErrorCode::kInvalidArgument, "{}.resource: missing", at);
    auto kubelet_ids = id_list(j, "kubeletIDs", at);
    if (!kubelet_ids) return std::unexpected(kubelet_ids.error());
    auto actual_ids = id_list(j, "actualIDs", at);
    if (!actual_ids) return std::unexpected(actual_ids.error());
    if (actual_ids->empty()) return fail(ErrorCode::kInvalidArgument, "{}.actualIDs: empty", at);
    e.kubelet_ids = std::move(*kubelet_ids);
    e.actual_ids = std::move(*actual_ids);
    if (const auto a = j.find("assigned"); a != j.end() && a->is_boolean()) e.assigned = a->get<bool>();
    t.entries_.push_back(std::move(e));
  }
  return t;
}

Result<AllocationTable> AllocationTable::load(const std::string& path) {
  auto text = read_file_limited(path, kMaxCheckpointBytes);
  if (!text) {
    if (text.error().code == ErrorCode::kNotFound) return AllocationTable{};
    return std::unexpected(text.error());
  }
  auto t = parse(*text);
  if (!t) return std::unexpected(t.error().wrap(path));
  return t;
}

Result<void> AllocationTable::save(const std::string& path) const {
  return write_file_atomically(path, to_json(), 0600);
}

}  // namespace kgpu::agent
