# The git revision `hami --version` and hami_build_info name, taken at every build rather than at
# configure time: a build after a commit names that commit without a new `cmake` run (a configure-time
# `git rev-parse` kept naming the commit the build directory was configured at).
#
# HAMI_REVISION set (the image build passes it: its context has no .git) wins; otherwise
# `git rev-parse --short=12 HEAD` of the source tree when it is a git checkout; otherwise "unknown".
set(HAMI_REVISION "" CACHE STRING
    "git revision hami --version names (empty: git rev-parse of the source tree at each build)")

# hami_revision_header(<target>): <target> may include "hami_revision.h" (#define HAMI_REVISION "<rev>").
# The header is rewritten only when the revision changes, so an unchanged tree recompiles nothing.
function(hami_revision_header target)
  set(_dir ${CMAKE_BINARY_DIR}/generated)
  if(NOT TARGET hami_revision)
    add_custom_target(hami_revision
      COMMAND ${CMAKE_COMMAND} -DSOURCE_DIR=${PROJECT_SOURCE_DIR} -DOUT=${_dir}/hami_revision.h
              -DREVISION=${HAMI_REVISION} -P ${PROJECT_SOURCE_DIR}/cmake/revision_header.cmake
      BYPRODUCTS ${_dir}/hami_revision.h
      COMMENT "" VERBATIM)
  endif()
  add_dependencies(${target} hami_revision)
  # tools/check_tidy.sh builds only the generated headers before it parses the sources.
  if(TARGET hami_generated_sources)
    add_dependencies(hami_generated_sources hami_revision)
  endif()
  target_include_directories(${target} PRIVATE ${_dir})
endfunction()
