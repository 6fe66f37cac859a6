#include "common/files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>

namespace kgpu {

namespace {

Error errno_error(int e, const std::string& message) {
  ErrorCode code = ErrorCode::kUnavailable;
  if (e == EACCES || e == EPERM || e == EROFS) code = ErrorCode::kPermissionDenied;
  if (e == ENOENT || e == ENOTDIR) code = ErrorCode::kNotFound;
  return Error{code, fmt::format("{}: {}", message, std::error_code(e, std::generic_category()).message())};
}

}  // namespace

std::optional<std::string> read_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  if (in.bad()) return std::nullopt;
  return text.str();
}

Result<std::string> read_file_limited(const std::string& path, size_t max_bytes) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::unexpected(errno_error(errno, fmt::format("cannot read {}", path)));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
    return fail(ErrorCode::kInvalidArgument, "cannot read {}: it is a directory", path);
  }
  if (S_ISREG(st.st_mode) && static_cast<unsigned long long>(st.st_size) > max_bytes) {
    return fail(ErrorCode::kInvalidArgument, "{}: {} bytes, more than the limit of {} bytes: refused", path,
                static_cast<long long>(st.st_size), max_bytes);
  }
  std::string out;
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      return std::unexpected(errno_error(errno, fmt::format("cannot read {}", path)));
    }
    if (n == 0) break;
    if (out.size() + static_cast<size_t>(n) > max_bytes) {
      return fail(ErrorCode::kInvalidArgument, "{}: more than the limit of {} bytes: refused", path, max_bytes);
    }
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

Result<void> write_file_atomically(const std::string& path, std::string_view content, mode_t mode) {
  namespace fs = std::filesystem;
  const fs::path target(path);
  if (path.empty() || !target.has_filename()) {
    return fail(ErrorCode::kInvalidArgument, "\"{}\": not a file path", path);
  }
  fs::path dir = target.parent_path();
  if (dir.empty()) dir = ".";
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return std::unexpected(errno_error(ec.value(), fmt::format("writing {}: creating {}", path, dir.string())));

  std::string name = (dir / ("." + target.filename().string() + ".tmp.XXXXXX")).string();
  const int fd = ::mkostemp(name.data(), O_CLOEXEC);
  if (fd < 0) {
    const int e = errno;
    return std::unexpected(
        errno_error(e, fmt::format("writing {}: creating a temporary file in {}", path, dir.string())));
  }
  // Removes the temporary file (closing fd first when `close_fd`) and reports errno `e` of `step`.
  auto abandon = [&](int e, std::string_view step, bool close_fd) -> Result<void> {
    if (close_fd) ::close(fd);
    ::unlink(name.c_str());
    return std::unexpected(errno_error(e, fmt::format("writing {}: {} {}", path, step, name)));
  };
  for (size_t done = 0; done < content.size();) {
    const ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return abandon(errno, "writing", true);
    }
    done += static_cast<size_t>(n);
  }
  if (::fchmod(fd, mode) != 0) return abandon(errno, "setting the mode of", true);
  if (::fsync(fd) != 0) return abandon(errno, "syncing", true);
  if (::close(fd) != 0) return abandon(errno, "closing", false);
  if (::rename(name.c_str(), path.c_str()) != 0) return abandon(errno, "renaming", false);

  // Makes the rename durable. Best effort: some file systems cannot sync a directory.
  if (const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return {};
}

}  // namespace kgpu
