# Installation of what is not a target (manual pages, site configuration examples, the systemd
# unit, job script examples) and the Debian package (CPack, DEB generator).
#
#   cmake --install build                     # prefix /usr/local unless configured otherwise
#   DESTDIR=/tmp/stage cmake --install build  # staged
#   (cd build && cpack -G DEB)                # build/elastic-slurm_<version>+deb<N>_amd64.deb
#
# Where files go (prefix P, default /usr/local; the .deb uses /usr):
#   ELASTIC_SLURM_PLUGIN_DIR/elastic.so       the SPANK plugin, in Slurm's own plugin directory
#                                             (absolute; /usr/lib/x86_64-linux-gnu/slurm-wlm on Debian)
#   P/sbin/elasticd                           the controller
#   P/bin/elasticctl, elastic-launch, elastic-report, elastic-optimize, elastic-sim,
#         elastic-train-logreg                 the tools and the example trainer
#   P/lib/libelastic_mpi.so, P/include/...     the runtime library and its headers
#   P/lib/python/elastic_mpi/                  the Python package (PYTHONPATH=P/lib/python), when
#                                             pybind11 and Python's headers were found
#   P/lib/systemd/system/elasticd.service      the unit (paths adjusted to P)
#   P/share/man/man1, man8                     manual pages (docs/man)
#   P/share/doc/elastic-slurm/examples/        site-config/ (elasticd.conf, plugstack.conf.d,
#                                             slurm.conf.d, systemd) and jobscripts/
include_guard(GLOBAL)

# The plugin goes where slurmd, slurmstepd, sbatch and srun look for plugins (FindSlurm finds it by
# select_cons_tres.so); an absolute path, so it is the same whatever the prefix.
if(Slurm_PLUGIN_DIR)
  set(_elastic_plugin_default "${Slurm_PLUGIN_DIR}")
else()
  set(_elastic_plugin_default "${CMAKE_INSTALL_LIBDIR}/slurm")
endif()
set(ELASTIC_SLURM_PLUGIN_DIR "${_elastic_plugin_default}" CACHE PATH
    "Where `cmake --install` puts the SPANK plugin elastic.so (Slurm's plugin directory)")

set(ELASTIC_DOC_EXAMPLES_DIR "${CMAKE_INSTALL_DATADIR}/doc/${PROJECT_NAME}/examples")
set(ELASTIC_SYSTEMD_UNIT_DIR "lib/systemd/system" CACHE STRING
    "Where the systemd unit is installed, relative to the prefix")

# Manual pages: every docs/man/NAME.SECTION.
file(GLOB _elastic_man_pages CONFIGURE_DEPENDS "${PROJECT_SOURCE_DIR}/docs/man/*.[1-8]")
foreach(_page IN LISTS _elastic_man_pages)
  string(REGEX MATCH "[1-8]$" _section "${_page}")
  install(FILES "${_page}" DESTINATION "${CMAKE_INSTALL_MANDIR}/man${_section}")
endforeach()

