// Kubernetes objects decoded from YAML manifests and `kubectl get -o json` output into a tree in
// which every value remembers its source line.
//
// Input: multi-document YAML (yaml-cpp; documents split at "---" lines so that one bad document
// does not hide the others), or JSON: one object, a stream of objects, or a List (`kind: List` or
// any `*List` kind with `items`), whose items become separate documents. JSON is read by a scanner
// of our own that counts lines as it goes and keeps unescaped strings as views into the input, so
// a several-hundred-MB snapshot loads at memory-bandwidth speed (yaml-cpp would take minutes).
// YAML Lists are expanded the same way.
//
// Lines are 1-based. A mapping entry has two: the key's (where lint points for a field) and the
// value's (the first line of a block value is the one after the key).
//
// Ownership: all Nodes and string_views of a load point into one immutable Tree, which every
// Document from that load holds through a shared_ptr; views stay valid while any such Document
// (or a copy) lives. Nothing here is mutated after loading: concurrent readers are safe.
//
// Errors: bad YAML/JSON, a document that is not a mapping, and an object without `kind` are
// reported as LoadErrors (source, line, message); decoding continues with the next document. A
// JSON syntax error ends its stream (objects before it are kept). Loading never throws.
//
// Limits (hostile or corrupt input fails fast, in bounded memory, as a LoadError with a line):
//   - nesting: 256 levels (YAML and JSON);
//   - YAML input (one file or stdin): 64 MiB; larger YAML is refused whole (JSON has no size limit;
//     a JSON string may not exceed 4 GiB);
//   - YAML nodes produced per input: 1,000,000 + one per input byte, counting every scalar,
//     mapping, sequence and key after alias expansion. No manifest written without aliases comes
//     near it; an alias bomb ("billion laughs") stops there, at the line being expanded, and the
//     rest of that input is not decoded;
//   - bytes YAML does not allow (C0 controls other than tab, LF, CR; DEL), NUL included: the
//     document holding one is skipped with an error naming the byte, line and column.
#pragma once

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <initializer_list>
#include <istream>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "common/error.h"

namespace kgpu::k8s {

enum class ValueType : uint8_t { kNull, kBool, kNumber, kString, kMap, kSeq };

const char* node_type_name(ValueType t);  // null | bool | number | string | map | list

class Entry;

// One value of the tree: a scalar (its text), a mapping (entries in source order) or a sequence.
// Scalars keep their text as written ("0.5", "true", "1e3"); YAML plain scalars are typed the way
// Kubernetes' YAML reader (YAML 1.1) types them: null/~/empty, true/false/yes/no/on/off, numbers;
// quoted scalars are strings.
class Value {
 public:
  ValueType type() const { return static_cast<ValueType>(type_); }
  int line() const { return static_cast<int>(line_); }
  bool is_null() const { return type() == ValueType::kNull; }
  bool is_map() const { return type() == ValueType::kMap; }
  bool is_seq() const { return type() == ValueType::kSeq; }
  bool is_scalar() const { return type() != ValueType::kMap && type() != ValueType::kSeq; }
  bool is_string() const { return type() == ValueType::kString; }

  // The text of a scalar; "" for mappings and sequences.
  std::string_view text() const { return is_scalar() ? std::string_view(static_cast<const char*>(data_), size_) : ""; }
  // Number of entries / elements; 0 for scalars.
  size_t size() const { return is_scalar() ? 0 : size_; }

  // Mapping access. find() returns the last entry with that key (JSON/Go semantics for
  // duplicates), nullptr when absent or when this is not a mapping.
  std::span<const Entry> entries() const;
  const Entry* find_entry(std::string_view key) const;
  const Value* find(std::string_view key) const;
  // find() along a path of keys: node.at({"spec", "template", "spec"}).
  const Value* at(std::initializer_list<std::string_view> path) const;

  // Sequence access; empty for non-sequences.
  std::span<const Value> items() const;

  // Typed reads of scalars; nullopt when the type does not fit. as_int accepts integral numbers
  // written as integers ("3", not "3.0": Go rejects those for int fields), and integral strings with
  // `allow_string` (int-or-string fields); as_bool accepts YAML 1.1 booleans.
  std::optional<int64_t> as_int(bool allow_string = false) const;
  std::optional<double> as_double() const;
  std::optional<bool> as_bool() const;

