// The loader skeleton both vendor seams share (gpu/nvml/library, gpu/dcgm/library): which file to
// load (a flag, else an environment variable, else the defaults in order), dlopen of the first
// that loads, symbol lookup, and dlclose at the end. A missing symbol is nullptr for the caller
// to count, never a failure to load (a library older than kgpu still serves what it has).
//
// Libraries are opened RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE: a driver library may start threads
// and keep thread-local storage, so its code is never unmapped, even after a failed init.
// Ownership: move-only; the destructor closes the handle. Thread safety: symbol() and path() are
// const and safe from any thread; open is a plain function.
#pragma once

#include <string>
#include <vector>

#include "common/error.h"

namespace kgpu {

class SharedLibrary {
 public:
  // `flag` when set, else $`env` when set and not empty, else `defaults`.
  static std::vector<std::string> candidates(const std::string& flag, const char* env,
                                             const std::vector<std::string>& defaults);
  // The first candidate that loads. kNotFound lists what each attempt said.
  static Result<SharedLibrary> open_first(const std::vector<std::string>& candidates);

  SharedLibrary(SharedLibrary&& other) noexcept;
  SharedLibrary& operator=(SharedLibrary&& other) noexcept;
  SharedLibrary(const SharedLibrary&) = delete;
  SharedLibrary& operator=(const SharedLibrary&) = delete;
  ~SharedLibrary();

  // The address of `name`, or nullptr when the library does not export it.
  void* symbol(const char* name) const;
  const std::string& path() const { return path_; }

 private:
  SharedLibrary(void* handle, std::string path) : handle_(handle), path_(std::move(path)) {}
  void* handle_ = nullptr;
  std::string path_;
};

}  // namespace kgpu
