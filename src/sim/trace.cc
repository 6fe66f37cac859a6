#include "sim/trace.h"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <string_view>

#include "common/strings.h"

namespace kgpu::sim {

namespace {

// The trace's CSV: plain comma-separated cells, no quoting; cells are trimmed.
//
// Limits (a hostile or corrupt file fails fast with file:line instead of exhausting memory): a line
// of at most 1 MiB, at most 256 columns (openb files have 5 to 12 lines of < 200 bytes). Rows are
// handed to the caller one at a time and not kept, so memory follows the decoded result, not the
// text's cell count.
constexpr size_t kMaxLineBytes = 1 << 20;
constexpr size_t kMaxColumns = 256;

std::vector<std::string> split(std::string_view line) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : line) {
    if (c == ',') {
      out.push_back(trim(cur));
      cur.clear();
    } else if (c != '\r') {
      cur += c;
    }
  }
  out.push_back(trim(cur));
  return out;
}

// A cell for a message: at most 40 characters.
std::string shown(std::string_view cell) {
  if (cell.size() <= 40) return std::string(cell);
  return fmt::format("{}... ({} characters)", cell.substr(0, 32), cell.size());
}

struct Table {
  std::vector<std::string> header;
};

// Reads the header, then calls `row(line number, cells)` for each data row; stops at the first error.
template <typename RowFn>
Result<Table> read_table(std::string_view text, const std::string& source, const std::vector<std::string>& required,
                         RowFn&& row) {
  Table t;
  if (text.starts_with("\xEF\xBB\xBF")) text.remove_prefix(3);  // a UTF-8 BOM
  size_t number = 0;
  for (size_t pos = 0; pos < text.size();) {
    const size_t nl = text.find('\n', pos);
    const std::string_view line = text.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
    pos = nl == std::string_view::npos ? text.size() : nl + 1;
    ++number;
    if (line.empty() || line == "\r") continue;
    if (line.size() > kMaxLineBytes) {
      return fail(ErrorCode::kInvalidArgument, "{}:{}: line of {} bytes, over the limit of {} (not a trace CSV?)",
                  source, number, line.size(), kMaxLineBytes);
    }
    if (line.find('"') != std::string_view::npos) {
      return fail(ErrorCode::kInvalidArgument, "{}:{}: quoted fields are not supported in trace CSVs", source, number);
    }
    const size_t columns = static_cast<size_t>(std::count(line.begin(), line.end(), ',')) + 1;
    if (t.header.empty()) {
      if (columns > kMaxColumns) {
        return fail(ErrorCode::kInvalidArgument, "{}:{}: header of {} columns, over the limit of {}", source, number,
                    columns, kMaxColumns);
      }
      t.header = split(line);
      for (const auto& r : required) {
        if (std::find(t.header.begin(), t.header.end(), r) == t.header.end()) {
          return fail(ErrorCode::kInvalidArgument, "{}:{}: header lacks column '{}'", source, number, r);
        }
      }
      continue;
    }
    if (columns != t.header.size()) {
      return fail(ErrorCode::kInvalidArgument, "{}:{}: {} columns, the header has {} (truncated file?)", source, number,
                  columns, t.header.size());
    }
    if (auto r = row(static_cast<int>(std::min<size_t>(number, INT32_MAX)), t, split(line)); !r) {
      return std::unexpected(r.error());
    }
  }
  if (t.header.empty()) return fail(ErrorCode::kInvalidArgument, "{}: empty file", source);
  return t;
}

class Row {
 public:
  Row(const Table& t, const std::string& source, int line, const std::vector<std::string>& cells)
      : t_(t), source_(source), line_(line), cells_(cells) {}
  bool has(const std::string& col) const {
    return std::find(t_.header.begin(), t_.header.end(), col) != t_.header.end();
  }
  const std::string& str(const std::string& col) const {
    return cells_[std::find(t_.header.begin(), t_.header.end(), col) - t_.header.begin()];
  }
  Result<int64_t> num(const std::string& col, int64_t lo, int64_t hi) const {
    const std::string& s = str(col);
    int64_t v = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || p != s.data() + s.size()) {
      return fail(ErrorCode::kInvalidArgument, "{}:{}: {} '{}' is not an integer", source_, line_, col, shown(s));
    }
    if (v < lo || v > hi) {
      return fail(ErrorCode::kInvalidArgument, "{}:{}: {} {} is outside {}..{}", source_, line_, col, v, lo, hi);
    }
    return v;
  }

 private:
  const Table& t_;
  const std::string& source_;
  int line_;
  const std::vector<std::string>& cells_;
};