 private:
  friend class TreeBuilder;
  const void* data_ = nullptr;  // chars of a scalar, Entry[] of a mapping, Node[] of a sequence
  uint32_t size_ = 0;
  uint32_t line_ : 28 = 0;
  uint32_t type_ : 4 = 0;
};

class Entry {
 public:
  std::string_view key() const { return {key_, key_size_}; }
  int key_line() const { return static_cast<int>(key_line_); }
  const Value& value() const { return value_; }

 private:
  friend class TreeBuilder;
  const char* key_ = nullptr;
  uint32_t key_size_ = 0;
  uint32_t key_line_ = 0;
  Value value_;
};

// The storage behind a load: the input text, decoded strings and node arrays. Opaque.
class Tree;

// A map with string_view keys kept as one vector sorted by key: the part of std::map's interface
// the views use (sorted iteration over pairs, find/at/contains/count, operator[], try_emplace,
// ==), in one allocation of the exact size (32 bytes a label instead of a 64-byte tree node, 24
// bytes when empty instead of 48). Inserting one key is linear: decoders build with
// assign_last_wins(). Keys (and string values) are borrowed, as everywhere in the views. Not
// thread-safe to mutate; const reads are. Iterators are invalidated by any insertion; do not change
// the key of an element through a mutable iterator.
template <typename V>
class FlatMap {
 public:
  using key_type = std::string_view;
  using mapped_type = V;
  using value_type = std::pair<std::string_view, V>;
  using iterator = typename std::vector<value_type>::iterator;
  using const_iterator = typename std::vector<value_type>::const_iterator;

  FlatMap() = default;
  // std::map semantics: of duplicate keys the first is kept.
  FlatMap(std::initializer_list<value_type> init) {
    for (const value_type& kv : init) try_emplace(kv.first, kv.second);
  }

  // Replaces the contents with `entries` in any order; of duplicate keys the last is kept (what
  // `m[key] = value` for each entry in order gives). O(n log n).
  void assign_last_wins(std::vector<value_type> entries) {
    std::stable_sort(entries.begin(), entries.end(),
                     [](const value_type& a, const value_type& b) { return a.first < b.first; });
    size_t out = 0;
    for (size_t i = 0; i < entries.size(); ++i) {
      if (i + 1 < entries.size() && entries[i + 1].first == entries[i].first) continue;  // a later one wins
      if (out != i) entries[out] = std::move(entries[i]);
      ++out;
    }
    entries.resize(out);
    if (entries.capacity() > out) entries.shrink_to_fit();
    items_ = std::move(entries);
  }

  const_iterator begin() const { return items_.begin(); }
  const_iterator end() const { return items_.end(); }
  iterator begin() { return items_.begin(); }
  iterator end() { return items_.end(); }
  size_t size() const { return items_.size(); }
  bool empty() const { return items_.empty(); }

  const_iterator find(std::string_view key) const {
    auto it = lower_bound(key);
    return it != items_.end() && it->first == key ? const_iterator(it) : items_.end();
  }
  iterator find(std::string_view key) {
    auto it = lower_bound(key);
    return it != items_.end() && it->first == key ? it : items_.end();
  }
  bool contains(std::string_view key) const { return find(key) != end(); }
  size_t count(std::string_view key) const { return contains(key) ? 1 : 0; }
  // Throws std::out_of_range when absent, as std::map::at does.
  const V& at(std::string_view key) const {
    auto it = find(key);
    if (it == end()) throw std::out_of_range("FlatMap::at: no such key");
    return it->second;
  }
  V& operator[](std::string_view key) { return try_emplace(key).first->second; }
  template <typename... Args>
  std::pair<iterator, bool> try_emplace(std::string_view key, Args&&... args) {
    auto it = lower_bound(key);
    if (it != items_.end() && it->first == key) return {it, false};
    return {items_.emplace(it, std::piecewise_construct, std::forward_as_tuple(key),
                           std::forward_as_tuple(std::forward<Args>(args)...)),
            true};
  }
  std::pair<iterator, bool> emplace(std::string_view key, V value) { return try_emplace(key, std::move(value)); }
  void reserve(size_t n) { items_.reserve(n); }

