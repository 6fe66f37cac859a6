#include "k8s/document.h"

#include "common/yaml_guard.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <iostream>
#include <iterator>

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

  static Node scalar(NodeType type, std::string_view text, size_t line) {
    Node n;
    n.type_ = static_cast<uint32_t>(type);
    n.data_ = text.data();
    n.size_ = static_cast<uint32_t>(text.size());
    n.line_ = clamp_line(line);
    return n;
  }
  static Node map(const Entry* entries, size_t count, size_t line) {
    Node n;
    n.type_ = static_cast<uint32_t>(NodeType::kMap);
    n.data_ = entries;
    n.size_ = static_cast<uint32_t>(count);
    n.line_ = clamp_line(line);
    return n;
  }
  static Node seq(const Node* items, size_t count, size_t line) {
    Node n;
    n.type_ = static_cast<uint32_t>(NodeType::kSeq);
    n.data_ = items;
    n.size_ = static_cast<uint32_t>(count);
    n.line_ = clamp_line(line);
    return n;
  }
  static Entry entry(std::string_view key, size_t key_line, const Node& value) {
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

namespace {

constexpr int kMaxDepth = 256;
constexpr size_t kMaxScalarBytes = UINT32_MAX;  // Node::size_
constexpr size_t kMaxYamlBytes = size_t{64} << 20;
constexpr size_t kMaxYamlNodes = 1'000'000;

// ---------------------------------------------------------------------------------------------
// Scalars

bool is_yaml_null(std::string_view s) { return s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL"; }

std::optional<bool> yaml11_bool(std::string_view s) {
  static constexpr std::string_view kTrue[] = {"y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON"};
  static constexpr std::string_view kFalse[] = {"n",     "N",     "no",  "No",  "NO", "false",
                                                "False", "FALSE", "off", "Off", "OFF"};
  for (auto t : kTrue) {
    if (s == t) return true;
  }
  for (auto f : kFalse) {
    if (s == f) return false;
  }
  return std::nullopt;
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// A decimal int or float as YAML 1.1 / JSON write them, hex ints, and .inf/.nan.
bool looks_numeric(std::string_view s) {
  if (s.empty()) return false;
  size_t i = 0;
  if (s[0] == '+' || s[0] == '-') ++i;
  const std::string_view rest = s.substr(i);
  if (rest == ".inf" || rest == ".Inf" || rest == ".INF") return true;
  if (i == 0 && (s == ".nan" || s == ".NaN" || s == ".NAN")) return true;
  if (rest.size() > 2 && rest[0] == '0' && (rest[1] == 'x' || rest[1] == 'X')) {
    return std::all_of(rest.begin() + 2, rest.end(),
                       [](char c) { return std::isxdigit(static_cast<unsigned char>(c)); });
  }
  size_t digits = 0;
  while (i < s.size() && is_digit(s[i])) ++i, ++digits;
  if (i < s.size() && s[i] == '.') {
    ++i;
    while (i < s.size() && is_digit(s[i])) ++i, ++digits;
  }
  if (digits == 0) return false;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
    if (i == s.size() || !is_digit(s[i])) return false;
    while (i < s.size() && is_digit(s[i])) ++i;
  }
  return i == s.size();
}

NodeType resolve_plain(std::string_view s) {
  if (is_yaml_null(s)) return NodeType::kNull;
  if (yaml11_bool(s)) return NodeType::kBool;
  if (looks_numeric(s)) return NodeType::kNumber;
  return NodeType::kString;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// ---------------------------------------------------------------------------------------------
// JSON

class JsonScanner {
 public:
  // `keep` (may be empty): the kinds wanted; an object of another kind that is an element of a
  // top-level array or of a top-level object's `items` is dropped as soon as it is read, tree and all.
  JsonScanner(Tree& tree, std::string_view text, const KindFilter& keep)
      : tree_(tree), p_(text.data()), end_(text.data() + text.size()), keep_(keep) {}

  // The next top-level value into *out: true; false at the end of input or on an error (error() set).
  bool next(Node* out) {
    skip_ws();
    if (p_ == end_) return false;
    return value(out, 0);
  }
  const std::string& error() const { return error_; }
  size_t line() const { return line_; }

 private:
  bool fail_here(std::string message) {
    error_ = std::move(message);
    return false;
  }
  std::string found() const {
    if (p_ == end_) return "end of input";
    const unsigned char c = static_cast<unsigned char>(*p_);
    if (c < 0x20 || c >= 0x7f) return fmt::format("byte 0x{:02x}", c);
    return fmt::format("'{}'", *p_);
  }

  void skip_ws() {
    while (p_ != end_) {
      const char c = *p_;
      if (c == '\n') {
        ++line_;
      } else if (c != ' ' && c != '\t' && c != '\r') {
        return;
      }
      ++p_;
    }
  }

  bool value(Node* out, int depth) {
    if (depth > kMaxDepth) return fail_here(fmt::format("nesting deeper than {} levels", kMaxDepth));
    if (p_ == end_) return fail_here("unexpected end of input: expected a value");
    switch (*p_) {
      case '{':
        return object(out, depth);
      case '[':
        return array(out, depth);
      case '"': {
        const size_t line = line_;
        std::string_view s;
        if (!string(&s)) return false;
        *out = TreeBuilder::scalar(NodeType::kString, s, line);
        return true;
      }
      case 't':
        return literal("true", NodeType::kBool, out);
      case 'f':
        return literal("false", NodeType::kBool, out);
      case 'n':
        return literal("null", NodeType::kNull, out);
      default:
        return number(out);
    }
  }

  bool literal(std::string_view word, NodeType type, Node* out) {
    if (static_cast<size_t>(end_ - p_) < word.size() || std::string_view(p_, word.size()) != word) {
      return fail_here(fmt::format("unexpected {}: expected a value", found()));
    }
    *out = TreeBuilder::scalar(type, std::string_view(p_, word.size()), line_);
    p_ += word.size();
    return true;
  }

  bool number(Node* out) {
    const char* start = p_;
    if (p_ != end_ && *p_ == '-') ++p_;
    if (p_ == end_ || !is_digit(*p_)) {
      p_ = start;
      return fail_here(fmt::format("unexpected {}: expected a value", found()));
    }
    if (*p_ == '0') {
      ++p_;
    } else {
      while (p_ != end_ && is_digit(*p_)) ++p_;
    }
    if (p_ != end_ && *p_ == '.') {
      ++p_;
      if (p_ == end_ || !is_digit(*p_)) return fail_here("bad number: expected a digit after '.'");
      while (p_ != end_ && is_digit(*p_)) ++p_;
    }
    if (p_ != end_ && (*p_ == 'e' || *p_ == 'E')) {
      ++p_;
      if (p_ != end_ && (*p_ == '+' || *p_ == '-')) ++p_;
      if (p_ == end_ || !is_digit(*p_)) return fail_here("bad number: expected a digit in the exponent");
      while (p_ != end_ && is_digit(*p_)) ++p_;
    }
    *out = TreeBuilder::scalar(NodeType::kNumber, std::string_view(start, p_ - start), line_);
    return true;
  }

  bool hex4(uint32_t* cp) {
    if (end_ - p_ < 4) return fail_here("bad \\u escape");
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      const char c = p_[i];
      v <<= 4;
      if (is_digit(c))
        v |= c - '0';
      else if (c >= 'a' && c <= 'f')
        v |= c - 'a' + 10;
      else if (c >= 'A' && c <= 'F')
        v |= c - 'A' + 10;
      else
        return fail_here("bad \\u escape");
    }
    p_ += 4;
    *cp = v;
    return true;
  }

  // At the opening quote. Unescaped strings are views into the input; others are decoded into the tree.
  bool string(std::string_view* out) {
    const char* start = ++p_;
    while (p_ != end_ && *p_ != '"' && *p_ != '\\' && static_cast<unsigned char>(*p_) >= 0x20) ++p_;
    if (p_ != end_ && *p_ == '"') {
      if (static_cast<size_t>(p_ - start) > kMaxScalarBytes) return fail_here("string longer than 4 GiB");
      *out = std::string_view(start, p_ - start);
      ++p_;
      return true;
    }
    std::string decoded(start, p_);
    while (true) {
      if (p_ == end_) return fail_here("unterminated string");
      const char c = *p_;
      if (c == '"') break;
      if (static_cast<unsigned char>(c) < 0x20)
        return fail_here(fmt::format("control character {} in a string", found()));
      if (c != '\\') {
        decoded += c;
        ++p_;
        continue;
      }
      if (++p_ == end_) return fail_here("unterminated string");
      const char e = *p_++;
      switch (e) {
        case '"':
          decoded += '"';
          break;
        case '\\':
          decoded += '\\';
          break;
        case '/':
          decoded += '/';
          break;
        case 'b':
          decoded += '\b';
          break;
        case 'f':
          decoded += '\f';
          break;
        case 'n':
          decoded += '\n';
          break;
        case 'r':
          decoded += '\r';
          break;
        case 't':
          decoded += '\t';
          break;
        case 'u': {
          uint32_t cp = 0;
          if (!hex4(&cp)) return false;
          if (cp >= 0xD800 && cp <= 0xDBFF && end_ - p_ >= 6 && p_[0] == '\\' && p_[1] == 'u') {
            const char* save = p_;
            p_ += 2;
            uint32_t low = 0;
            if (!hex4(&low)) return false;
            if (low >= 0xDC00 && low <= 0xDFFF) {
              cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
            } else {
              p_ = save;
              cp = 0xFFFD;
            }
          } else if (cp >= 0xD800 && cp <= 0xDFFF) {
            cp = 0xFFFD;
          }
          append_utf8(decoded, cp);
          break;
        }
        default:
          return fail_here(fmt::format("bad escape '\\{}' in a string", e));
      }
    }
    ++p_;
    if (decoded.size() > kMaxScalarBytes) return fail_here("string longer than 4 GiB");
    *out = tree_.copy(decoded);
    return true;
  }

  bool object(Node* out, int depth) {
    const size_t line = line_;
    ++p_;
    const size_t base = entries_.size();
    skip_ws();
    if (p_ != end_ && *p_ == '}') {
      ++p_;
    } else {
      while (true) {
        if (p_ == end_ || *p_ != '"') return fail_here(fmt::format("unexpected {}: expected a key string", found()));
        const size_t key_line = line_;
        std::string_view key;
        if (!string(&key)) return false;
        skip_ws();
        if (p_ == end_ || *p_ != ':') return fail_here(fmt::format("unexpected {}: expected ':' after a key", found()));
        ++p_;
        skip_ws();
        Node v;
        filter_items_ = keep_ && depth == 0 && key == "items";
        if (!value(&v, depth + 1)) return false;
        filter_items_ = false;
        entries_.push_back(TreeBuilder::entry(key, key_line, v));
        skip_ws();
        if (p_ != end_ && *p_ == ',') {
          ++p_;
          skip_ws();
          continue;
        }
        if (p_ != end_ && *p_ == '}') {
          ++p_;
          break;
        }
        return fail_here(fmt::format("unexpected {}: expected ',' or '}}'", found()));
      }
    }
    const size_t count = entries_.size() - base;
    *out = TreeBuilder::map(TreeBuilder::store(tree_, entries_.data() + base, count), count, line);
    entries_.resize(base);
    return true;
  }

  bool array(Node* out, int depth) {
    const size_t line = line_;
    ++p_;
    const size_t base = items_.size();
    const bool filter = keep_ && (depth == 0 || (depth == 1 && filter_items_));
    filter_items_ = false;
    skip_ws();
    if (p_ != end_ && *p_ == ']') {
      ++p_;
    } else {
      while (true) {
        Node v;
        const Tree::Mark before = tree_.mark();
        if (!value(&v, depth + 1)) return false;
        bool dropped = false;
        if (filter && v.is_map()) {
          if (const Node* kind = v.find("kind"); kind != nullptr && kind->is_string() && !keep_(kind->text())) {
            tree_.rewind(before);
            dropped = true;
          }
        }
        if (!dropped) items_.push_back(v);
        skip_ws();
        if (p_ != end_ && *p_ == ',') {
          ++p_;
          skip_ws();
          continue;
        }
        if (p_ != end_ && *p_ == ']') {
          ++p_;
          break;
        }
        return fail_here(fmt::format("unexpected {}: expected ',' or ']'", found()));
      }
    }
    const size_t count = items_.size() - base;
    *out = TreeBuilder::seq(TreeBuilder::store(tree_, items_.data() + base, count), count, line);
    items_.resize(base);
    return true;
  }

  Tree& tree_;
  const char* p_;
  const char* end_;
  size_t line_ = 1;
  std::string error_;
  std::vector<Entry> entries_;
  std::vector<Node> items_;
  const KindFilter& keep_;
  bool filter_items_ = false;  // the next value is a top-level object's `items`
};

// ---------------------------------------------------------------------------------------------
// YAML

class YamlConverter {
 public:
  // `*nodes_left`: how many more nodes (scalars, mappings, sequences, keys) the input may produce,
  // shared by its documents; `budget` is its initial value (for the message).
  YamlConverter(Tree& tree, size_t line_offset, size_t* nodes_left, size_t budget)
      : tree_(tree), offset_(line_offset), left_(nodes_left), budget_(budget) {}

  // False (error() and error_line() set) when nesting is too deep or the node budget is spent
  // (aliases expand shared nodes once per reference: "billion laughs").
  bool convert(const YAML::Node& y, size_t fallback_line, Node* out, int depth = 0) {
    const YAML::Mark mark = y.Mark();
    const size_t line = mark.line >= 0 ? offset_ + static_cast<size_t>(mark.line) + 1 : fallback_line;
    if (depth > kMaxDepth) return fail(line, fmt::format("nesting deeper than {} levels", kMaxDepth));
    if (!take()) return fail(line, budget_message());
    switch (y.Type()) {
      case YAML::NodeType::Undefined:
      case YAML::NodeType::Null:
        *out = TreeBuilder::scalar(NodeType::kNull, {}, line);
        return true;
      case YAML::NodeType::Scalar: {
        const std::string& s = y.Scalar();
        const std::string& tag = y.Tag();
        NodeType type = NodeType::kString;
        if (tag == "?")
          type = resolve_plain(s);
        else if (tag == "tag:yaml.org,2002:null")
          type = NodeType::kNull;
        else if (tag == "tag:yaml.org,2002:bool")
          type = NodeType::kBool;
        else if (tag == "tag:yaml.org,2002:int" || tag == "tag:yaml.org,2002:float")
          type = NodeType::kNumber;
        *out = TreeBuilder::scalar(type, tree_.copy(s), line);
        return true;
      }
      case YAML::NodeType::Sequence: {
        std::vector<Node> items(y.size());
        size_t i = 0;
        for (const auto& item : y) {
          if (!convert(item, line, &items[i++], depth + 1)) return false;
        }
        *out = TreeBuilder::seq(TreeBuilder::store(tree_, items.data(), items.size()), items.size(), line);
        return true;
      }
      case YAML::NodeType::Map: {
        std::vector<Entry> entries;
        entries.reserve(y.size());
        for (const auto& kv : y) {
          const YAML::Mark km = kv.first.Mark();
          const size_t key_line = km.line >= 0 ? offset_ + static_cast<size_t>(km.line) + 1 : line;
          if (!take()) return fail(key_line, budget_message());
          // Complex keys (a mapping as a key) are not Kubernetes; keep their text empty.
          const std::string_view key = kv.first.IsScalar() ? tree_.copy(kv.first.Scalar()) : std::string_view();
          Node v;
          if (!convert(kv.second, key_line, &v, depth + 1)) return false;
          entries.push_back(TreeBuilder::entry(key, key_line, v));
        }
        *out = TreeBuilder::map(TreeBuilder::store(tree_, entries.data(), entries.size()), entries.size(), line);
        return true;
      }
    }
    return true;
  }
  const std::string& error() const { return error_; }
  size_t error_line() const { return error_line_; }

 private:
  bool fail(size_t line, std::string message) {
    error_ = std::move(message);
    error_line_ = line;
    return false;
  }
  bool take() {
    if (*left_ == 0) return false;
    --*left_;
    return true;
  }
  std::string budget_message() const {
    return fmt::format(
        "YAML expands to more than {} nodes (1,000,000 + one per input byte): aliases of aliases (a \"billion "
        "laughs\" bomb?); kgpu stops here",
        budget_);
  }

  Tree& tree_;
  size_t offset_;
  size_t* left_;
  size_t budget_;
  std::string error_;
  size_t error_line_ = 0;
};

// [offset, line) of each "---"-started chunk; the first chunk starts at 0.
std::vector<std::pair<size_t, size_t>> yaml_chunks(std::string_view text) {
  std::vector<std::pair<size_t, size_t>> chunks{{0, 1}};
  size_t line = 1;
  for (size_t pos = 0; pos < text.size();) {
    if (pos != 0 && text.compare(pos, 3, "---") == 0 &&
        (pos + 3 == text.size() || std::string_view(" \t\r\n").find(text[pos + 3]) != std::string_view::npos)) {
      chunks.emplace_back(pos, line);
    }
    const size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) break;
    pos = nl + 1;
    ++line;
  }
  return chunks;
}

// ---------------------------------------------------------------------------------------------
// Objects

class DocumentSink {
 public:
  // `arrays`: a top-level sequence is a list of objects (JSON, e.g. jq's `[.items[]]`).
  DocumentSink(std::shared_ptr<Tree> tree, LoadResult* out, bool arrays, const KindFilter& keep)
      : tree_(std::move(tree)), out_(out), arrays_(arrays), keep_(keep) {}

  void error(size_t line, std::string message) {
    out_->errors.push_back(LoadError{std::string(tree_->source()), static_cast<int>(line), std::move(message)});
  }

  // A top-level value: an object, a List of objects, or (with `arrays`) a sequence of objects.
  void add(const Node& node, bool top_level) {
    if (node.is_null()) return;  // an empty YAML document
    if (top_level && arrays_ && node.is_seq()) {
      for (const Node& item : node.items()) add(item, false);
      return;
    }
    if (!node.is_map()) {
      error(node.line(), fmt::format("document is not a mapping (found a {})", node_type_name(node.type())));
      return;
    }
    const Node* kind = node.find("kind");
    if (kind == nullptr || !kind->is_string() || kind->text().empty()) {
      error(node.line(), kind == nullptr ? "object has no kind" : "object's kind is not a non-empty string");
      return;
    }
    const Node* items = node.find("items");
    if (top_level && items != nullptr && kind->text().ends_with("List") && (items->is_seq() || items->is_null())) {
      // One allocation of the right size instead of doublings (each a moment with two copies).
      auto& docs = out_->documents;
      const size_t needed = docs.size() + items->size();
      if (needed > docs.capacity()) docs.reserve(std::max(needed, 2 * docs.capacity()));
      for (const Node& item : items->items()) {
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
    const Node* root = &node;
    if (top_level) root = TreeBuilder::store(*tree_, &node, 1);
    Document doc;
    doc.source = tree_->source();
    doc.line = root->line();
    doc.kind = kind->text();
    if (const Node* v = root->find("apiVersion"); v != nullptr && v->is_string()) doc.api_version = v->text();
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

void load_json(const std::shared_ptr<Tree>& tree, LoadResult* out, const KindFilter& keep) {
  DocumentSink sink(tree, out, true, keep);
  JsonScanner scanner(*tree, tree->text(), keep);
  Node node;
  while (scanner.next(&node)) sink.add(node, true);
  if (!scanner.error().empty()) sink.error(scanner.line(), scanner.error());
}

void load_yaml(const std::shared_ptr<Tree>& tree, LoadResult* out, const KindFilter& keep) {
  DocumentSink sink(tree, out, false, keep);
  const std::string_view text = tree->text();
  if (text.size() > kMaxYamlBytes) {
    sink.error(1, fmt::format("YAML input of {:.1f} MiB is over kgpu's limit of {} MiB for YAML; convert it to JSON "
                              "(kubectl get -o json, yq -o json), which has no such limit",
                              static_cast<double>(text.size()) / (1 << 20), kMaxYamlBytes >> 20));
    return;
  }
  const size_t budget = kMaxYamlNodes + text.size();
  size_t nodes_left = budget;
  const auto chunks = yaml_chunks(text);
  for (size_t i = 0; i < chunks.size(); ++i) {
    const auto [begin, line] = chunks[i];
    const size_t end = i + 1 < chunks.size() ? chunks[i + 1].first : text.size();
    if (auto bad = find_forbidden_byte(text.substr(begin, end - begin))) {
      sink.error(line + bad->line - 1, bad->message(line));
      continue;
    }
    const std::string chunk(text.substr(begin, end - begin));
    // yaml-cpp's LoadAll never returns on some inputs (a stray top-level ','): scan first. Nodes
    // and depth are bounded by the converter (its budget and kMaxDepth), with its messages.
    constexpr size_t kNoLimit = std::numeric_limits<size_t>::max();
    if (auto p = scan_yaml(chunk, {kNoLimit, kNoLimit, kNoLimit})) {
      sink.error(line + static_cast<size_t>(p->line) - 1, "invalid YAML: " + p->message);
      continue;
    }
    std::vector<YAML::Node> docs;
    try {
      docs = YAML::LoadAll(chunk);
    } catch (const YAML::Exception& e) {
      const size_t at = e.mark.line >= 0 ? line + static_cast<size_t>(e.mark.line) : line;
      sink.error(at, fmt::format("invalid YAML: {}", e.msg));
      continue;
    } catch (const std::exception& e) {
      sink.error(line, fmt::format("invalid YAML: {}", e.what()));
      continue;
    }
    for (const YAML::Node& y : docs) {
      YamlConverter converter(*tree, line - 1, &nodes_left, budget);
      Node node;
      bool ok = false;
      try {
        ok = converter.convert(y, line, &node);
      } catch (const std::exception& e) {
        sink.error(line, fmt::format("invalid YAML: {}", e.what()));
        continue;
      }
      if (!ok) {
        sink.error(converter.error_line() > 0 ? converter.error_line() : line, converter.error());
        if (nodes_left == 0) return;  // the budget is for the whole input
        continue;
      }
      sink.add(node, true);
    }
  }
}

bool looks_like_json(std::string_view source, std::string_view text) {
  if (source.ends_with(".json")) return true;
  if (source.ends_with(".yaml") || source.ends_with(".yml")) return false;
  const size_t first = text.find_first_not_of(" \t\r\n");
  return first != std::string_view::npos && (text[first] == '{' || text[first] == '[');
}

}  // namespace

// -----------------------------------------------------------------------------------------------
// Node

const char* node_type_name(NodeType t) {
  switch (t) {
    case NodeType::kNull:
      return "null";
    case NodeType::kBool:
      return "bool";
    case NodeType::kNumber:
      return "number";
    case NodeType::kString:
      return "string";
    case NodeType::kMap:
      return "map";
    case NodeType::kSeq:
      return "list";
  }
  return "null";
}

std::span<const Entry> Node::entries() const {
  if (!is_map() || size_ == 0) return {};
  return {static_cast<const Entry*>(data_), size_};
}

const Entry* Node::find_entry(std::string_view key) const {
  const auto all = entries();
  for (auto it = all.rbegin(); it != all.rend(); ++it) {
    if (it->key() == key) return &*it;
  }
  return nullptr;
}

const Node* Node::find(std::string_view key) const {
  const Entry* e = find_entry(key);
  return e != nullptr ? &e->value() : nullptr;
}

const Node* Node::at(std::initializer_list<std::string_view> path) const {
  const Node* n = this;
  for (std::string_view key : path) {
    n = n->find(key);
    if (n == nullptr) return nullptr;
  }
  return n;
}

std::span<const Node> Node::items() const {
  if (!is_seq() || size_ == 0) return {};
  return {static_cast<const Node*>(data_), size_};
}

std::optional<int64_t> Node::as_int(bool allow_string) const {
  if (type() != NodeType::kNumber && !(allow_string && type() == NodeType::kString)) return std::nullopt;
  const std::string_view s = text();
  const char* b = s.data() + (!s.empty() && s[0] == '+' ? 1 : 0);
  int64_t v = 0;
  const auto [ptr, ec] = std::from_chars(b, s.data() + s.size(), v);
  if (ec == std::errc() && ptr == s.data() + s.size()) return v;
  return std::nullopt;
}

std::optional<double> Node::as_double() const {
  if (type() != NodeType::kNumber) return std::nullopt;
  const std::string_view s = text();
  const char* b = s.data() + (!s.empty() && s[0] == '+' ? 1 : 0);
  double v = 0;
  const auto [ptr, ec] = std::from_chars(b, s.data() + s.size(), v);
  if (ec != std::errc() || ptr != s.data() + s.size()) return std::nullopt;
  return v;
}

std::optional<bool> Node::as_bool() const {
  if (type() != NodeType::kBool) return std::nullopt;
  return yaml11_bool(text());
}

// -----------------------------------------------------------------------------------------------
// Documents

ObjectMeta decode_meta(const Node* metadata, int key_line) {
  ObjectMeta m;
  if (metadata == nullptr) return m;
  m.line = key_line;
  if (!metadata->is_map()) return m;
  const auto str = [&](std::string_view key) {
    const Node* n = metadata->find(key);
    return n != nullptr && n->is_scalar() && !n->is_null() ? n->text() : std::string_view();
  };
  m.name = str("name");
  m.generate_name = str("generateName");
  m.namespace_ = str("namespace");
  m.uid = str("uid");
  m.creation_timestamp = str("creationTimestamp");
  if (const Entry* e = metadata->find_entry("name")) m.name_line = e->key_line();
  const auto string_map = [](const Node* n, StringMap* out) {
    if (n == nullptr || n->size() == 0) return;
    std::vector<StringMap::value_type> kv;
    kv.reserve(n->size());
    for (const Entry& e : n->entries()) {
      if (e.value().is_scalar()) kv.emplace_back(e.key(), e.value().text());
    }
    out->assign_last_wins(std::move(kv));
  };
  if (const Entry* e = metadata->find_entry("labels")) {
    m.labels_line = e->key_line();
    string_map(&e->value(), &m.labels);
  }
  string_map(metadata->find("annotations"), &m.annotations);
  if (const Node* refs = metadata->find("ownerReferences")) {
    m.owner_references.reserve(refs->items().size());
    for (const Node& r : refs->items()) {
      OwnerReference o;
      o.line = r.line();
      const auto field = [&](std::string_view key) {
        const Node* n = r.find(key);
        return n != nullptr && n->is_scalar() ? n->text() : std::string_view();
      };
      o.api_version = field("apiVersion");
      o.kind = field("kind");
      o.name = field("name");
      o.uid = field("uid");
      if (const Node* c = r.find("controller")) o.controller = c->as_bool().value_or(false);
      m.owner_references.push_back(o);
    }
  }
  return m;
}

std::string_view Document::api_group() const {
  const size_t slash = api_version.find('/');
  return slash == std::string_view::npos ? std::string_view() : api_version.substr(0, slash);
}

std::string_view Document::api_version_only() const {
  const size_t slash = api_version.find('/');
  return slash == std::string_view::npos ? api_version : api_version.substr(slash + 1);
}

std::string Document::ref() const {
  if (metadata.namespace_.empty()) return fmt::format("{}/{}", kind, metadata.name);
  return fmt::format("{}/{}/{}", kind, metadata.namespace_, metadata.name);
}

std::string Document::where(int at_line) const { return fmt::format("{}:{}", source, at_line > 0 ? at_line : line); }

std::string LoadError::to_string() const {
  if (line <= 0) return fmt::format("{}: {}", source, message);
  return fmt::format("{}:{}: {}", source, line, message);
}

void LoadResult::append(LoadResult&& other) {
  // Moving the vector, not its elements: a multi-million-object snapshot must not exist twice.
  if (documents.empty()) {
    documents = std::move(other.documents);
  } else {
    documents.insert(documents.end(), std::make_move_iterator(other.documents.begin()),
                     std::make_move_iterator(other.documents.end()));
  }
  errors.insert(errors.end(), std::make_move_iterator(other.errors.begin()),
                std::make_move_iterator(other.errors.end()));
}

namespace {

LoadResult load_tree(const std::shared_ptr<Tree>& tree, InputFormat format, const KindFilter& keep) {
  const bool json =
      format == InputFormat::kJson || (format == InputFormat::kAuto && looks_like_json(tree->source(), tree->text()));
  LoadResult out;
  if (json) {
    load_json(tree, &out, keep);
  } else {
    load_yaml(tree, &out, keep);
  }
  return out;
}

// Files at least this large are mapped rather than copied (a snapshot of a large cluster is ~1 GB).
constexpr off_t kMapThreshold = 16 << 20;

}  // namespace

LoadResult load_text(std::string text, std::string source_name, InputFormat format, const KindFilter& keep) {
  return load_tree(std::make_shared<Tree>(std::move(text), std::move(source_name)), format, keep);
}

Result<LoadResult> load_file(const std::filesystem::path& path, InputFormat format, const KindFilter& keep) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    return fail(err == EACCES ? ErrorCode::kPermissionDenied : ErrorCode::kNotFound, "cannot read {}: {}",
                path.string(), std::strerror(err));
  }
  struct stat st {};
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size >= kMapThreshold) {
    void* m = ::mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
    ::close(fd);
    if (m == MAP_FAILED) return fail(ErrorCode::kUnavailable, "cannot map {}: {}", path.string(), std::strerror(errno));
    ::madvise(m, static_cast<size_t>(st.st_size), MADV_SEQUENTIAL);
    return load_tree(std::make_shared<Tree>(m, static_cast<size_t>(st.st_size), path.string()), format, keep);
  }
  std::string text;
  char buffer[1 << 16];
  while (true) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      return fail(ErrorCode::kInvalidArgument, "cannot read {}: {}", path.string(), std::strerror(err));
    }
    text.append(buffer, static_cast<size_t>(n));
  }
  ::close(fd);
  return load_text(std::move(text), path.string(), format, keep);
}