Result<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return fail(ErrorCode::kNotFound, "cannot read {}", path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

#define KGPU_TRY(var, expr)                              \
  auto var##_r = (expr);                                 \
  if (!var##_r) return std::unexpected(var##_r.error()); \
  const auto var = *var##_r

}  // namespace

Result<std::vector<sched::NodeState>> parse_nodes(const std::string& text, const std::string& source) {
  std::vector<sched::NodeState> out;
  auto t = read_table(text, source, {"sn", "cpu_milli", "memory_mib", "gpu", "model"},
                      [&](int line, const Table& table, const std::vector<std::string>& cells) -> Result<void> {
    Row r(table, source, line, cells);
    sched::NodeState n;
    n.name = r.str("sn");
    KGPU_TRY(cpu, r.num("cpu_milli", 0, 1'000'000'000));
    KGPU_TRY(mem, r.num("memory_mib", 0, 1'000'000'000));
    KGPU_TRY(gpus, r.num("gpu", 0, 64));
    n.cpu_milli = n.cpu_free = cpu;
    n.memory_mib = n.memory_free = mem;
    n.gpu_model = r.str("model");
    if (gpus > 0 && n.gpu_model.empty()) {
      return fail(ErrorCode::kInvalidArgument, "{}:{}: a node with GPUs needs a model", source, line);
    }
    n.gpu_free.assign(static_cast<size_t>(gpus), sched::kMilli);
    if (!n.gpu_model.empty()) n.labels["gpu-model"] = n.gpu_model;
    out.push_back(std::move(n));
    return {};
  });
  if (!t) return std::unexpected(t.error());
  return out;
}

Result<std::vector<sched::Pod>> parse_pods(const std::string& text, const std::string& source,
                                           std::vector<std::string>* qos) {
  std::vector<sched::Pod> out;
  auto t = read_table(text, source, {"name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli"},
                      [&](int line, const Table& table, const std::vector<std::string>& cells) -> Result<void> {
    Row r(table, source, line, cells);
    sched::Pod p;
    p.name = r.str("name");
    KGPU_TRY(cpu, r.num("cpu_milli", 0, 1'000'000'000));
    KGPU_TRY(mem, r.num("memory_mib", 0, 1'000'000'000));
    KGPU_TRY(ngpu, r.num("num_gpu", 0, 64));
    KGPU_TRY(milli, r.num("gpu_milli", 0, 1000));
    p.cpu_milli = cpu;
    p.memory_mib = mem;
    p.num_gpu = static_cast<int>(ngpu);
    p.gpu_milli = static_cast<int>(milli);
    if (p.num_gpu == 0 && p.gpu_milli != 0) {
      return fail(ErrorCode::kInvalidArgument, "{}:{}: gpu_milli {} without num_gpu", source, line, p.gpu_milli);
    }
    if (p.num_gpu > 0 && p.gpu_milli == 0) {
      return fail(ErrorCode::kInvalidArgument, "{}:{}: num_gpu {} with gpu_milli 0", source, line, p.num_gpu);
    }
    if (p.num_gpu > 1 && p.gpu_milli != sched::kMilli) {
      return fail(ErrorCode::kInvalidArgument, "{}:{}: {} GPUs must be whole (gpu_milli 1000), got {}", source, line,
                  p.num_gpu, p.gpu_milli);
    }
    // Allowed GPU models ("V100M16|V100M32"); meaningless for CPU-only pods, so ignored there.
    if (r.has("gpu_spec") && !r.str("gpu_spec").empty() && p.num_gpu > 0) {
      const std::string& spec = r.str("gpu_spec");
      for (size_t start = 0;;) {
        const auto bar = spec.find('|', start);
        if (auto model = trim(spec.substr(start, bar == std::string::npos ? std::string::npos : bar - start));
            !model.empty()) {
          p.gpu_models.push_back(std::move(model));
        }
        if (bar == std::string::npos) break;
        start = bar + 1;
      }
      if (p.gpu_models.empty()) {
        return fail(ErrorCode::kInvalidArgument, "{}:{}: gpu_spec '{}' names no GPU model", source, line, shown(spec));
      }
    }
    if (r.has("creation_time")) {
      KGPU_TRY(created, r.num("creation_time", 0, INT64_MAX));
      p.creation = created;
    }
    if (r.has("deletion_time") && !r.str("deletion_time").empty()) {
      KGPU_TRY(deleted, r.num("deletion_time", 0, INT64_MAX));
      p.deletion = deleted;
    }
    if (qos != nullptr && r.has("qos")) qos->push_back(r.str("qos"));
    out.push_back(std::move(p));
    return {};
  });
  if (!t) return std::unexpected(t.error());
  return out;
}

Result<std::vector<sched::NodeState>> load_nodes(const std::string& path) {
  auto text = read_file(path);
  if (!text) return std::unexpected(text.error());
  return parse_nodes(*text, path);
}

Result<std::vector<sched::Pod>> load_pods(const std::string& path, std::vector<std::string>* qos) {
  auto text = read_file(path);
  if (!text) return std::unexpected(text.error());
  return parse_pods(*text, path, qos);
}

}  // namespace kgpu::sim
