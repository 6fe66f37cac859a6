// Loading DCGM's client library (libdcgm.so.4, or .so.3) and reaching a DCGM instance.
//
// Library::open() dlopens the library and resolves every entry point of KGPU_DCGM_FUNCTIONS into
// one table, as src/gpu/nvml/library.* does for NVML: a missing symbol leaves its entry null and
// call() answers FUNCTION_NOT_FOUND without calling anything. init() calls dcgmInit once per
// process; the destructor calls dcgmShutdown. Connection is one handle: DCGM embedded in this
// process (dcgmStartEmbedded) or a host engine reached over TCP or a unix socket
// (dcgmConnect_v2, dcgm-exporter's `-r host:port`).
//
// Thread safety: after open()/init() return, call() may be used from any thread. A Connection
// is used by one thread at a time and must not outlive its Library.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/shared_library.h"
#include "gpu/dcgm/abi.h"

namespace kgpu::dcgm {

// Environment variable naming the library (the --dcgm-library flag wins over it).
inline constexpr const char* kLibraryEnv = "KGPU_DCGM_LIBRARY";
// Tried in order when neither names one: DCGM 4, then DCGM 3.
inline constexpr const char* kDefaultLibraries[] = {"libdcgm.so.4", "libdcgm.so.3"};

struct SymbolTable {
#define KGPU_DCGM_DECLARE_MEMBER(name, ret, params) fn::name name = nullptr;
  KGPU_DCGM_FUNCTIONS(KGPU_DCGM_DECLARE_MEMBER)
#undef KGPU_DCGM_DECLARE_MEMBER
  fn::errorString errorString = nullptr;
};

class Library {
 public:
  // Loads `path`; when it is empty, $KGPU_DCGM_LIBRARY, else the default names in order.
  // Errors: kNotFound naming every file tried with dlerror's text (DCGM is not installed).
  static Result<std::unique_ptr<Library>> open(const std::string& path);

  ~Library();
  Library(const Library&) = delete;
  Library& operator=(const Library&) = delete;

  // Checks that the entry points kgpu needs are there (kNotSupported naming the missing ones,
  // for `remote` or embedded use), then calls dcgmInit (kUnavailable with DCGM's status).
  Result<void> init(bool remote);

  const std::string& path() const { return so_.path(); }
  const SymbolTable& symbols() const { return sym_; }
  // Entry points of KGPU_DCGM_FUNCTIONS the library does not export.
  const std::vector<std::string>& missing() const { return missing_; }

  template <typename Fn, typename... Args>
  Return call(Fn fn, Args... args) const {
    if (fn == nullptr) return kFunctionNotFound;
    return fn(args...);
  }

  // "CONNECTION_NOT_VALID" plus DCGM's own text when the library has errorString.
  std::string error_string(Return r) const;

 private:
  explicit Library(SharedLibrary so) : so_(std::move(so)) {}
  SharedLibrary so_;  // closed after the destructor's shutdown call
  SymbolTable sym_;
  std::vector<std::string> missing_;
  bool initialized_ = false;
};

// Where DCGM runs.
struct Endpoint {
  bool embedded = true;
  std::string address;  // "host:port" or a unix socket path (remote only)
  bool unix_socket = false;
  std::string describe() const;  // "embedded DCGM", "host engine at localhost:5555", ...
};

// Parses the -r value: "" = embedded; "host:port", "host" (port 5555), "[::1]:5555", "tcp://host:port";
// "unix:///run/dcgm.sock" or an absolute path = a unix socket. kInvalidArgument names the value.
Result<Endpoint> parse_endpoint(const std::string& remote);

class Connection {
 public:
  // Starts embedded DCGM or connects to the host engine (waiting at most `timeout`). Errors name
  // the endpoint and DCGM's status: kUnavailable when the host engine cannot be reached.
  static Result<std::unique_ptr<Connection>> open(const Library& lib, const Endpoint& where,
                                                  std::chrono::milliseconds timeout);
  // Stops embedded DCGM / disconnects (the host engine then drops this connection's watches).
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  Handle handle() const { return handle_; }
  const Endpoint& endpoint() const { return where_; }

 private:
  Connection(const Library& lib, Endpoint where, Handle h) : lib_(lib), where_(std::move(where)), handle_(h) {}
  const Library& lib_;
  Endpoint where_;
  Handle handle_ = 0;
};

}  // namespace kgpu::dcgm
