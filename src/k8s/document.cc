// The tree value (Node and Entry accessors), object metadata, Documents, and the loading entry
// points: format detection, text, files (large ones mapped), streams and paths. The loaders
// themselves are json_loader.cc and yaml_loader.cc (k8s/loader.h).
#include "k8s/document.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <charconv>
#include <cmath>
#include <iostream>
#include <iterator>

#include "k8s/loader.h"

namespace kgpu::k8s {

namespace {

bool looks_like_json(std::string_view source, std::string_view text) {
  if (source.ends_with(".json")) return true;
  if (source.ends_with(".yaml") || source.ends_with(".yml")) return false;
  const size_t first = text.find_first_not_of(" \t\r\n");
  return first != std::string_view::npos && (text[first] == '{' || text[first] == '[');
}

}  // namespace

// -----------------------------------------------------------------------------------------------
// Node

const char* node_type_name(ValueType t) {
  switch (t) {
    case ValueType::kNull:
      return "null";
    case ValueType::kBool:
      return "bool";
    case ValueType::kNumber:
      return "number";
    case ValueType::kString:
      return "string";
    case ValueType::kMap:
      return "map";
    case ValueType::kSeq:
      return "list";
  }
  return "null";
}

std::span<const Entry> Value::entries() const {
  if (!is_map() || size_ == 0) return {};
  return {static_cast<const Entry*>(data_), size_};
}

const Entry* Value::find_entry(std::string_view key) const {
  const auto all = entries();
  for (auto it = all.rbegin(); it != all.rend(); ++it) {
    if (it->key() == key) return &*it;
  }
  return nullptr;
}

const Value* Value::find(std::string_view key) const {
  const Entry* e = find_entry(key);
  return e != nullptr ? &e->value() : nullptr;
}

const Value* Value::at(std::initializer_list<std::string_view> path) const {
  const Value* n = this;
  for (std::string_view key : path) {
    n = n->find(key);
    if (n == nullptr) return nullptr;
  }
  return n;
}

std::span<const Value> Value::items() const {
  if (!is_seq() || size_ == 0) return {};
  return {static_cast<const Value*>(data_), size_};
}

std::optional<int64_t> Value::as_int(bool allow_string) const {
  if (type() != ValueType::kNumber && !(allow_string && type() == ValueType::kString)) return std::nullopt;
  const std::string_view s = text();
  const char* b = s.data() + (!s.empty() && s[0] == '+' ? 1 : 0);
  int64_t v = 0;
  const auto [ptr, ec] = std::from_chars(b, s.data() + s.size(), v);
  if (ec == std::errc() && ptr == s.data() + s.size()) return v;
  return std::nullopt;
}

std::optional<double> Value::as_double() const {
  if (type() != ValueType::kNumber) return std::nullopt;
  const std::string_view s = text();
  const char* b = s.data() + (!s.empty() && s[0] == '+' ? 1 : 0);
  double v = 0;
  const auto [ptr, ec] = std::from_chars(b, s.data() + s.size(), v);
  if (ec != std::errc() || ptr != s.data() + s.size()) return std::nullopt;
  return v;
}

std::optional<bool> Value::as_bool() const {
  if (type() != ValueType::kBool) return std::nullopt;
  return yaml11_bool(text());
}

// -----------------------------------------------------------------------------------------------
// Documents

ObjectMeta decode_meta(const Value* metadata, int key_line) {
  ObjectMeta m;
  if (metadata == nullptr) return m;
  m.line = key_line;
  if (!metadata->is_map()) return m;
  const auto str = [&](std::string_view key) {
    const Value* n = metadata->find(key);
    return n != nullptr && n->is_scalar() && !n->is_null() ? n->text() : std::string_view();
  };
  m.name = str("name");
  m.generate_name = str("generateName");
  m.namespace_ = str("namespace");
  m.uid = str("uid");
  m.creation_timestamp = str("creationTimestamp");
  if (const Entry* e = metadata->find_entry("name")) m.name_line = e->key_line();
  const auto string_map = [](const Value* n, StringMap* out) {
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
  if (const Value* refs = metadata->find("ownerReferences")) {
    m.owner_references.reserve(refs->items().size());
    for (const Value& r : refs->items()) {
      OwnerReference o;
      o.line = r.line();
      const auto field = [&](std::string_view key) {
        const Value* n = r.find(key);
        return n != nullptr && n->is_scalar() ? n->text() : std::string_view();
      };
      o.api_version = field("apiVersion");
      o.kind = field("kind");
      o.name = field("name");
      o.uid = field("uid");
      if (const Value* c = r.find("controller")) o.controller = c->as_bool().value_or(false);
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
