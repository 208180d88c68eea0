# FindMunge: libmunge, used to sign and verify the messages between the plugin, the runtime
# and elasticd.
# Result variables: Munge_FOUND, Munge_INCLUDE_DIR, Munge_LIBRARY. Imported target: Munge::munge
find_path(Munge_INCLUDE_DIR munge.h)
find_library(Munge_LIBRARY NAMES munge)
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(Munge
  REQUIRED_VARS Munge_LIBRARY Munge_INCLUDE_DIR
  FAIL_MESSAGE "munge development files not found: install libmunge-dev (scripts/bootstrap does)")
if(Munge_FOUND AND NOT TARGET Munge::munge)
  add_library(Munge::munge UNKNOWN IMPORTED)
  set_target_properties(Munge::munge PROPERTIES
    IMPORTED_LOCATION "${Munge_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${Munge_INCLUDE_DIR}")
endif()
mark_as_advanced(Munge_INCLUDE_DIR Munge_LIBRARY)
