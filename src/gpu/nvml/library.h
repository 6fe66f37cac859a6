// Loading libnvidia-ml.so.1 and calling it.
//
// Library::open() dlopens the library (the real driver's, or tools/fake-nvml's: the same path)
// and resolves every symbol in KGPU_NVML_FUNCTIONS into one table. A symbol the library does not
// export leaves its entry null; call() then answers NOT_SUPPORTED without calling anything, so an
// old driver never crashes us. init() calls nvmlInit_v2 and turns failures into errors a user can
// act on. The destructor calls nvmlShutdown (if init succeeded) and dlcloses.
//
// Thread safety: after open()/init() return, call() may be used from any thread (NVML itself is
// thread-safe). open/init/destruction are not concurrent with anything else.
#pragma once

#include <memory>
#include <string>

#include "common/error.h"
#include "common/shared_library.h"
#include "gpu/nvml/abi.h"

namespace kgpu::nvml {

// Environment variable that overrides the library path (the --nvml-library flag wins over it).
inline constexpr const char* kLibraryEnv = "KGPU_NVML_LIBRARY";
inline constexpr const char* kDefaultLibrary = "libnvidia-ml.so.1";

// Picks the library path: the flag if non-empty, else $KGPU_NVML_LIBRARY if set, else the default.
std::string resolve_library_path(const std::string& flag_value);

struct SymbolTable {
#define KGPU_NVML_DECLARE_MEMBER(name, params) fn::name name = nullptr;
  KGPU_NVML_FUNCTIONS(KGPU_NVML_DECLARE_MEMBER)
#undef KGPU_NVML_DECLARE_MEMBER
  fn::nvmlErrorString nvmlErrorString = nullptr;
};

class Library {
 public:
  // Loads the library at `path` (a bare name searches the loader path). Errors: kNotFound when
  // the file cannot be loaded (no NVIDIA driver installed), with dlerror's text.
  static Result<std::unique_ptr<Library>> open(const std::string& path);

  ~Library();
  Library(const Library&) = delete;
  Library& operator=(const Library&) = delete;

  // nvmlInit_v2. Errors name the cause: driver not loaded, driver/library version mismatch,
  // no permission on /dev/nvidia*, ...
  Result<void> init();

  const std::string& path() const { return so_.path(); }
  const SymbolTable& symbols() const { return sym_; }

  // Number of symbols of KGPU_NVML_FUNCTIONS the library does not export.
  int missing_symbols() const { return missing_; }

  // Calls a resolved function; NOT_SUPPORTED (no call) when the symbol is missing.
  template <typename Fn, typename... Args>
  Return call(Fn fn, Args... args) const {
    if (fn == nullptr) return kErrorNotSupported;
    return fn(args...);
  }

  // NVML's own text for a code when available, else our symbolic name.
  std::string error_string(Return r) const;

 private:
  explicit Library(SharedLibrary so) : so_(std::move(so)) {}
  SharedLibrary so_;  // closed after the destructor's shutdown call
  SymbolTable sym_;
  int missing_ = 0;
  bool initialized_ = false;
};

// Maps an NVML return code to our error code.
ErrorCode error_code_for(Return r);

}  // namespace kgpu::nvml
