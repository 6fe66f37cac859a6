# kgpu_add_test(NAME AREA area... SOURCES... [LIBS ...]): one GoogleTest executable registered with
# CTest, one CTest test per test case, labelled with its areas (`ctest -L scheduler` runs one area).
# Tests find the fake NVML, the kgpu binary and the source tree through test/integration/paths.h
# (kgpu_test_support), never through compile definitions, so their objects do not depend on where
# the checkout is.
function(kgpu_add_test name)
  cmake_parse_arguments(T "" "" "AREA;SOURCES;LIBS" ${ARGN})
  if(NOT T_AREA)
    message(FATAL_ERROR "kgpu_add_test(${name}): AREA is required (the ctest label of the test's area)")
  endif()
  add_executable(${name} ${T_SOURCES})
  target_link_libraries(${name} PRIVATE ${T_LIBS} kgpu_test_support GTest::gtest GTest::gmock GTest::gtest_main)
  add_dependencies(${name} fake-nvml kgpu)
  include(GoogleTest)
  gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60 PROPERTIES TIMEOUT 120)
  # The area labels: gtest_discover_tests() splits a list value of PROPERTIES, so they are set by a
  # CTest include file of our own, read after the discovered tests (listed in ${name}_TESTS).
  set(labels_file ${CMAKE_CURRENT_BINARY_DIR}/${name}_labels.cmake)
  file(WRITE ${labels_file} "if(${name}_TESTS)\n  set_tests_properties(\${${name}_TESTS} PROPERTIES LABELS \"${T_AREA}\")\nendif()\n")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES ${labels_file})
endfunction()

# kgpu_embed_text(OUT_VAR SYMBOL FILE): generates a C++ unit defining `const char* const SYMBOL` (in
# the namespace of SYMBOL's qualification) with FILE's text, so a shipped default file and the
# binary's built-in copy cannot drift. OUT_VAR receives the generated file's path.
function(kgpu_embed_text out_var symbol file)
  string(REPLACE "::" ";" parts "${symbol}")
  list(POP_BACK parts name)
  string(REPLACE ";" "::" ns "${parts}")
  string(MAKE_C_IDENTIFIER "${symbol}" id)
  set(gen ${CMAKE_CURRENT_BINARY_DIR}/embedded/${id}.cc)
  file(READ ${file} text)
  string(FIND "${text}" ")kgpu\"" clash)
  if(NOT clash EQUAL -1)
    message(FATAL_ERROR "${file} contains the raw string's end marker")
  endif()
  file(CONFIGURE OUTPUT ${gen} CONTENT "namespace ${ns} {\nextern const char* const ${name};\nconst char* const ${name} = R\"kgpu(${text})kgpu\";\n}  // namespace ${ns}\n" @ONLY)
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${file})
  set(${out_var} ${gen} PARENT_SCOPE)
endfunction()
