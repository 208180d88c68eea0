# Build options and compiler flags shared by every component, declared in one place.
option(ELASTIC_WARNINGS_AS_ERRORS "Treat compiler warnings as errors" OFF)
option(ELASTIC_BUILD_TESTS "Build the test suite" ON)
option(ELASTIC_BUILD_BENCHMARKS "Build benchmarks (label bench)" ON)
set(ELASTIC_SANITIZE "" CACHE STRING "Sanitizers to build with, e.g. address,undefined")

# Where ctest's slurm-labelled tests run their private cluster; it must be readable by the
# job user, so it is outside any private home directory.
set(ELASTIC_TEST_CLUSTER_DIR "/tmp/elastic-ctest-cluster" CACHE PATH
    "State directory of the local Slurm cluster used by slurm-labelled tests")
# Its ports: from ELASTIC_TEST_PORT_BASE in the configuring environment when that is a number (the
# fresh-machine check sets it, so that the tests inside its root keep clear of the host's), else 26800.
if("$ENV{ELASTIC_TEST_PORT_BASE}" MATCHES "^[0-9]+$")
  set(_elastic_port_base "$ENV{ELASTIC_TEST_PORT_BASE}")
else()
  if(NOT "$ENV{ELASTIC_TEST_PORT_BASE}" STREQUAL "")
    message(WARNING "ELASTIC_TEST_PORT_BASE='$ENV{ELASTIC_TEST_PORT_BASE}' in the environment is not a port number: the slurm tests use 26800")
  endif()
  set(_elastic_port_base "26800")
endif()
set(ELASTIC_TEST_PORT_BASE "${_elastic_port_base}" CACHE STRING
    "First TCP port of the test cluster's daemons (see scripts/cluster --help)")
set(ELASTIC_JOB_USER "elastic" CACHE STRING "Unprivileged user that test jobs run as")

add_library(elastic_warnings INTERFACE)
target_compile_options(elastic_warnings INTERFACE
  -Wall -Wextra -Wpedantic -Wshadow
  $<$<COMPILE_LANGUAGE:CXX>:-Wconversion -Wno-sign-conversion -Wnon-virtual-dtor -Wold-style-cast
                            -Wcast-align -Woverloaded-virtual>
  $<$<BOOL:${ELASTIC_WARNINGS_AS_ERRORS}>:-Werror>)

# Hardening for everything that runs as root or next to Slurm's daemons.
add_library(elastic_hardening INTERFACE)
target_compile_options(elastic_hardening INTERFACE
  -fstack-protector-strong -fstack-clash-protection -fcf-protection
  $<$<NOT:$<CONFIG:Debug>>:-D_FORTIFY_SOURCE=2>)
target_link_options(elastic_hardening INTERFACE -Wl,-z,relro -Wl,-z,now -Wl,-z,noexecstack)

if(ELASTIC_SANITIZE)
  add_compile_options(-fsanitize=${ELASTIC_SANITIZE} -fno-omit-frame-pointer)
  add_link_options(-fsanitize=${ELASTIC_SANITIZE})
endif()

# C sources take the same warnings target (its C++-only flags apply to C++ only); the name is
# kept for targets that say which language they mean.
add_library(elastic_c_warnings ALIAS elastic_warnings)
