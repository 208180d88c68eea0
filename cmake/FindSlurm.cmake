# FindSlurm: libslurm and the Slurm headers (slurm.h, spank.h, slurmdb.h).
#
# Result variables: Slurm_FOUND, Slurm_VERSION, Slurm_INCLUDE_DIR, Slurm_LIBRARY,
#                   Slurm_PLUGIN_DIR (where slurmd looks for plugins)
# Imported target:  Slurm::slurm
# Hints: SLURM_ROOT (prefix of a Slurm installation)
find_path(Slurm_INCLUDE_DIR slurm/slurm.h HINTS ${SLURM_ROOT} ENV SLURM_ROOT PATH_SUFFIXES include)
find_library(Slurm_LIBRARY NAMES slurm HINTS ${SLURM_ROOT} ENV SLURM_ROOT PATH_SUFFIXES lib lib64)

if(Slurm_INCLUDE_DIR AND EXISTS "${Slurm_INCLUDE_DIR}/slurm/slurm_version.h")
  file(STRINGS "${Slurm_INCLUDE_DIR}/slurm/slurm_version.h" _slurm_ver
       REGEX "^#define SLURM_VERSION_NUMBER ")
  if(_slurm_ver MATCHES "0x([0-9a-fA-F][0-9a-fA-F])([0-9a-fA-F][0-9a-fA-F])([0-9a-fA-F][0-9a-fA-F])")
    math(EXPR _maj "0x${CMAKE_MATCH_1}")
    math(EXPR _min "0x${CMAKE_MATCH_2}")
    math(EXPR _mic "0x${CMAKE_MATCH_3}")
    set(Slurm_VERSION "${_maj}.${_min}.${_mic}")
  endif()
endif()

if(NOT Slurm_PLUGIN_DIR)
  find_path(Slurm_PLUGIN_DIR NAMES select_cons_tres.so
            PATHS /usr/lib/x86_64-linux-gnu/slurm-wlm /usr/lib64/slurm /usr/lib/slurm
            NO_DEFAULT_PATH)
endif()

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(Slurm
  REQUIRED_VARS Slurm_LIBRARY Slurm_INCLUDE_DIR
  VERSION_VAR Slurm_VERSION
  FAIL_MESSAGE "Slurm development files not found: install libslurm-dev and slurm-wlm-plugins-dev (scripts/bootstrap does), or set SLURM_ROOT")

if(Slurm_FOUND AND NOT TARGET Slurm::slurm)
  add_library(Slurm::slurm UNKNOWN IMPORTED)
  set_target_properties(Slurm::slurm PROPERTIES
    IMPORTED_LOCATION "${Slurm_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${Slurm_INCLUDE_DIR}")
endif()
mark_as_advanced(Slurm_INCLUDE_DIR Slurm_LIBRARY Slurm_PLUGIN_DIR)
