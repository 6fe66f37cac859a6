// Internal to kgpu_k8s: what the JSON and YAML loaders (json_loader.cc, yaml_loader.cc) and the
// document layer (document.cc) share: the Tree that owns a load's text and nodes, the builder of
// Nodes and Entries, and the sink that turns top-level values into Documents.
//
// Thread safety: one load builds one Tree on one thread; afterwards the Tree is immutable.
#pragma once

#include <fmt/format.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "k8s/document.h"

namespace kgpu::k8s {

// Bump allocator for the tree's arrays and decoded strings, plus the input text (owned, or a
// read-only mapping of the file).
class Tree {
 public:
  Tree(std::string text, std::string source) : owned_(std::move(text)), text_(owned_), source_(std::move(source)) {}
  Tree(void* mapping, size_t size, std::string source)
      : text_(static_cast<const char*>(mapping), size), source_(std::move(source)), mapping_(mapping) {}
  ~Tree() {
    if (mapping_ != nullptr) ::munmap(mapping_, text_.size());
  }
  Tree(const Tree&) = delete;
  Tree& operator=(const Tree&) = delete;

  std::string_view text() const { return text_; }
  std::string_view source() const { return source_; }

  void* allocate(size_t bytes) {
    bytes = (bytes + 7) & ~size_t{7};
    if (bytes > left_) {
      const size_t block = std::max(bytes, kBlockSize);
      blocks_.push_back(std::make_unique_for_overwrite<char[]>(block));
      next_ = blocks_.back().get();
      left_ = block;
    }
    void* p = next_;
    next_ += bytes;
    left_ -= bytes;
    return p;
  }

  // The allocation state; rewind() frees everything allocated after it (a JSON List item of a
  // kind the caller does not want). Only the last mark may be rewound to.
  struct Mark {
    size_t blocks = 0;
    char* next = nullptr;
    size_t left = 0;
  };
  Mark mark() const { return {blocks_.size(), next_, left_}; }
  void rewind(const Mark& m) {
    blocks_.resize(m.blocks);
    next_ = m.next;
    left_ = m.left;
  }

  // Makes the next allocations up to `bytes` come from one block of exactly that size (a tree built
  // to a known size: k8s/api/document.cc), instead of a 4 MiB block.
  void reserve_exact(size_t bytes) {
    bytes = (bytes + 7) & ~size_t{7};
    if (bytes <= left_) return;
    blocks_.push_back(std::make_unique_for_overwrite<char[]>(bytes));
    next_ = blocks_.back().get();
    left_ = bytes;
  }

  std::string_view copy(std::string_view s) {
    if (s.empty()) return {};
    char* p = static_cast<char*>(allocate(s.size()));
    std::memcpy(p, s.data(), s.size());
    return {p, s.size()};
  }

 private:
  static constexpr size_t kBlockSize = 4 << 20;
  std::string owned_;
  std::string_view text_;
  std::string source_;
  void* mapping_ = nullptr;
  std::vector<std::unique_ptr<char[]>> blocks_;
  char* next_ = nullptr;
  size_t left_ = 0;
};

class TreeBuilder {
 public:
  static constexpr uint32_t kMaxLine = (1u << 28) - 1;

  static Value scalar(ValueType type, std::string_view text, size_t line) {
    Value n;
    n.type_ = static_cast<uint32_t>(type);
    n.data_ = text.data();
    n.size_ = static_cast<uint32_t>(text.size());
    n.line_ = clamp_line(line);
    return n;
  }
  static Value map(const Entry* entries, size_t count, size_t line) {
    Value n;
    n.type_ = static_cast<uint32_t>(ValueType::kMap);
    n.data_ = entries;
    n.size_ = static_cast<uint32_t>(count);
    n.line_ = clamp_line(line);
    return n;
  }
  static Value seq(const Value* items, size_t count, size_t line) {
    Value n;
    n.type_ = static_cast<uint32_t>(ValueType::kSeq);
    n.data_ = items;
    n.size_ = static_cast<uint32_t>(count);
    n.line_ = clamp_line(line);
    return n;
  }
  static Entry entry(std::string_view key, size_t key_line, const Value& value) {
    Entry e;
    e.key_ = key.data();
    e.key_size_ = static_cast<uint32_t>(key.size());
    e.key_line_ = clamp_line(key_line);
    e.value_ = value;
    return e;
  }
  template <typename T>
  static const T* store(Tree& tree, const T* begin, size_t count) {
    if (count == 0) return nullptr;
    T* out = static_cast<T*>(tree.allocate(count * sizeof(T)));
    std::memcpy(static_cast<void*>(out), begin, count * sizeof(T));
    return out;
  }

