#include <gtest/gtest.h>
#include <stdlib.h>

#include "gpu/nvml/library.h"

namespace kgpu::nvml {
namespace {

TEST(ReturnNames, RoundTrip) {
  EXPECT_STREQ(return_name(kErrorGpuIsLost), "GPU_IS_LOST");
  EXPECT_STREQ(return_name(kErrorLibRmVersionMismatch), "LIB_RM_VERSION_MISMATCH");
  EXPECT_STREQ(return_name(12345), "UNKNOWN");
  EXPECT_EQ(return_from_name("GPU_IS_LOST"), kErrorGpuIsLost);
  EXPECT_EQ(return_from_name("NVML_ERROR_DRIVER_NOT_LOADED"), kErrorDriverNotLoaded);
  EXPECT_EQ(return_from_name("UNKNOWN"), kErrorUnknown);
  EXPECT_EQ(return_from_name("NOT_A_CODE"), -1);
}

TEST(ReturnNames, ErrorCodes) {
  EXPECT_EQ(error_code_for(kErrorNotSupported), ErrorCode::kNotSupported);
  EXPECT_EQ(error_code_for(kErrorGpuIsLost), ErrorCode::kGpuLost);
  EXPECT_EQ(error_code_for(kErrorNoPermission), ErrorCode::kPermissionDenied);
  EXPECT_EQ(error_code_for(kErrorDriverNotLoaded), ErrorCode::kUnavailable);
}

TEST(LibraryPath, FlagThenEnvironmentThenDefault) {
  unsetenv(kLibraryEnv);
  EXPECT_EQ(resolve_library_path(""), "libnvidia-ml.so.1");
  setenv(kLibraryEnv, "/opt/env/libnvidia-ml.so.1", 1);
  EXPECT_EQ(resolve_library_path(""), "/opt/env/libnvidia-ml.so.1");
  EXPECT_EQ(resolve_library_path("/flag/libnvidia-ml.so.1"), "/flag/libnvidia-ml.so.1");
  setenv(kLibraryEnv, "", 1);
  EXPECT_EQ(resolve_library_path(""), "libnvidia-ml.so.1");
  unsetenv(kLibraryEnv);
}

TEST(LibraryOpen, MissingLibraryIsAClearNotFound) {
  auto lib = Library::open("/nonexistent/libnvidia-ml.so.1");
  ASSERT_FALSE(lib);
  EXPECT_EQ(lib.error().code, ErrorCode::kNotFound);
  EXPECT_NE(lib.error().message.find("no NVIDIA driver"), std::string::npos) << lib.error().message;
  EXPECT_NE(lib.error().message.find("/nonexistent/libnvidia-ml.so.1"), std::string::npos);
}

}  // namespace
}  // namespace kgpu::nvml
