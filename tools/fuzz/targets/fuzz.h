// Shared by the fuzz targets (tools/fuzz/README.md): the libFuzzer entry point and the check that
// turns a broken property into a crash the fuzzer records.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace kgpu::fuzz {

inline std::string text(const uint8_t* data, size_t size) { return {reinterpret_cast<const char*>(data), size}; }

// A property every input must keep (a round trip, an invariant of the parser's contract): when it
// does not hold, print `what` and abort, which the driver records as a crash.
inline void check(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "kgpu-fuzz: property violated: %s\n", what);
  std::abort();
}

}  // namespace kgpu::fuzz
