#include "reference_engine/comm/mpi_session.h"

#include <cstdlib>

#if TPB_HAVE_MPI
#include <mpi.h>
#endif

#include "tpb/check.h"

namespace tpb {

bool launched_by_mpi() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE"})
    if (std::getenv(name) != nullptr) return true;
  return false;
}

#if TPB_HAVE_MPI
void start_mpi() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized) return;
  int provided = 0;
  // Serialized: the engine's CPU kernels may run threads, but only one calls MPI at a time.
  const int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
  TPB_CHECK(rc == MPI_SUCCESS, "mpi: MPI_Init_thread failed with code " << rc);
}

bool mpi_compiled_in() { return true; }

std::string mpi_library_version() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int length = 0;
  MPI_Get_library_version(text, &length);
  const std::string all(text, static_cast<std::size_t>(length));
  return all.substr(0, all.find_first_of("\n,"));
}

void finalize_mpi() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) MPI_Finalize();
}
#else
void start_mpi() { TPB_FAIL("mpi: this tpbench was built without MPI"); }
void finalize_mpi() {}
bool mpi_compiled_in() { return false; }
std::string mpi_library_version() { return ""; }
#endif

}  // namespace tpb
