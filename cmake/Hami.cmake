# Helpers shared by every module. Each module is one library whose link list mirrors the layering table.
include(GoogleTest)

# -Wno-restrict: GCC 12 reports false positives in std::string at -O3 (GCC bug 105329).
set(HAMI_WARNINGS -Wall -Wextra -Wpedantic -Wno-unused-parameter -Wno-restrict)
if(HAMI_WERROR)
  list(APPEND HAMI_WARNINGS -Werror)
endif()

if(HAMI_SANITIZE)
  string(REPLACE ";" "," _san "${HAMI_SANITIZE}")
  add_compile_options(-fsanitize=${_san} -fno-omit-frame-pointer -fno-sanitize-recover=all)
  add_link_options(-fsanitize=${_san})
endif()

# hami_library(NAME <target> SRCS ... DEPS ...): a static library of one module; include root is src/.
function(hami_library)
  cmake_parse_arguments(A "" "NAME" "SRCS;DEPS" ${ARGN})
  add_library(${A_NAME} STATIC ${A_SRCS})
  target_include_directories(${A_NAME} PUBLIC ${PROJECT_SOURCE_DIR}/src)
  target_compile_options(${A_NAME} PRIVATE ${HAMI_WARNINGS})
  target_link_libraries(${A_NAME} PUBLIC ${A_DEPS})
endfunction()

# hami_unit_target(<target>...): targets that tests labelled "unit" run. The `unit_tests` target builds
# exactly these (and what they depend on), so the sanitizer half of scripts/test compiles only what
# `ctest -L unit` runs. hami_test adds its unit binaries; add_test-based unit tests name theirs.
function(hami_unit_target)
  set_property(GLOBAL APPEND PROPERTY HAMI_UNIT_TARGETS ${ARGN})
endfunction()

# HAMI_TEST_OPT_FLAGS: extra flags for the sources of the test binaries only (hami_test), after the
# build type's, so "-O0" compiles the test code without optimization while the code under test keeps
# the build's -O2. scripts/test sets it on CI, where compile time is most of the run (docs/benchmarks.md,
# "Test time (CI)"); empty (the default) changes nothing.
set(HAMI_TEST_OPT_FLAGS "" CACHE STRING "Extra compile flags for test sources (e.g. -O0 on CI)")
separate_arguments(_hami_test_opt_flags UNIX_COMMAND "${HAMI_TEST_OPT_FLAGS}")