 private:
  static uint32_t clamp_line(size_t line) { return static_cast<uint32_t>(std::min<size_t>(line, kMaxLine)); }
};

// Limits both loaders enforce.
inline constexpr int kMaxDepth = 256;
inline constexpr size_t kMaxScalarBytes = UINT32_MAX;  // Node::size_

inline bool is_digit(char c) { return c >= '0' && c <= '9'; }

// YAML 1.1's booleans (y, yes, on, true, ... in three cases), or nullopt.
std::optional<bool> yaml11_bool(std::string_view s);

class DocumentSink {
 public:
  // `arrays`: a top-level sequence is a list of objects (JSON, e.g. jq's `[.items[]]`).
  DocumentSink(std::shared_ptr<Tree> tree, LoadResult* out, bool arrays, const KindFilter& keep)
      : tree_(std::move(tree)), out_(out), arrays_(arrays), keep_(keep) {}

  void error(size_t line, std::string message) {
    out_->errors.push_back(LoadError{std::string(tree_->source()), static_cast<int>(line), std::move(message)});
  }

  // A top-level value: an object, a List of objects, or (with `arrays`) a sequence of objects.
  void add(const Value& node, bool top_level) {
    if (node.is_null()) return;  // an empty YAML document
    if (top_level && arrays_ && node.is_seq()) {
      for (const Value& item : node.items()) add(item, false);
      return;
    }
    if (!node.is_map()) {
      error(node.line(), fmt::format("document is not a mapping (found a {})", node_type_name(node.type())));
      return;
    }
    const Value* kind = node.find("kind");
    if (kind == nullptr || !kind->is_string() || kind->text().empty()) {
      error(node.line(), kind == nullptr ? "object has no kind" : "object's kind is not a non-empty string");
      return;
    }
    const Value* items = node.find("items");
    if (top_level && items != nullptr && kind->text().ends_with("List") && (items->is_seq() || items->is_null())) {
      // One allocation of the right size instead of doublings (each a moment with two copies).
      auto& docs = out_->documents;
      const size_t needed = docs.size() + items->size();
      if (needed > docs.capacity()) docs.reserve(std::max(needed, 2 * docs.capacity()));
      for (const Value& item : items->items()) {
        if (!item.is_map()) {
          error(item.line(),
                fmt::format("{} item is not a mapping (found a {})", kind->text(), node_type_name(item.type())));
          continue;
        }
        add(item, false);
      }
      return;
    }
    if (keep_ && !keep_(kind->text())) return;
    // The root needs a stable address: the arrays it lives in are stable, but a top-level node is a copy.
    const Value* root = &node;
    if (top_level) root = TreeBuilder::store(*tree_, &node, 1);
    Document doc;
    doc.source = tree_->source();
    doc.line = root->line();
    doc.kind = kind->text();
    if (const Value* v = root->find("apiVersion"); v != nullptr && v->is_string()) doc.api_version = v->text();
    if (const Entry* m = root->find_entry("metadata"); m != nullptr)
      doc.metadata = decode_meta(&m->value(), m->key_line());
    doc.root = root;
    doc.tree = tree_;
    out_->documents.push_back(std::move(doc));
  }

 private:
  std::shared_ptr<Tree> tree_;
  LoadResult* out_;
  bool arrays_;
  const KindFilter& keep_;
};

// Loads every document of `tree` into `out` (errors included), keeping the kinds `keep` accepts.
// load_json: one or more JSON values (objects, Lists, or arrays of objects); json_loader.cc.
void load_json(const std::shared_ptr<Tree>& tree, LoadResult* out, const KindFilter& keep);
// load_yaml: a YAML stream; yaml_loader.cc.
void load_yaml(const std::shared_ptr<Tree>& tree, LoadResult* out, const KindFilter& keep);

}  // namespace kgpu::k8s
