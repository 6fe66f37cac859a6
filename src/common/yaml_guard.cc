#include "common/yaml_guard.h"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/exceptions.h>
#include <yaml-cpp/mark.h>
#include <yaml-cpp/parser.h>

#include <optional>
#include <sstream>
#include <unordered_map>
#include <vector>

namespace kgpu {

namespace {

// Thrown from the event handler to stop the parse at the first limit crossed.
struct LimitCrossed {
  int line;
  std::string what;
};

class Counter final : public YAML::EventHandler {
 public:
  explicit Counter(const YamlLimits& limits) : limits_(limits) {}

  void OnDocumentStart(const YAML::Mark& m) override {
    // A document that starts where the previous one did consumed nothing: yaml-cpp would loop.
    if (documents_++ > 0 && m.pos == last_start_) {
      throw LimitCrossed{m.line + 1, "unexpected character where a document should start (a stray ','?)"};
    }
    last_start_ = m.pos;
  }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& m, YAML::anchor_t a) override { leaf(m, a); }
  void OnScalar(const YAML::Mark& m, const std::string&, YAML::anchor_t a, const std::string&) override { leaf(m, a); }
  void OnAlias(const YAML::Mark& m, YAML::anchor_t a) override {
    auto it = sizes_.find(a);
    add(m, it == sizes_.end() ? 1 : it->second);
  }
  void OnSequenceStart(const YAML::Mark& m, const std::string&, YAML::anchor_t a, YAML::EmitterStyle::value) override {
    open(m, a);
  }
  void OnSequenceEnd() override { close(); }
  void OnMapStart(const YAML::Mark& m, const std::string&, YAML::anchor_t a, YAML::EmitterStyle::value) override {
    open(m, a);
  }
  void OnMapEnd() override { close(); }

 private:
  void add(const YAML::Mark& m, size_t n) {
    if (n > limits_.max_nodes || nodes_ > limits_.max_nodes - n) {
      throw LimitCrossed{m.line + 1, fmt::format("more than {} YAML nodes (aliases expanded): refused", limits_.max_nodes)};
    }
    nodes_ += n;
  }
  void leaf(const YAML::Mark& m, YAML::anchor_t a) {
    add(m, 1);
    if (a != YAML::NullAnchor) sizes_[a] = 1;
  }
  void open(const YAML::Mark& m, YAML::anchor_t a) {
    add(m, 1);
    open_.push_back({a, nodes_ - 1});
    if (open_.size() > limits_.max_depth) {
      throw LimitCrossed{m.line + 1, fmt::format("nesting deeper than {} levels: refused", limits_.max_depth)};
    }
  }
  void close() {
    if (open_.empty()) return;
    const auto [a, start] = open_.back();
    open_.pop_back();
    if (a != YAML::NullAnchor) sizes_[a] = nodes_ - start;
  }

  const YamlLimits& limits_;
  size_t documents_ = 0;
  int last_start_ = -1;
  size_t nodes_ = 0;
  std::vector<std::pair<YAML::anchor_t, size_t>> open_;  // collection anchor, node count at its start
  std::unordered_map<YAML::anchor_t, size_t> sizes_;     // anchor -> nodes it stands for
};

}  // namespace

std::optional<ForbiddenByte> find_forbidden_byte(std::string_view text) {
  size_t line = 1, line_start = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c == '\n') {
      ++line;
      line_start = i + 1;
    } else if ((c < 0x20 && c != '\t' && c != '\r') || c == 0x7f) {
      return ForbiddenByte{line, i - line_start + 1, c};
    }
  }
  return std::nullopt;
}

std::string ForbiddenByte::message(size_t first_line) const {
  const size_t at = first_line + line - 1;
  if (byte == 0) return fmt::format("NUL byte (\\0) at line {}, column {}: not valid in YAML (a binary file?)", at, column);
  return fmt::format(
      "control byte 0x{:02x} at line {}, column {}: not valid in YAML (write it as \"\\x{:02x}\" in a "
      "double-quoted string)",
      byte, at, column, byte);
}

Result<void> check_yaml(std::string_view text, const std::string& source, const YamlLimits& limits) {
  if (text.size() > limits.max_bytes) {
    return fail(ErrorCode::kInvalidArgument, "{}: {} bytes, more than the limit of {} bytes: refused", source,
                text.size(), limits.max_bytes);
  }
  if (auto bad = find_forbidden_byte(text)) return fail(ErrorCode::kInvalidArgument, "{}: {}", source, bad->message());
  if (auto p = scan_yaml(text, limits)) {
    return fail(ErrorCode::kInvalidArgument, "{}:{}: {}", source, p->line, p->message);
  }
  return {};
}

std::optional<YamlProblem> scan_yaml(std::string_view text, const YamlLimits& limits) {
  std::istringstream in{std::string(text)};
  Counter counter(limits);
  try {
    YAML::Parser parser(in);
    while (parser.HandleNextDocument(counter)) {
    }
  } catch (const LimitCrossed& e) {
    return YamlProblem{e.line, e.what};
  } catch (const YAML::Exception& e) {
    return YamlProblem{e.mark.line + 1, "not valid YAML: " + e.msg};
  }
  return std::nullopt;
}

}  // namespace kgpu

#include <yaml-cpp/yaml.h>

#include "common/yaml_load.h"

namespace kgpu {

Result<YAML::Node> load_yaml(std::string_view text, const std::string& source, const YamlLimits& limits) {
  if (auto ok = check_yaml(text, source, limits); !ok) return std::unexpected(ok.error());
  try {
    return YAML::Load(std::string(text));
  } catch (const YAML::ParserException& e) {
    return fail(ErrorCode::kInvalidArgument, "{}:{}: not valid YAML: {}", source, e.mark.line + 1, e.msg);
  }
}

std::string yaml_where(const std::string& source, const YAML::Node& n, const std::string& field) {
  const auto m = n.Mark();
  return m.line < 0 ? fmt::format("{}: {}", source, field) : fmt::format("{}:{}: {}", source, m.line + 1, field);
}

}  // namespace kgpu
