#include "sim/trace.h"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <fstream>
#include <sstream>

#include "common/strings.h"

namespace kgpu::sim {

namespace {

// The trace's CSV: plain comma-separated cells, no quoting; cells are trimmed.
std::vector<std::string> split(const std::string& line) {
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

struct Table {
  std::vector<std::string> header;
  std::vector<std::pair<int, std::vector<std::string>>> rows;  // (line number, cells)
};

Result<Table> read_table(const std::string& text, const std::string& source, const std::vector<std::string>& required) {
  Table t;
  std::istringstream in(text.starts_with("\xEF\xBB\xBF") ? text.substr(3) : text);  // a UTF-8 BOM
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (line.empty() || line == "\r") continue;
    if (line.find('"') != std::string::npos) {
      return fail(ErrorCode::kInvalidArgument, "{}:{}: quoted fields are not supported in trace CSVs", source, number);
    }
    if (t.header.empty()) {
      t.header = split(line);
      for (const auto& r : required) {
        if (std::find(t.header.begin(), t.header.end(), r) == t.header.end()) {
          return fail(ErrorCode::kInvalidArgument, "{}:{}: header lacks column '{}'", source, number, r);
        }
      }
      continue;
    }
    auto cells = split(line);
    if (cells.size() != t.header.size()) {
      return fail(ErrorCode::kInvalidArgument, "{}:{}: {} columns, the header has {} (truncated file?)", source, number,
                  cells.size(), t.header.size());
    }
    t.rows.emplace_back(number, std::move(cells));
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
      return fail(ErrorCode::kInvalidArgument, "{}:{}: {} '{}' is not an integer", source_, line_, col, s);
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
  std::ifstream in(path);
  if (!in) return fail(ErrorCode::kNotFound, "cannot read {}", path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

#define KGPU_TRY(var, expr)                              \
  auto var##_r = (expr);                                 \
  if (!var##_r) return std::unexpected(var##_r.error()); \
  const auto var = *var##_r

}  // namespace

Result<std::vector<sched::Node>> parse_nodes(const std::string& text, const std::string& source) {
  auto t = read_table(text, source, {"sn", "cpu_milli", "memory_mib", "gpu", "model"});
  if (!t) return std::unexpected(t.error());
  std::vector<sched::Node> out;
  for (const auto& [line, cells] : t->rows) {
    Row r(*t, source, line, cells);
    sched::Node n;
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
  }
  return out;
}

Result<std::vector<sched::Pod>> parse_pods(const std::string& text, const std::string& source) {
  auto t = read_table(text, source, {"name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli"});
  if (!t) return std::unexpected(t.error());
  std::vector<sched::Pod> out;
  for (const auto& [line, cells] : t->rows) {
    Row r(*t, source, line, cells);
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
        return fail(ErrorCode::kInvalidArgument, "{}:{}: gpu_spec '{}' names no GPU model", source, line, spec);
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
    out.push_back(std::move(p));
  }
  return out;
}

Result<std::vector<sched::Node>> load_nodes(const std::string& path) {
  auto text = read_file(path);
  if (!text) return std::unexpected(text.error());
  return parse_nodes(*text, path);
}

Result<std::vector<sched::Pod>> load_pods(const std::string& path) {
  auto text = read_file(path);
  if (!text) return std::unexpected(text.error());
  return parse_pods(*text, path);
}

}  // namespace kgpu::sim
