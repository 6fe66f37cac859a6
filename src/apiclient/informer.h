// An informer: list, then watch, into a local cache with indexes and change handlers — what
// client-go's SharedIndexInformer gives Go programs, for one resource (optionally one namespace and
// selectors).
//
// The loop: list every page; replace the cache, telling the handlers what was added, changed or
// removed since the last list; watch from the list's resourceVersion with bookmarks; re-watch from
// the last version seen when the server ends the stream; relist on 410 Expired/Gone; on any other
// failure wait with exponential back-off and jitter, then resume. `resync` calls on_update(o, o)
// for every cached object once that period has passed, at the next event or BOOKMARK (the API
// server sends bookmarks about once a minute, so an idle cluster still resyncs). Objects are kept as shared immutable JSON with
// metadata.managedFields dropped (the `transform` hook may drop more), so memory stays
// proportional to what callers need.
//
// Threads: the informer runs one thread; handlers run on it, in event order, without the cache
// lock held (they may read the cache). get/list/by_index may be called from any thread.
#pragma once

#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "apiclient/client.h"
#include "common/clock.h"

namespace kgpu::kube {

using ObjectRef = std::shared_ptr<const nlohmann::json>;

struct InformerOptions {
  Resource resource;
  std::string ns;  // empty: all namespaces
  std::string label_selector, field_selector;
  std::chrono::milliseconds resync{0};  // 0: never
  int watch_timeout_seconds = 300;
  int64_t page_size = 500;
  std::chrono::milliseconds initial_backoff{200};
  std::chrono::milliseconds max_backoff{30'000};
  // Steady time for the resync period and the waits between failed lists and watches
  // (common/clock.h; stop() wakes a wait on any clock).
  Clock* clock = &Clock::real();
  // Applied to every object before it is cached (after managedFields is dropped).
  std::function<void(nlohmann::json&)> transform;
};

struct InformerHandlers {
  std::function<void(const ObjectRef&)> on_add;
  std::function<void(const ObjectRef& old_object, const ObjectRef& new_object)> on_update;
  std::function<void(const ObjectRef&)> on_delete;
};

// Index functions: the keys an object is filed under.
using IndexFunc = std::function<std::vector<std::string>(const nlohmann::json&)>;
namespace index {
IndexFunc by_namespace();
IndexFunc by_node_name();            // spec.nodeName (pods)
IndexFunc by_label(std::string key);  // the label's value
}  // namespace index

struct InformerStats {
  uint64_t lists = 0, watches = 0, relists_after_gone = 0, events = 0, errors = 0;
};

class Informer {
 public:
  Informer(Client& client, InformerOptions options);
  ~Informer();
  Informer(const Informer&) = delete;
  Informer& operator=(const Informer&) = delete;

  // Before start().
  void add_handlers(InformerHandlers h);
  void add_index(const std::string& name, IndexFunc keys);

  void start();
  void stop();  // idempotent; joins the thread
  // Whether the first list has been applied and handed to every handler, waiting up to `timeout`.
  bool wait_for_sync(std::chrono::milliseconds timeout);
  bool synced() const;

  // "namespace/name" (cluster-scoped: "name").
  ObjectRef get(const std::string& key) const;
  std::vector<ObjectRef> list() const;
  std::vector<ObjectRef> by_index(const std::string& index, const std::string& key) const;
  size_t size() const;
  std::string resource_version() const;
  InformerStats stats() const;
  // The last error the loop met (empty when the last attempt succeeded).
  std::string last_error() const;

  static std::string key_of(const nlohmann::json& object);

 private:
  void run();
  bool relist();  // false on failure (error recorded)
  bool watch_once(bool& gone);
  void apply(const std::string& type, nlohmann::json object);
  void file(const std::string& key, const ObjectRef& obj, bool add);
  void sleep_backoff(std::chrono::milliseconds& backoff);
  ObjectRef prepare(nlohmann::json object) const;

  Client& client_;
  InformerOptions options_;
  std::vector<InformerHandlers> handlers_;
  std::map<std::string, IndexFunc> index_funcs_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::unordered_map<std::string, ObjectRef> items_;
  std::map<std::string, std::map<std::string, std::set<std::string>>> indexes_;  // index -> key -> object keys
  std::string rv_;
  bool synced_ = false;
  InformerStats stats_;
  std::string last_error_;

  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace kgpu::kube
