// The stand-in's object store: every object of every resource, one increasing resourceVersion,
// and a bounded history of changes that watches replay.
//
// Semantics follow kube-apiserver where clients depend on them: uid, creationTimestamp and
// generation set by the server; 409 for a stale update or for creating what exists; status
// subresources that change only status (and the main resource that ignores status); finalizers
// and deletionTimestamp; the binding rules. Answers are (HTTP code, body) pairs whose bodies are
// the object or a metav1.Status with kube-apiserver's reasons and messages.
//
// Thread safety: every public method may be called from any thread; one mutex guards the store.
#pragma once

#include <nlohmann/json.hpp>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "patch.h"
#include "resources.h"
#include "selectors.h"

namespace kgpu::apiserver {

struct Answer {
  int code = 200;
  nlohmann::json body;
};

// A metav1.Status answer.
Answer status_answer(int code, std::string_view reason, std::string message, const ResourceInfo* res = nullptr,
                     std::string_view name = {});

enum class Part { kMain, kStatus };

struct ListOptions {
  std::string ns;  // empty: all namespaces
  Selector labels;
  Selector fields;
  int64_t limit = 0;  // 0: no limit
  std::string continue_token;
};

struct Change {
  uint64_t rv = 0;
  const ResourceInfo* res = nullptr;
  std::string type;  // ADDED, MODIFIED, DELETED
  std::shared_ptr<const nlohmann::json> object;
  std::shared_ptr<const nlohmann::json> previous;  // null for ADDED
};

class Store {
 public:
  explicit Store(size_t history_limit);

  // `restore`: the object comes from a snapshot (--load): its uid and creationTimestamp are kept.
  Answer create(const ResourceInfo& res, const std::string& ns, nlohmann::json body, bool dry_run,
                bool restore = false);
  Answer get(const ResourceInfo& res, const std::string& ns, const std::string& name) const;
  Answer list(const ResourceInfo& res, const ListOptions& options) const;
  Answer update(const ResourceInfo& res, const std::string& ns, const std::string& name, nlohmann::json body,
                Part part, bool dry_run);
  // A server-side apply (kApply) of an object that does not exist creates it (201), as
  // kube-apiserver does; every other patch of a missing object is 404.
  Answer patch(const ResourceInfo& res, const std::string& ns, const std::string& name, const nlohmann::json& patch,
               PatchType type, Part part, bool dry_run);
  // `options` is a DeleteOptions body (preconditions, gracePeriodSeconds) or null.
  Answer remove(const ResourceInfo& res, const std::string& ns, const std::string& name,
                const nlohmann::json& options, bool dry_run);
  // POST pods/<name>/binding.
  Answer bind(const ResourceInfo& pods, const std::string& ns, const std::string& name, const nlohmann::json& binding);

  // Watch support. `start` is the last resourceVersion the watcher has seen; changes after it
  // that concern `res` are appended to `out`, waiting up to `wait` for the first one, and `start`
  // advances to the newest version examined (what a BOOKMARK may report). Returns kExpired when
  // `start` is older than the history kept (the watcher must get 410 Expired), kStopped when
  // `stop()` turned true (checked on every wake-up).
  enum class WatchResult { kOk, kExpired, kStopped };
  WatchResult changes_after(const ResourceInfo& res, uint64_t& start, std::chrono::milliseconds wait,
                            std::vector<Change>& out, const std::function<bool()>& stop) const;
  // Objects of `res` now (for a watch's initial events), with the resourceVersion they are at.
  std::vector<std::shared_ptr<const nlohmann::json>> snapshot(const ResourceInfo& res, const std::string& ns,
                                                              uint64_t& rv) const;
  uint64_t resource_version() const;
  // The oldest resourceVersion a watch may still start from.
  uint64_t oldest_watchable() const;
  // Fault injection: forget the history (every watch resuming from an older version gets 410).
  void compact();
  // Wakes every waiting watcher (used when watches are dropped or the server stops).
  void wake_all() const;

 private:
  using Objects = std::map<std::string, std::shared_ptr<const nlohmann::json>>;  // "ns/name" -> object
  Objects& objects(const ResourceInfo& res) { return objects_[&res]; }
  const Objects* objects_of(const ResourceInfo& res) const;
  // Records a change and bumps the resourceVersion; `object` gets the new version. Caller holds mu_.
  void record(const ResourceInfo& res, const std::string& type, std::shared_ptr<nlohmann::json> object,
              std::shared_ptr<const nlohmann::json> previous);
  // `old` by value: the map slot it comes from is overwritten before the change is recorded.
  Answer write_update(const ResourceInfo& res, const std::string& key, std::shared_ptr<const nlohmann::json> old,
                      nlohmann::json updated, Part part, bool dry_run);
  Answer finish_delete(const ResourceInfo& res, const std::string& key, std::shared_ptr<const nlohmann::json> old);
  // create() with mu_ held.
  Answer create_locked(const ResourceInfo& res, const std::string& ns, nlohmann::json body, bool dry_run,
                       bool restore);
  bool namespace_usable(const std::string& ns, Answer& error) const;

  mutable std::mutex mu_;
  mutable std::condition_variable changed_;
  uint64_t rv_ = 1;
  uint64_t compacted_ = 0;  // watches from a version below this get 410
  size_t history_limit_;
  std::deque<Change> history_;
  std::map<const ResourceInfo*, Objects> objects_;
};

std::string random_uid();

}  // namespace kgpu::apiserver
