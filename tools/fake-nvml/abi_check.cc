// Checks that the exported entry points match abi.h: each with exactly its declared type, and
// each defined (the table below references every one, so a missing one fails the link).
#include <type_traits>

#include "fake_nvml.h"

using namespace kgpu::fake_nvml;

// Every function of the ABI table is defined in this library with exactly its declared type.
#define KGPU_FAKE_CHECK(name, params) \
  static_assert(std::is_same_v<decltype(&::name), kgpu::nvml::fn::name>, #name " does not match abi.h");
KGPU_NVML_FUNCTIONS(KGPU_FAKE_CHECK)
#undef KGPU_FAKE_CHECK
static_assert(std::is_same_v<decltype(&::nvmlErrorString), kgpu::nvml::fn::nvmlErrorString>);

namespace {
#define KGPU_FAKE_REFERENCE(name, params) reinterpret_cast<const void*>(&::name),
[[maybe_unused]] __attribute__((used)) const void* const kEveryEntryPoint[] = {
    KGPU_NVML_FUNCTIONS(KGPU_FAKE_REFERENCE) reinterpret_cast<const void*>(&::nvmlErrorString)};
#undef KGPU_FAKE_REFERENCE
}  // namespace