# hami_test(NAME <exe> SRCS ... DEPS ... [LABELS ...] [TIMEOUT s] [PROCESSORS n]): a GoogleTest
# binary, one ctest entry per test; PROCESSORS: cores each of its tests needs (ctest -j counts them).
# Labels: "unit" (fast, hermetic; also run under ASan+UBSan in CI), "integration", "fuzz".
function(hami_test)
  cmake_parse_arguments(A "" "NAME;TIMEOUT;PROCESSORS" "SRCS;DEPS;LABELS" ${ARGN})
  if(NOT A_LABELS)
    set(A_LABELS unit)
  endif()
  if(NOT A_TIMEOUT)
    set(A_TIMEOUT 300)
  endif()
  if(NOT A_PROCESSORS)
    set(A_PROCESSORS 1)
  endif()
  add_executable(${A_NAME} ${A_SRCS})
  target_compile_options(${A_NAME} PRIVATE ${HAMI_WARNINGS} ${_hami_test_opt_flags})
  target_link_libraries(${A_NAME} PRIVATE ${A_DEPS} GTest::gtest GTest::gmock GTest::gtest_main)
  if("unit" IN_LIST A_LABELS)
    hami_unit_target(${A_NAME})
  endif()
  gtest_discover_tests(${A_NAME} DISCOVERY_MODE PRE_TEST
    PROPERTIES LABELS "${A_LABELS}" TIMEOUT ${A_TIMEOUT} PROCESSORS ${A_PROCESSORS}
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
endfunction()

# hami_fuzz(NAME <exe> SRCS ... DEPS ... [CORPUS dir]): a fuzz target exposing LLVMFuzzerTestOneInput.
# With clang (-DHAMI_LIBFUZZER=ON) it links libFuzzer; with g++ it links our replay+mutation driver.
# CI runs every target for a bounded number of iterations (label "fuzz").
option(HAMI_LIBFUZZER "Build fuzz targets with libFuzzer (needs clang)" OFF)
# Each target's RUNS is multiplied by this: 5 x 20,000 costs about 1 min of CPU for all targets
# (docs/security.md "Fuzzing beyond the ctest budget": 20,000 runs missed three defects).
set(HAMI_FUZZ_RUNS_SCALE 5 CACHE STRING "Multiplier of every fuzz ctest's mutated-input count")
function(hami_fuzz)
  cmake_parse_arguments(A "" "NAME;CORPUS;RUNS" "SRCS;DEPS" ${ARGN})
  if(NOT A_RUNS)
    set(A_RUNS 20000)
  endif()
  math(EXPR A_RUNS "${A_RUNS} * ${HAMI_FUZZ_RUNS_SCALE}")
  add_executable(${A_NAME} ${A_SRCS})
  target_compile_options(${A_NAME} PRIVATE ${HAMI_WARNINGS})
  target_link_libraries(${A_NAME} PRIVATE ${A_DEPS})
  if(HAMI_LIBFUZZER)
    target_compile_options(${A_NAME} PRIVATE -fsanitize=fuzzer)
    target_link_options(${A_NAME} PRIVATE -fsanitize=fuzzer)
    set(_args -runs=${A_RUNS})
  else()
    target_link_libraries(${A_NAME} PRIVATE hami_fuzz_driver)
    set(_args --runs=${A_RUNS})
  endif()
  # A failing input is saved in the build tree (crash-<n>), not in the source tree the test runs in.
  list(APPEND _args -artifact_prefix=${CMAKE_CURRENT_BINARY_DIR}/)
  if(A_CORPUS)
    list(APPEND _args ${A_CORPUS})
  endif()
  add_test(NAME ${A_NAME} COMMAND ${A_NAME} ${_args} WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(${A_NAME} PROPERTIES LABELS "fuzz" TIMEOUT 300)
endfunction()

# hami_no_sanitizers(<target>...): drop -fsanitize=* from targets that must load into uninstrumented
# programs (the fake GPU libraries, programs run under LD_PRELOAD=libvgpu.so).
function(hami_no_sanitizers)
  foreach(t IN LISTS ARGN)
    foreach(prop COMPILE_OPTIONS LINK_OPTIONS)
      get_target_property(_opts ${t} ${prop})
      if(_opts)
        list(FILTER _opts EXCLUDE REGEX "^-fsanitize=")
        set_target_properties(${t} PROPERTIES ${prop} "${_opts}")
      endif()
    endforeach()
  endforeach()
endfunction()

# hami_grpc_protos(NAME <lib> MODULE <dir under src> PROTOS <name>...): protoc + grpc_cpp_plugin on
# src/<dir>/proto/<name>.proto into one static library; generated headers are included as
# "<dir>/proto/<name>.pb.h". Finds gRPC, protobuf, protoc and grpc_cpp_plugin itself.
function(hami_grpc_protos)
  cmake_parse_arguments(A "" "NAME;MODULE" "PROTOS" ${ARGN})
  find_package(gRPC CONFIG REQUIRED)
  find_package(Protobuf REQUIRED)
  find_program(HAMI_PROTOC protoc REQUIRED)
  find_program(HAMI_GRPC_CPP_PLUGIN grpc_cpp_plugin REQUIRED)
  set(_gen ${CMAKE_CURRENT_BINARY_DIR}/gen)
  set(_srcs)
  set(_deps)
  foreach(_name IN LISTS A_PROTOS)
    list(APPEND _deps ${PROJECT_SOURCE_DIR}/src/${A_MODULE}/proto/${_name}.proto)
  endforeach()
  foreach(_name IN LISTS A_PROTOS)
    set(_stem ${_gen}/${A_MODULE}/proto/${_name})
    set(_out ${_stem}.pb.cc ${_stem}.pb.h ${_stem}.grpc.pb.cc ${_stem}.grpc.pb.h)
    add_custom_command(
      OUTPUT ${_out}
      COMMAND ${CMAKE_COMMAND} -E make_directory ${_gen}
      COMMAND ${HAMI_PROTOC} --proto_path=${PROJECT_SOURCE_DIR}/src --cpp_out=${_gen}
              --grpc_out=${_gen} --plugin=protoc-gen-grpc=${HAMI_GRPC_CPP_PLUGIN}
              ${PROJECT_SOURCE_DIR}/src/${A_MODULE}/proto/${_name}.proto
      DEPENDS ${_deps}
      COMMENT "protoc: ${A_MODULE}/proto/${_name}.proto")
    list(APPEND _srcs ${_out})
  endforeach()
  add_library(${A_NAME} STATIC ${_srcs})
  # The generated files alone (no compilation), for the tools that parse our sources.
  add_custom_target(${A_NAME}_sources DEPENDS ${_srcs})
  # Generated code: no -Werror; the generated tree is a system include root.
  target_include_directories(${A_NAME} SYSTEM PUBLIC ${_gen})
  target_link_libraries(${A_NAME} PUBLIC gRPC::grpc++ protobuf::libprotobuf)
endfunction()
