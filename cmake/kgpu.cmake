# kgpu_add_test(NAME SOURCES... [LIBS ...]): one GoogleTest executable registered with CTest,
# one CTest test per test case. Tests find the fake NVML, the kgpu binary and the source tree
# through the compile definitions KGPU_FAKE_NVML, KGPU_BINARY and KGPU_SOURCE_DIR.
function(kgpu_add_test name)
  cmake_parse_arguments(T "" "" "SOURCES;LIBS" ${ARGN})
  add_executable(${name} ${T_SOURCES})
  target_link_libraries(${name} PRIVATE ${T_LIBS} GTest::gtest GTest::gmock GTest::gtest_main)
  target_compile_definitions(${name} PRIVATE
    KGPU_FAKE_NVML="$<TARGET_FILE:fake-nvml>"
    KGPU_BINARY="$<TARGET_FILE:kgpu>"
    KGPU_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
  add_dependencies(${name} fake-nvml kgpu)
  include(GoogleTest)
  gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60 PROPERTIES TIMEOUT 120)
endfunction()
