#include "apiclient/informer.h"

#include <random>

namespace kgpu::kube {

using nlohmann::json;

namespace index {

IndexFunc by_namespace() {
  return [](const json& o) -> std::vector<std::string> {
    const auto m = o.find("metadata");
    if (m == o.end() || !m->is_object()) return {};
    return {m->value("namespace", "")};
  };
}

IndexFunc by_node_name() {
  return [](const json& o) -> std::vector<std::string> {
    const auto s = o.find("spec");
    if (s == o.end() || !s->is_object()) return {};
    const std::string node = s->value("nodeName", "");
    if (node.empty()) return {};
    return {node};
  };
}

IndexFunc by_label(std::string key) {
  return [key = std::move(key)](const json& o) -> std::vector<std::string> {
    const auto m = o.find("metadata");
    if (m == o.end() || !m->is_object()) return {};
    const auto l = m->find("labels");
    if (l == m->end() || !l->is_object()) return {};
    const auto v = l->find(key);
    if (v == l->end() || !v->is_string()) return {};
    return {v->get<std::string>()};
  };
}

}  // namespace index

namespace {
std::string_view resource_version_of(const json& o) {
  const auto m = o.find("metadata");
  if (m == o.end() || !m->is_object()) return {};
  const auto rv = m->find("resourceVersion");
  return rv != m->end() && rv->is_string() ? std::string_view(rv->get_ref<const std::string&>()) : std::string_view();
}
}  // namespace

Informer::Informer(Client& client, InformerOptions options) : client_(client), options_(std::move(options)) {}

Informer::~Informer() { stop(); }

void Informer::add_handlers(InformerHandlers h) { handlers_.push_back(std::move(h)); }

void Informer::add_index(const std::string& name, IndexFunc keys) { index_funcs_[name] = std::move(keys); }

void Informer::start() {
  if (thread_.joinable()) return;
  stop_ = false;
  thread_ = std::thread([this] { run(); });
}

void Informer::stop() {
  stop_ = true;
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

bool Informer::wait_for_sync(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  return cv_.wait_for(lock, timeout, [this] { return synced_; });
}

bool Informer::synced() const {
  std::lock_guard lock(mu_);
  return synced_;
}

std::string Informer::key_of(const json& o) {
  const auto m = o.find("metadata");
  if (m == o.end() || !m->is_object()) return {};
  const std::string ns = m->value("namespace", "");
  const std::string name = m->value("name", "");
  return ns.empty() ? name : ns + "/" + name;
}

ObjectRef Informer::get(const std::string& key) const {
  std::lock_guard lock(mu_);
  const auto it = items_.find(key);
  return it == items_.end() ? nullptr : it->second;
}

std::vector<ObjectRef> Informer::list() const {
  std::lock_guard lock(mu_);
  std::vector<ObjectRef> out;
  out.reserve(items_.size());
  for (const auto& [k, v] : items_) out.push_back(v);
  return out;
}

std::vector<ObjectRef> Informer::by_index(const std::string& index, const std::string& key) const {
  std::lock_guard lock(mu_);
  std::vector<ObjectRef> out;
  const auto idx = indexes_.find(index);
  if (idx == indexes_.end()) return out;
  const auto keys = idx->second.find(key);
  if (keys == idx->second.end()) return out;
  for (const auto& k : keys->second) {
    if (const auto it = items_.find(k); it != items_.end()) out.push_back(it->second);
  }
  return out;
}

size_t Informer::size() const {
  std::lock_guard lock(mu_);
  return items_.size();
}

std::string Informer::resource_version() const {
  std::lock_guard lock(mu_);
  return rv_;
}

InformerStats Informer::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

std::string Informer::last_error() const {
  std::lock_guard lock(mu_);
  return last_error_;
}

ObjectRef Informer::prepare(json object) const {
  if (auto m = object.find("metadata"); m != object.end() && m->is_object()) m->erase("managedFields");
  if (options_.transform) options_.transform(object);
  return std::make_shared<const json>(std::move(object));
}

// Files or unfiles `key` in every index. Caller holds mu_.
void Informer::file(const std::string& key, const ObjectRef& obj, bool add) {
  for (const auto& [name, fn] : index_funcs_) {
    auto& idx = indexes_[name];
    for (const auto& k : fn(*obj)) {
      if (add) {
        idx[k].insert(key);
      } else if (auto it = idx.find(k); it != idx.end()) {
        it->second.erase(key);
        if (it->second.empty()) idx.erase(it);
      }
    }
  }
}

bool Informer::relist() {
  ListOptions lo;
  lo.label_selector = options_.label_selector;
  lo.field_selector = options_.field_selector;
  lo.limit = options_.page_size;
  std::string rv;
  auto items = client_.list_all(options_.resource, options_.ns, lo, &rv);
  if (!items) {
    std::lock_guard lock(mu_);
    ++stats_.errors;
    last_error_ = "list " + options_.resource.plural + ": " + items.error().text();
    return false;
  }
  // The new state, and what changed against the cache.
  std::unordered_map<std::string, ObjectRef> fresh;
  fresh.reserve(items->size());
  for (auto& o : *items) {
    ObjectRef ref = prepare(std::move(o));
    fresh.emplace(key_of(*ref), std::move(ref));
  }
  std::vector<ObjectRef> added, deleted;
  std::vector<std::pair<ObjectRef, ObjectRef>> updated;
  {
    std::lock_guard lock(mu_);
    for (const auto& [k, obj] : fresh) {
      const auto it = items_.find(k);
      if (it == items_.end()) {
        added.push_back(obj);
      } else if (resource_version_of(*it->second) != resource_version_of(*obj)) {  // same version: same object
        updated.emplace_back(it->second, obj);
      }
    }
    for (const auto& [k, obj] : items_) {
      if (!fresh.contains(k)) deleted.push_back(obj);
    }
    indexes_.clear();
    items_ = std::move(fresh);
    for (const auto& [k, obj] : items_) file(k, obj, true);
    rv_ = rv;
    ++stats_.lists;
    last_error_.clear();
  }
  for (const auto& h : handlers_) {
    if (h.on_add) for (const auto& o : added) h.on_add(o);
    if (h.on_update) for (const auto& [a, b] : updated) h.on_update(a, b);
    if (h.on_delete) for (const auto& o : deleted) h.on_delete(o);
  }
  // Synced only once the handlers hold the first list: a reader that waits for synced() (a
  // scheduler's /readyz) must find every listed object in what the handlers fed.
  {
    std::lock_guard lock(mu_);
    synced_ = true;
  }
  cv_.notify_all();
  return true;
}

void Informer::apply(const std::string& type, json object) {
  if (type == "BOOKMARK") {
    std::lock_guard lock(mu_);
    if (auto m = object.find("metadata"); m != object.end() && m->is_object()) rv_ = m->value("resourceVersion", rv_);
    return;
  }
  ObjectRef obj = prepare(std::move(object));
  const std::string key = key_of(*obj);
  ObjectRef old;
  {
    std::lock_guard lock(mu_);
    ++stats_.events;
    rv_ = (*obj)["metadata"].value("resourceVersion", rv_);
    const auto it = items_.find(key);
    if (it != items_.end()) {
      old = it->second;
      file(key, old, false);
    }
    if (type == "DELETED") {
      if (it != items_.end()) items_.erase(it);
    } else {
      items_[key] = obj;
      file(key, obj, true);
    }
  }
  for (const auto& h : handlers_) {
    if (type == "DELETED") {
      if (h.on_delete) h.on_delete(old ? old : obj);
    } else if (old) {
      if (h.on_update) h.on_update(old, obj);
    } else if (h.on_add) {
      h.on_add(obj);
    }
  }
}

bool Informer::watch_once(bool& gone) {
  WatchOptions wo;
  wo.label_selector = options_.label_selector;
  wo.field_selector = options_.field_selector;
  wo.resource_version = resource_version();
  wo.timeout_seconds = options_.watch_timeout_seconds;
  {
    std::lock_guard lock(mu_);
    ++stats_.watches;
  }
  auto next_resync = options_.clock->steady_now() + options_.resync;
  auto r = client_.watch(
      options_.resource, options_.ns, wo,
      [&](WatchEvent&& ev) {
        apply(ev.type, std::move(ev.object));
        if (options_.resync.count() > 0 && options_.clock->steady_now() >= next_resync) {
          next_resync = options_.clock->steady_now() + options_.resync;
          for (const auto& o : list()) {
            for (const auto& h : handlers_) {
              if (h.on_update) h.on_update(o, o);
            }
          }
        }
        return !stop_.load();
      },
      &stop_);
  if (r) return true;
  std::lock_guard lock(mu_);
  if (r.error().gone()) {
    gone = true;
    ++stats_.relists_after_gone;
    return true;
  }
  ++stats_.errors;
  last_error_ = "watch " + options_.resource.plural + ": " + r.error().text();
  return false;
}

void Informer::sleep_backoff(std::chrono::milliseconds& backoff) {
  thread_local std::mt19937 rng{std::random_device{}()};
  std::uniform_real_distribution<double> jitter(0.5, 1.5);
  const auto wait = std::chrono::milliseconds(static_cast<int64_t>(static_cast<double>(backoff.count()) * jitter(rng)));
  backoff = std::min(backoff * 2, options_.max_backoff);
  std::unique_lock lock(mu_);
  options_.clock->wait_for(cv_, lock, wait, [this] { return stop_.load(); });
}

void Informer::run() {
  auto backoff = options_.initial_backoff;
  bool need_list = true;
  while (!stop_) {
    if (need_list) {
      if (!relist()) {
        sleep_backoff(backoff);
        continue;
      }
      need_list = false;
      backoff = options_.initial_backoff;
    }
    bool gone = false;
    if (!watch_once(gone)) {
      sleep_backoff(backoff);  // resume the watch from the last version seen
      continue;
    }
    backoff = options_.initial_backoff;
    if (gone) need_list = true;
  }
}

}  // namespace kgpu::kube
