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
#pragma once

#include <cstdint>
#include <filesystem>
#include <initializer_list>
#include <istream>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.h"

namespace kgpu::k8s {

enum class NodeType : uint8_t { kNull, kBool, kNumber, kString, kMap, kSeq };

const char* node_type_name(NodeType t);  // null | bool | number | string | map | list

class Entry;

// One value of the tree: a scalar (its text), a mapping (entries in source order) or a sequence.
// Scalars keep their text as written ("0.5", "true", "1e3"); YAML plain scalars are typed the way
// Kubernetes' YAML reader (YAML 1.1) types them: null/~/empty, true/false/yes/no/on/off, numbers;
// quoted scalars are strings.
class Node {
 public:
  NodeType type() const { return static_cast<NodeType>(type_); }
  int line() const { return static_cast<int>(line_); }
  bool is_null() const { return type() == NodeType::kNull; }
  bool is_map() const { return type() == NodeType::kMap; }
  bool is_seq() const { return type() == NodeType::kSeq; }
  bool is_scalar() const { return type() != NodeType::kMap && type() != NodeType::kSeq; }
  bool is_string() const { return type() == NodeType::kString; }

  // The text of a scalar; "" for mappings and sequences.
  std::string_view text() const { return is_scalar() ? std::string_view(static_cast<const char*>(data_), size_) : ""; }
  // Number of entries / elements; 0 for scalars.
  size_t size() const { return is_scalar() ? 0 : size_; }

  // Mapping access. find() returns the last entry with that key (JSON/Go semantics for
  // duplicates), nullptr when absent or when this is not a mapping.
  std::span<const Entry> entries() const;
  const Entry* find_entry(std::string_view key) const;
  const Node* find(std::string_view key) const;
  // find() along a path of keys: node.at({"spec", "template", "spec"}).
  const Node* at(std::initializer_list<std::string_view> path) const;

  // Sequence access; empty for non-sequences.
  std::span<const Node> items() const;

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
  const Node& value() const { return value_; }

 private:
  friend class TreeBuilder;
  const char* key_ = nullptr;
  uint32_t key_size_ = 0;
  uint32_t key_line_ = 0;
  Node value_;
};

// The storage behind a load: the input text, decoded strings and node arrays. Opaque.
class Tree;

// Labels and annotations, borrowed from the tree (or from literals in tests).
using StringMap = std::map<std::string_view, std::string_view, std::less<>>;

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
ObjectMeta decode_meta(const Node* metadata, int key_line);

struct Document {
  std::string_view source;  // file name, or "<stdin>"
  int line = 0;             // first line of the object
  std::string_view api_version;
  std::string_view kind;
  ObjectMeta metadata;
  const Node* root = nullptr;  // the object mapping: never null in a loaded Document
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

// Decodes `text` (moved into the tree: JSON strings are views into it). kAuto picks JSON for a
// ".json" source name, YAML for ".yaml"/".yml" (yaml-cpp reads JSON too, slowly), and otherwise
// JSON when the text starts with '{' or '[' (stdin), YAML when not.
LoadResult load_text(std::string text, std::string source_name, InputFormat format = InputFormat::kAuto);

// Reads and decodes a file. Fails (kNotFound / kPermissionDenied) only when it cannot be read.
// Files of 16 MiB or more are mapped read-only instead of copied: such a file must not be
// truncated while Documents from it live.
Result<LoadResult> load_file(const std::filesystem::path& path, InputFormat format = InputFormat::kAuto);

// Reads a whole stream (stdin) as source "<stdin>".
LoadResult load_stream(std::istream& in, std::string source_name = "<stdin>");

// Files and directories (recursively, *.yaml, *.yml and *.json, in sorted order); "-" is stdin.
// Fails when a named path does not exist or a file cannot be read; a directory without manifests
// yields nothing.
Result<LoadResult> load_paths(const std::vector<std::string>& paths);

}  // namespace kgpu::k8s