# The systemd unit names /usr/sbin/elasticd: point it at the sbin of the prefix used at install
# time (cpack installs with prefix /usr whatever the configured prefix).
set(_unit_src "${PROJECT_SOURCE_DIR}/site-config/systemd/elasticd.service")
if(EXISTS "${_unit_src}")
  install(CODE "
    file(READ \"${_unit_src}\" _unit)
    string(REPLACE \"/usr/sbin/elasticd\" \"\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_SBINDIR}/elasticd\" _unit \"\${_unit}\")
    set(_dest \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${ELASTIC_SYSTEMD_UNIT_DIR}\")
    message(STATUS \"Installing: \${_dest}/elasticd.service\")
    file(MAKE_DIRECTORY \"\${_dest}\")
    file(WRITE \"\${_dest}/elasticd.service\" \"\${_unit}\")
  ")
endif()

# Site configuration and job scripts, as examples (the admin guide says where each goes).
install(DIRECTORY "${PROJECT_SOURCE_DIR}/site-config/" DESTINATION "${ELASTIC_DOC_EXAMPLES_DIR}/site-config")
install(DIRECTORY "${PROJECT_SOURCE_DIR}/jobscripts/" DESTINATION "${ELASTIC_DOC_EXAMPLES_DIR}/jobscripts"
        USE_SOURCE_PERMISSIONS)
install(FILES "${PROJECT_SOURCE_DIR}/README.md" DESTINATION "${CMAKE_INSTALL_DATADIR}/doc/${PROJECT_NAME}")
file(GLOB _elastic_docs CONFIGURE_DEPENDS "${PROJECT_SOURCE_DIR}/docs/*.md")
install(FILES ${_elastic_docs} DESTINATION "${CMAKE_INSTALL_DATADIR}/doc/${PROJECT_NAME}")

# ---------------------------------------------------------------- CPack: a Debian package
set(CPACK_PACKAGE_NAME "elastic-slurm")
set(CPACK_PACKAGE_VENDOR "elastic-slurm")
set(CPACK_PACKAGE_CONTACT "elastic-slurm maintainers <root@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "${PROJECT_DESCRIPTION}")
set(CPACK_PACKAGE_DESCRIPTION
    "A SPANK plugin (elastic sbatch flags), elasticd (the controller that grows and shrinks running\n GPU jobs through extension jobs), the elastic_mpi runtime and elastic-launch, elastic-report,\n elastic-optimize and elastic-sim.")
set(CPACK_PACKAGE_VERSION "${PROJECT_VERSION}")
set(CPACK_GENERATOR "DEB" CACHE STRING "CPack generators")
set(CPACK_PACKAGING_INSTALL_PREFIX "/usr")
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION "admin")
set(CPACK_DEBIAN_PACKAGE_PRIORITY "optional")
set(CPACK_DEBIAN_COMPRESSION_TYPE "gzip")
set(CPACK_DEBIAN_PACKAGE_HOMEPAGE "https://slurm.schedmd.com/spank.html")
# One package per Debian release, built on that release: its version says which
# (0.1.0+deb12, 0.1.0+deb13), and it depends on the Slurm release series it was built against (a
# SPANK plugin carries the plugin_version of the headers it was compiled with, and slurmd loads
# it only with the same major.minor release), e.g. 22.05.8 <= slurm < 22.06 on Debian 12. The
# shared libraries the binaries link (libslurm38 or libslurm42, libopenmpi3 or libopenmpi40, Boost,
# hwloc, ...) are found by dpkg-shlibdeps on the staged files, so each release gets its own names.
set(_elastic_deb_release "")
if(EXISTS /etc/os-release)
  file(STRINGS /etc/os-release _os_id REGEX "^ID=")
  file(STRINGS /etc/os-release _os_version REGEX "^VERSION_ID=")
  string(REGEX REPLACE "^VERSION_ID=\"?([0-9]+).*" "\\1" _os_version "${_os_version}")
  if(_os_id STREQUAL "ID=debian" AND _os_version MATCHES "^[0-9]+$")
    set(_elastic_deb_release "+deb${_os_version}")
  endif()
endif()
set(CPACK_DEBIAN_PACKAGE_VERSION "${PROJECT_VERSION}${_elastic_deb_release}")
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS "${CMAKE_BINARY_DIR}/lib")
set(_elastic_slurm_dep "slurm-wlm-basic-plugins, slurm-client")
if(Slurm_VERSION MATCHES "^([0-9]+)\\.([0-9]+)\\.([0-9]+)")
  # Slurm writes its releases YY.MM.micro (22.05.8); FindSlurm's version has 22.5.8.
  set(_major "${CMAKE_MATCH_1}")
  set(_micro "${CMAKE_MATCH_3}")
  math(EXPR _next "${CMAKE_MATCH_2} + 1")
  set(_minor "${CMAKE_MATCH_2}")
  foreach(_v _minor _next)
    if(${_v} LESS 10)
      set(${_v} "0${${_v}}")
    endif()
  endforeach()
  set(_from "${_major}.${_minor}.${_micro}")
  set(_below "${_major}.${_next}")
  set(_elastic_slurm_dep "slurm-wlm-basic-plugins (>= ${_from}), slurm-wlm-basic-plugins (<< ${_below}), slurm-client (>= ${_from}), slurm-client (<< ${_below})")
endif()
# What dpkg-shlibdeps cannot see: Slurm's programs and plugins, munge's daemon, mpirun.
set(CPACK_DEBIAN_PACKAGE_DEPENDS "${_elastic_slurm_dep}, munge, openmpi-bin")
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "slurmctld, slurmd, slurmdbd")
set(CPACK_SOURCE_IGNORE_FILES "/build[^/]*/;/\\\\.git/")
include(CPack)
