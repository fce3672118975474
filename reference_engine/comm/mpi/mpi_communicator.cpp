#include "reference_engine/comm/mpi/mpi_communicator.h"

#include <algorithm>
#include <climits>
#include <cstring>

#include "reference_engine/comm/mpi_session.h"
#include "tpb/check.h"

namespace tpb {
namespace {

// MPI counts are ints: larger messages go in pieces of this many elements.
constexpr std::size_t kMaxPiece = std::size_t(1) << 30;

std::string mpi_error_text(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  return std::string(text, static_cast<std::size_t>(length));
}

#define TPB_MPI_CALL(call)                                                            \
  do {                                                                                \
    const int tpb_mpi_rc = (call);                                                    \
    TPB_CHECK(tpb_mpi_rc == MPI_SUCCESS, "mpi: " #call ": " << mpi_error_text(tpb_mpi_rc)); \
  } while (0)

float widen(DType dtype, const void* data, std::size_t i) {
  const auto bits = static_cast<const std::uint16_t*>(data)[i];
  return dtype == DType::bf16 ? bf16_to_float(bits) : f16_to_float(bits);
}

void narrow(DType dtype, float value, void* data, std::size_t i) {
  static_cast<std::uint16_t*>(data)[i] = dtype == DType::bf16 ? float_to_bf16(value) : float_to_f16(value);
}

}  // namespace

MpiCommunicator::MpiCommunicator(Bootstrap& bootstrap, const CommOptions& /*options*/) {
  TPB_INPUT_CHECK(launched_by_mpi(), "mpi: this rank was not started by an MPI launcher; run the scenario with "
                                     "--launcher mpirun (or srun inside a Slurm allocation)");
  start_mpi();
  int world_rank = -1, world_size = 0;
  TPB_MPI_CALL(MPI_Comm_rank(MPI_COMM_WORLD, &world_rank));
  TPB_MPI_CALL(MPI_Comm_size(MPI_COMM_WORLD, &world_size));
  TPB_INPUT_CHECK(world_size == bootstrap.size() && world_rank == bootstrap.rank(),
                  "mpi: the MPI job's world (rank " << world_rank << " of " << world_size << ") is not this group (rank "
                                                    << bootstrap.rank() << " of " << bootstrap.size()
                                                    << "): one MPI job must run exactly one rank group");
  TPB_MPI_CALL(MPI_Comm_dup(MPI_COMM_WORLD, &comm_));
  // Errors come back as return codes (TPB_MPI_CALL), not as an abort of the whole job.
  TPB_MPI_CALL(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
  rank_ = world_rank;
  size_ = world_size;
}

MpiCommunicator::~MpiCommunicator() {
  if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

void MpiCommunicator::all_reduce(const void* in, void* out, std::size_t count, DType dtype, void* /*stream*/) {
  calls_.add("mpi", count * dtype_size(dtype));
  if (dtype == DType::f32) {
    for (std::size_t done = 0; done < count; done += kMaxPiece) {
      const int n = static_cast<int>(std::min(kMaxPiece, count - done));
      float* dst = static_cast<float*>(out) + done;
      const void* src = in == out ? MPI_IN_PLACE : static_cast<const float*>(in) + done;
      TPB_MPI_CALL(MPI_Allreduce(src, dst, n, MPI_FLOAT, MPI_SUM, comm_));
    }
    return;
  }
  // Widen, sum in fp32, round once.
  wide_.resize(count);
  for (std::size_t i = 0; i < count; ++i) wide_[i] = widen(dtype, in, i);
  for (std::size_t done = 0; done < count; done += kMaxPiece) {
    const int n = static_cast<int>(std::min(kMaxPiece, count - done));
    TPB_MPI_CALL(MPI_Allreduce(MPI_IN_PLACE, wide_.data() + done, n, MPI_FLOAT, MPI_SUM, comm_));
  }
  for (std::size_t i = 0; i < count; ++i) narrow(dtype, wide_[i], out, i);
}

void MpiCommunicator::all_gather(const void* in, void* out, std::size_t count_per_rank, DType dtype, void* /*stream*/) {
  const std::size_t bytes = count_per_rank * dtype_size(dtype);
  TPB_CHECK(bytes <= static_cast<std::size_t>(INT_MAX), "mpi: all_gather of " << bytes << " bytes per rank is over MPI's int count");
  const auto* src = static_cast<const unsigned char*>(in);
  auto* dst = static_cast<unsigned char*>(out);
  // MPI forbids a send buffer that overlaps the receive buffer (other than MPI_IN_PLACE at
  // this rank's own block).
  if (src + bytes > dst && src < dst + bytes * static_cast<std::size_t>(size_)) {
    gather_in_.assign(src, src + bytes);
    src = gather_in_.data();
  }
  TPB_MPI_CALL(MPI_Allgather(src, static_cast<int>(bytes), MPI_BYTE, dst, static_cast<int>(bytes), MPI_BYTE, comm_));
}

void MpiCommunicator::barrier() { TPB_MPI_CALL(MPI_Barrier(comm_)); }

}  // namespace tpb
