// The JSON loader: a single-pass scanner straight into the Tree (no intermediate DOM), with the
// same depth and size limits as the YAML loader; objects of unwanted kinds inside a List are
// skipped without being kept.
#include <charconv>
#include <cmath>

#include "common/strings.h"
#include "k8s/loader.h"

namespace kgpu::k8s {

namespace {

class JsonScanner {
 public:
  // `keep` (may be empty): the kinds wanted; an object of another kind that is an element of a
  // top-level array or of a top-level object's `items` is dropped as soon as it is read, tree and all.
  JsonScanner(Tree& tree, std::string_view text, const KindFilter& keep)
      : tree_(tree), p_(text.data()), end_(text.data() + text.size()), keep_(keep) {}

  // The next top-level value into *out: true; false at the end of input or on an error (error() set).
  bool next(Value* out) {
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

  bool value(Value* out, int depth) {
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
        *out = TreeBuilder::scalar(ValueType::kString, s, line);
        return true;
      }
      case 't':
        return literal("true", ValueType::kBool, out);
      case 'f':
        return literal("false", ValueType::kBool, out);
      case 'n':
        return literal("null", ValueType::kNull, out);
      default:
        return number(out);
    }
  }

  bool literal(std::string_view word, ValueType type, Value* out) {
    if (static_cast<size_t>(end_ - p_) < word.size() || std::string_view(p_, word.size()) != word) {
      return fail_here(fmt::format("unexpected {}: expected a value", found()));
    }
    *out = TreeBuilder::scalar(type, std::string_view(p_, word.size()), line_);
    p_ += word.size();
    return true;
  }

  bool number(Value* out) {
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
    *out = TreeBuilder::scalar(ValueType::kNumber, std::string_view(start, p_ - start), line_);
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

  bool object(Value* out, int depth) {
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
        Value v;
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

  bool array(Value* out, int depth) {
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
        Value v;
        const Tree::Mark before = tree_.mark();
        if (!value(&v, depth + 1)) return false;
        bool dropped = false;
        if (filter && v.is_map()) {
          if (const Value* kind = v.find("kind"); kind != nullptr && kind->is_string() && !keep_(kind->text())) {
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
  std::vector<Value> items_;
  const KindFilter& keep_;
  bool filter_items_ = false;  // the next value is a top-level object's `items`
};

}  // namespace

void load_json(const std::shared_ptr<Tree>& tree, LoadResult* out, const KindFilter& keep) {
  DocumentSink sink(tree, out, true, keep);
  JsonScanner scanner(*tree, tree->text(), keep);
  Value node;
  while (scanner.next(&node)) sink.add(node, true);
  if (!scanner.error().empty()) sink.error(scanner.line(), scanner.error());
}

}  // namespace kgpu::k8s
