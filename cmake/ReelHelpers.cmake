# reel_add_library(NAME SOURCES ... DEPS ...): one static library per part, headers included as
# "part/header.h" from src/.
function(reel_add_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS;PRIVATE_DEPS" ${ARGN})
  add_library(${name} STATIC ${ARG_SOURCES})
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(${name} PUBLIC ${ARG_DEPS} PRIVATE ${ARG_PRIVATE_DEPS})
endfunction()

# reel_add_test(NAME SOURCES ... DEPS ... [LABELS ...] [FIXTURES ...] [TIMEOUT s] [ENV ...]
#               [TORCH_PCH]):
# one GoogleTest binary, registered with ctest as one test, linked with the testing/ helpers.
# LABELS defaults to "unit" (no servers, quick); "integration" needs a server (Ceph, Slurm),
# "slow" takes minutes. FIXTURES names ctest fixtures the test needs (for example the Ceph
# cluster that ceph_start starts and ceph_stop stops).
function(reel_add_test name)
  if(NOT REEL_BUILD_TESTS)
    return()
  endif()
  cmake_parse_arguments(ARG "TORCH_PCH" "TIMEOUT" "SOURCES;DEPS;LABELS;FIXTURES;ENV" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  if(ARG_TORCH_PCH)  # reuse reel_models_torch's precompiled torch/torch.h
    target_precompile_headers(${name} REUSE_FROM reel_models_torch)
  endif()
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} reel_testing GTest::gtest GTest::gtest_main)
  add_test(NAME ${name} COMMAND ${name} --gtest_color=no)
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 300)
  endif()
  set_tests_properties(${name} PROPERTIES TIMEOUT ${ARG_TIMEOUT}
    ENVIRONMENT "REEL_SOURCE_DIR=${PROJECT_SOURCE_DIR};REEL_BINARY_DIR=${PROJECT_BINARY_DIR};${ARG_ENV}")
  if(NOT ARG_LABELS)
    set(ARG_LABELS unit)
  endif()
  set_tests_properties(${name} PROPERTIES LABELS "${ARG_LABELS}")
  if(ARG_FIXTURES)
    set_tests_properties(${name} PROPERTIES FIXTURES_REQUIRED "${ARG_FIXTURES}")
  endif()
  # storage_s3_test stops and restarts radosgw (its retry tests): under ctest -j the other tests
  # on the gateway would meet it down, so the tests on the Ceph cluster take turns.
  if("ceph" IN_LIST ARG_FIXTURES)
    set_tests_properties(${name} PROPERTIES RESOURCE_LOCK ceph_rgw)
  endif()
endfunction()
