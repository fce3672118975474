# FindNCCL: locates nccl.h and libnccl, defines NCCL::nccl and NCCL_VERSION.
# Debian and the CUDA toolkit both ship NCCL; look next to the toolkit first.
include(FindPackageHandleStandardArgs)

set(_nccl_hints "")
if(CUDAToolkit_INCLUDE_DIRS)
  list(APPEND _nccl_hints ${CUDAToolkit_INCLUDE_DIRS})
endif()
find_path(NCCL_INCLUDE_DIR nccl.h
  HINTS ${NCCL_ROOT} ENV NCCL_ROOT ${_nccl_hints}
  PATH_SUFFIXES include)
find_library(NCCL_LIBRARY NAMES nccl
  HINTS ${NCCL_ROOT} ENV NCCL_ROOT ${CUDAToolkit_LIBRARY_DIR}
  PATH_SUFFIXES lib lib64)

if(NCCL_INCLUDE_DIR AND EXISTS "${NCCL_INCLUDE_DIR}/nccl.h")
  file(STRINGS "${NCCL_INCLUDE_DIR}/nccl.h" _nccl_lines REGEX "^#define NCCL_(MAJOR|MINOR|PATCH) ")
  foreach(_part MAJOR MINOR PATCH)
    string(REGEX REPLACE ".*#define NCCL_${_part} ([0-9]+).*" "\\1" _v "${_nccl_lines}")
    string(REGEX MATCH "#define NCCL_${_part} ([0-9]+)" _m "${_nccl_lines}")
    set(NCCL_${_part} "${CMAKE_MATCH_1}")
  endforeach()
  set(NCCL_VERSION "${NCCL_MAJOR}.${NCCL_MINOR}.${NCCL_PATCH}")
endif()

find_package_handle_standard_args(NCCL
  REQUIRED_VARS NCCL_LIBRARY NCCL_INCLUDE_DIR
  VERSION_VAR NCCL_VERSION)

if(NCCL_FOUND AND NOT TARGET NCCL::nccl)
  add_library(NCCL::nccl UNKNOWN IMPORTED)
  set_target_properties(NCCL::nccl PROPERTIES
    IMPORTED_LOCATION "${NCCL_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${NCCL_INCLUDE_DIR}")
endif()
mark_as_advanced(NCCL_INCLUDE_DIR NCCL_LIBRARY)
