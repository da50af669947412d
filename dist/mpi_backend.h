// Internal to dist/: the MPI backend (dist/mpi_communicator.cpp), compiled with MPI where CMake
// found it and as a clear error elsewhere.
#pragma once
#include <memory>

#include "dist/communicator.h"

namespace remat::dist::detail {

// Initialises MPI (once per process; finalised at exit) and returns its world.
std::unique_ptr<Communicator> make_mpi_communicator();
bool mpi_available();

}  // namespace remat::dist::detail
