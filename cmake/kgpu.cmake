# kgpu_add_test(NAME SOURCES... [LIBS ...]): one GoogleTest executable registered with CTest.
# Tests see KGPU_FAKE_NVML (the fake library's path) and KGPU_SOURCE_DIR in their environment.
function(kgpu_add_test name)
  cmake_parse_arguments(T "" "" "SOURCES;LIBS" ${ARGN})
  add_executable(${name} ${T_SOURCES})
  target_link_libraries(${name} PRIVATE ${T_LIBS} GTest::gtest GTest::gmock GTest::gtest_main)
  add_dependencies(${name} fake-nvml)
  include(GoogleTest)
  gtest_discover_tests(${name}
    DISCOVERY_TIMEOUT 60
    PROPERTIES ENVIRONMENT
      "KGPU_FAKE_NVML=$<TARGET_FILE:fake-nvml>;KGPU_SOURCE_DIR=${PROJECT_SOURCE_DIR};KGPU_BINARY=$<TARGET_FILE:kgpu>")
endfunction()
