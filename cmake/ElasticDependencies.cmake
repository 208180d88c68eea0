# Third-party dependencies, all from Debian packages (scripts/bootstrap installs them).
# Each find fails with a message that names the package to install.
find_package(Threads REQUIRED)
find_package(nlohmann_json 3.10 REQUIRED)
find_package(Boost 1.74 REQUIRED COMPONENTS program_options)
find_package(SQLite3 REQUIRED)
find_package(Slurm 22.05 REQUIRED)
find_package(Munge REQUIRED)

find_package(MPI COMPONENTS C CXX)
if(NOT MPI_FOUND)
  message(FATAL_ERROR "MPI not found: install openmpi-bin and libopenmpi-dev (scripts/bootstrap does)")
endif()

if(ELASTIC_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
if(ELASTIC_BUILD_BENCHMARKS)
  find_package(benchmark QUIET)
  if(NOT benchmark_FOUND)
    message(STATUS "Google Benchmark not found (libbenchmark-dev): benchmarks are not built")
    set(ELASTIC_BUILD_BENCHMARKS OFF)
  endif()
endif()
