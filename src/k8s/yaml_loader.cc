// The YAML loader: the input is cut at "---" lines, each chunk is checked (forbidden bytes, a
// scan with yaml-cpp's event parser, common/yaml_guard) before yaml-cpp loads it, and the
// yaml-cpp nodes are converted into the Tree within a node budget (alias expansion included).
#include <yaml-cpp/yaml.h>

#include <limits>

#include "common/yaml_guard.h"
#include "k8s/loader.h"

namespace kgpu::k8s {

namespace {

constexpr size_t kMaxYamlBytes = size_t{64} << 20;
constexpr size_t kMaxYamlNodes = 1'000'000;

// ---------------------------------------------------------------------------------------------
// Scalars

bool is_yaml_null(std::string_view s) { return s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL"; }

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

ValueType resolve_plain(std::string_view s) {
  if (is_yaml_null(s)) return ValueType::kNull;
  if (yaml11_bool(s)) return ValueType::kBool;
  if (looks_numeric(s)) return ValueType::kNumber;
  return ValueType::kString;
}

class YamlConverter {
 public:
  // `*nodes_left`: how many more nodes (scalars, mappings, sequences, keys) the input may produce,
  // shared by its documents; `budget` is its initial value (for the message).
  YamlConverter(Tree& tree, size_t line_offset, size_t* nodes_left, size_t budget)
      : tree_(tree), offset_(line_offset), left_(nodes_left), budget_(budget) {}

  // False (error() and error_line() set) when nesting is too deep or the node budget is spent
  // (aliases expand shared nodes once per reference: "billion laughs").
  bool convert(const YAML::Node& y, size_t fallback_line, Value* out, int depth = 0) {
    const YAML::Mark mark = y.Mark();
    const size_t line = mark.line >= 0 ? offset_ + static_cast<size_t>(mark.line) + 1 : fallback_line;
    if (depth > kMaxDepth) return fail(line, fmt::format("nesting deeper than {} levels", kMaxDepth));
    if (!take()) return fail(line, budget_message());
    switch (y.Type()) {
      case YAML::NodeType::Undefined:
      case YAML::NodeType::Null:
        *out = TreeBuilder::scalar(ValueType::kNull, {}, line);
        return true;
      case YAML::NodeType::Scalar: {
        const std::string& s = y.Scalar();
        const std::string& tag = y.Tag();
        ValueType type = ValueType::kString;
        if (tag == "?")
          type = resolve_plain(s);
        else if (tag == "tag:yaml.org,2002:null")
          type = ValueType::kNull;
        else if (tag == "tag:yaml.org,2002:bool")
          type = ValueType::kBool;
        else if (tag == "tag:yaml.org,2002:int" || tag == "tag:yaml.org,2002:float")
          type = ValueType::kNumber;
        *out = TreeBuilder::scalar(type, tree_.copy(s), line);
        return true;
      }
      case YAML::NodeType::Sequence: {
        std::vector<Value> items(y.size());
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
          Value v;
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

}  // namespace

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
      Value node;
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

}  // namespace kgpu::k8s
