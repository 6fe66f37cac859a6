// Entry points for initialization, shutdown, error strings and system versions.
#include <set>
#include <string>

#include "fake_nvml.h"

using namespace kgpu::fake_nvml;

// ---- init / system ----

FAKE_API Return nvmlInitWithFlags(unsigned int) {
  Fake& f = fake();
  std::lock_guard lock(f.mu);
  if (f.init_count == 0) f.reset();  // a fresh initialization reads $KGPU_FAKE_NVML_CONFIG again
  if (!f.refresh()) return kErrorUnknown;
  if (f.node.init_error) return *f.node.init_error;
  ++f.init_count;
  return kSuccess;
}

FAKE_API Return nvmlInit_v2(void) { return nvmlInitWithFlags(0); }

FAKE_API Return nvmlShutdown(void) {
  Fake& f = fake();
  std::lock_guard lock(f.mu);
  if (f.init_count == 0) return kErrorUninitialized;
  --f.init_count;
  return kSuccess;
}

// The returned text stays valid for the process's life, like NVML's static strings: each distinct
// text is kept once (a bounded set: the error names and the load errors seen). No thread_local: a
// library with TLS must not be dlclose'd under LeakSanitizer, and the loader may close us.
FAKE_API const char* nvmlErrorString(Return r) {
  static std::set<std::string> texts;  // guarded by fake().mu
  Fake& f = fake();
  std::lock_guard lock(f.mu);
  return texts.insert((r == kErrorUnknown && !f.last_error.empty()) ? f.last_error : error_text(r)).first->c_str();
}

FAKE_API Return nvmlSystemGetDriverVersion(char* version, unsigned int length) {
  Call c("nvmlSystemGetDriverVersion");
  if (c.rc == kSuccess) copy_string(fake().node.driver_version, version, length, c.rc);
  return c.rc;
}

FAKE_API Return nvmlSystemGetNVMLVersion(char* version, unsigned int length) {
  Call c("nvmlSystemGetNVMLVersion");
  if (c.rc == kSuccess) copy_string(fake().node.nvml_version, version, length, c.rc);
  return c.rc;
}

FAKE_API Return nvmlSystemGetCudaDriverVersion_v2(int* v) {
  Call c("nvmlSystemGetCudaDriverVersion_v2");
  if (c.rc != kSuccess) return c.rc;
  if (v == nullptr) return kErrorInvalidArgument;
  *v = fake().node.cuda_driver_version;
  return kSuccess;
}