LoadResult load_stream(std::istream& in, std::string source_name, const KindFilter& keep) {
  std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  return load_text(std::move(text), std::move(source_name), InputFormat::kAuto, keep);
}

Result<LoadResult> load_paths(const std::vector<std::string>& paths, const KindFilter& keep) {
  LoadResult out;
  for (const std::string& p : paths) {
    if (p == "-") {
      out.append(load_stream(std::cin, "<stdin>", keep));
      continue;
    }
    std::error_code ec;
    const std::filesystem::path path(p);
    if (std::filesystem::is_directory(path, ec)) {
      std::vector<std::filesystem::path> files;
      for (auto it = std::filesystem::recursive_directory_iterator(path, ec);
           !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
        const auto ext = it->path().extension();
        if (it->is_regular_file(ec) && (ext == ".yaml" || ext == ".yml" || ext == ".json")) files.push_back(it->path());
      }
      if (ec) return fail(ErrorCode::kPermissionDenied, "cannot list {}: {}", p, ec.message());
      std::sort(files.begin(), files.end());
      for (const auto& f : files) {
        auto r = load_file(f, InputFormat::kAuto, keep);
        if (!r) return std::unexpected(r.error());
        out.append(std::move(*r));
      }
      continue;
    }
    if (!std::filesystem::exists(path, ec)) return fail(ErrorCode::kNotFound, "{}: no such file or directory", p);
    auto r = load_file(path, InputFormat::kAuto, keep);
    if (!r) return std::unexpected(r.error());
    out.append(std::move(*r));
  }
  return out;
}

}  // namespace kgpu::k8s
