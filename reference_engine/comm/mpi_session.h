// The MPI library's lifetime in a rank process, kept out of the communicator so that the
// worker can end it without knowing whether this build has MPI (TPB_HAVE_MPI is private to
// the engine library). MPI starts on the first mpi communicator (mpi/mpi_communicator.h)
// and must end before the process exits, or the launcher reports the rank as failed.
#pragma once

#include <string>

namespace tpb {

// Whether an MPI launcher (mpirun, srun, hydra) started this process: its environment has
// OMPI_COMM_WORLD_SIZE, PMIX_RANK or PMI_SIZE. MPI_Init in a process that none started
// makes a world of one, never the group the scenario asked for.
bool launched_by_mpi();
// MPI_Init_thread (serialized) unless MPI is already up. Only with MPI compiled in.
void start_mpi();
// Whether this build has the mpi backend, and its library ("Open MPI v4.1.4, ..."; the first
// line of MPI_Get_library_version, callable before MPI_Init), for provenance; "" without MPI.
bool mpi_compiled_in();
std::string mpi_library_version();
// MPI_Finalize when start_mpi started MPI and nothing has finalised it; a no-op otherwise,
// and in a build without MPI.
void finalize_mpi();

}  // namespace tpb