  friend bool operator==(const FlatMap& a, const FlatMap& b) { return a.items_ == b.items_; }

 private:
  typename std::vector<value_type>::const_iterator lower_bound(std::string_view key) const {
    return std::lower_bound(items_.begin(), items_.end(), key,
                            [](const value_type& kv, std::string_view k) { return kv.first < k; });
  }
  iterator lower_bound(std::string_view key) {
    return std::lower_bound(items_.begin(), items_.end(), key,
                            [](const value_type& kv, std::string_view k) { return kv.first < k; });
  }

  std::vector<value_type> items_;
};

// Labels and annotations, borrowed from the tree (or from literals in tests).
using StringMap = FlatMap<std::string_view>;

struct OwnerReference {
  std::string_view api_version;
  std::string_view kind;
  std::string_view name;
  std::string_view uid;
  bool controller = false;
  int line = 0;
};

struct ObjectMeta {
  std::string_view name;
  std::string_view generate_name;
  std::string_view namespace_;  // "" when not set (namespaced objects default to "default")
  std::string_view uid;
  std::string_view creation_timestamp;  // RFC 3339 as written
  StringMap labels;
  StringMap annotations;
  std::vector<OwnerReference> owner_references;
  int line = 0;         // of `metadata:`; 0 when absent
  int name_line = 0;    // of `name:`
  int labels_line = 0;  // of `labels:`
};

// metadata-like fields of any mapping (a Document's metadata or a pod template's).
ObjectMeta decode_meta(const Value* metadata, int key_line);

struct Document {
  std::string_view source;  // file name, or "<stdin>"
  int line = 0;             // first line of the object
  std::string_view api_version;
  std::string_view kind;
  ObjectMeta metadata;
  const Value* root = nullptr;  // the object mapping: never null in a loaded Document
  std::shared_ptr<const Tree> tree;

  std::string_view api_group() const;         // "" for the core group ("v1")
  std::string_view api_version_only() const;  // "v1beta1" of "resource.k8s.io/v1beta1"
  // "kind/namespace/name" or "kind/name" (for messages).
  std::string ref() const;
  // "file:line" of this object or of a line in it.
  std::string where(int at_line = 0) const;
};

struct LoadError {
  std::string source;
  int line = 0;  // 0 when there is no position (an unreadable file)
  std::string message;

  std::string to_string() const;  // "source:line: message"
};

struct LoadResult {
  std::vector<Document> documents;
  std::vector<LoadError> errors;

  void append(LoadResult&& other);
};

enum class InputFormat { kAuto, kYaml, kJson };

// The kinds a caller wants (true to keep); empty keeps all. A document of another kind yields no
// Document (and no error); an item of a JSON List (or of a top-level JSON array) of another kind is
// dropped as soon as it is read, so its tree takes no memory either. The filter applies to the
// elements of a top-level JSON object's `items` whatever that object's kind.
using KindFilter = std::function<bool(std::string_view kind)>;

// Decodes `text` (moved into the tree: JSON strings are views into it). kAuto picks JSON for a
// ".json" source name, YAML for ".yaml"/".yml" (yaml-cpp reads JSON too, slowly), and otherwise
// JSON when the text starts with '{' or '[' (stdin), YAML when not.
LoadResult load_text(std::string text, std::string source_name, InputFormat format = InputFormat::kAuto,
                     const KindFilter& keep = {});

// Reads and decodes a file. Fails (kNotFound / kPermissionDenied) only when it cannot be read.
// Files of 16 MiB or more are mapped read-only instead of copied: such a file must not be
// truncated while Documents from it live.
Result<LoadResult> load_file(const std::filesystem::path& path, InputFormat format = InputFormat::kAuto,
                             const KindFilter& keep = {});

// Reads a whole stream (stdin) as source "<stdin>".
LoadResult load_stream(std::istream& in, std::string source_name = "<stdin>", const KindFilter& keep = {});

// Files and directories (recursively, *.yaml, *.yml and *.json, in sorted order); "-" is stdin.
// Fails when a named path does not exist or a file cannot be read; a directory without manifests
// yields nothing.
Result<LoadResult> load_paths(const std::vector<std::string>& paths, const KindFilter& keep = {});

}  // namespace kgpu::k8s
