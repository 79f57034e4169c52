# End-to-end tests: small driver-API programs run as child processes under LD_PRELOAD=libvgpu.so with the
# fake libcuda.so.1 / libnvidia-ml.so.1 (src/fakes) on LD_LIBRARY_PATH.
add_executable(vgpu_e2e_prog e2e/vgpu_e2e_prog.c)
target_include_directories(vgpu_e2e_prog PRIVATE ${PROJECT_SOURCE_DIR}/src ${VGPU_CUDA_INCLUDE})
target_compile_options(vgpu_e2e_prog PRIVATE ${HAMI_WARNINGS} -Wno-pedantic -std=gnu11)
add_executable(vgpu_dlopen_prog e2e/vgpu_dlopen_prog.c)
target_compile_options(vgpu_dlopen_prog PRIVATE ${HAMI_WARNINGS} -Wno-pedantic -std=gnu11)
target_link_libraries(vgpu_dlopen_prog PRIVATE dl)
# Sanitizer runtimes must not be in programs that get libvgpu preloaded.
hami_no_sanitizers(vgpu_e2e_prog vgpu_dlopen_prog)

# PROCESSORS 2: the SM-share cases run up to 26 container processes at once, each of which must get
# the CPU to keep its share of the fake device busy; beside another test on a 2-core machine a 70 %
# container got 64.9-66.5 % in two clean-clone runs (passing alone and beside one other VgpuE2e).
hami_test(NAME vgpu_e2e_test SRCS vgpu_e2e_test.cc DEPS vgpu_core LABELS integration PROCESSORS 2)
target_compile_definitions(vgpu_e2e_test PRIVATE
  VGPU_LIB="$<TARGET_FILE:vgpu>"
  VGPU_PROG="$<TARGET_FILE:vgpu_e2e_prog>"
  VGPU_DLOPEN_PROG="$<TARGET_FILE:vgpu_dlopen_prog>"
  VGPU_FAKES_DIR="${CMAKE_BINARY_DIR}/src/fakes")
add_dependencies(vgpu_e2e_test vgpu vgpu_e2e_prog vgpu_dlopen_prog)

# The fakes are another module (configured after this one): link them once all targets exist.
function(vgpu_link_fakes)
  if(TARGET fakecuda AND TARGET fakenvml)
    target_link_libraries(vgpu_e2e_prog PRIVATE fakecuda fakenvml)
    add_dependencies(vgpu_e2e_test fakecuda fakenvml fakegpu_time)
  else()
    message(WARNING "fake libcuda/libnvidia-ml targets missing: libvgpu end-to-end tests are skipped")
    set_target_properties(vgpu_e2e_prog PROPERTIES EXCLUDE_FROM_ALL ON)
  endif()
endfunction()
cmake_language(DEFER DIRECTORY ${PROJECT_SOURCE_DIR} CALL vgpu_link_fakes)
