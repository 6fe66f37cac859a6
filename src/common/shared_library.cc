#include "common/shared_library.h"

#include <dlfcn.h>

#include <cstdlib>
#include <utility>

namespace kgpu {

std::vector<std::string> SharedLibrary::candidates(const std::string& flag, const char* env,
                                                   const std::vector<std::string>& defaults) {
  if (!flag.empty()) return {flag};
  if (const char* v = std::getenv(env); v != nullptr && *v != '\0') return {v};
  return defaults;
}

Result<SharedLibrary> SharedLibrary::open_first(const std::vector<std::string>& candidates) {
  std::string tried;
  for (const auto& c : candidates) {
    dlerror();
    void* handle = dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (handle != nullptr) return SharedLibrary(handle, c);
    const char* why = dlerror();
    if (!tried.empty()) tried += "; ";
    tried += why != nullptr ? why : c + ": unknown reason";
  }
  return fail(ErrorCode::kNotFound, "{}", tried.empty() ? "no library to load" : tried);
}

SharedLibrary::SharedLibrary(SharedLibrary&& other) noexcept
    : handle_(std::exchange(other.handle_, nullptr)), path_(std::move(other.path_)) {}

SharedLibrary& SharedLibrary::operator=(SharedLibrary&& other) noexcept {
  if (this != &other) {
    if (handle_ != nullptr) dlclose(handle_);
    handle_ = std::exchange(other.handle_, nullptr);
    path_ = std::move(other.path_);
  }
  return *this;
}

SharedLibrary::~SharedLibrary() {
  if (handle_ != nullptr) dlclose(handle_);
}

void* SharedLibrary::symbol(const char* name) const { return handle_ != nullptr ? dlsym(handle_, name) : nullptr; }

}  // namespace kgpu
