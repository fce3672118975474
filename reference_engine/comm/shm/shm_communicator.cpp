#include "reference_engine/comm/shm/shm_communicator.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <sstream>
#include <thread>
#include <vector>

#include "tpb/check.h"
#include "tpb/system_check.h"

namespace tpb {
namespace {

// The segment's first cache line. Rank 0 writes it before any other rank maps the segment.
struct SegmentHeader {
  std::uint64_t magic;       // kMagic once initialised
  std::uint64_t world_size;  // ranks sharing the segment
  std::uint64_t slot_bytes;  // data bytes per rank slot (multiple of kLineBytes)
  std::uint64_t reserved[5];
};

constexpr std::uint64_t kMagic = 0x7470622d73686d31ull;  // "tpb-shm1"
constexpr std::size_t kLineBytes = 64;                    // one counter per cache line: no false sharing
static_assert(sizeof(SegmentHeader) == kLineBytes, "the header is one cache line");
static_assert(std::atomic_ref<std::uint64_t>::is_always_lock_free,
              "arrival counters live in shared memory: they must be lock-free atomics");
static_assert(kLineBytes % std::atomic_ref<std::uint64_t>::required_alignment == 0,
              "counters at cache-line offsets are suitably aligned");

std::size_t round_up(std::size_t n, std::size_t to) { return (n + to - 1) / to * to; }

std::size_t counters_offset() { return kLineBytes; }
std::size_t slots_offset(int world_size) { return kLineBytes + static_cast<std::size_t>(world_size) * kLineBytes; }

std::string errno_text() { return std::strerror(errno); }

// Sums `n` elements of every rank's slot at element offset 0, in rank order, fp32, one rounding.
template <typename Load, typename Store>
void sum_slots(unsigned char* const* slots, int world_size, std::size_t n, void* out, Load load,
               Store store) {
  for (std::size_t i = 0; i < n; ++i) {
    float acc = load(slots[0], i);
    for (int r = 1; r < world_size; ++r) acc += load(slots[r], i);
    store(out, i, acc);
  }
}

void reduce_chunk(unsigned char* const* slots, int world_size, std::size_t n, DType dtype, void* out) {
  switch (dtype) {
    case DType::f32:
      sum_slots(slots, world_size, n, out,
                [](const unsigned char* s, std::size_t i) { return reinterpret_cast<const float*>(s)[i]; },
                [](void* o, std::size_t i, float v) { static_cast<float*>(o)[i] = v; });
      break;
    case DType::bf16:
      sum_slots(slots, world_size, n, out,
                [](const unsigned char* s, std::size_t i) {
                  return bf16_to_float(reinterpret_cast<const std::uint16_t*>(s)[i]);
                },
                [](void* o, std::size_t i, float v) { static_cast<std::uint16_t*>(o)[i] = float_to_bf16(v); });
      break;
    case DType::f16:
      sum_slots(slots, world_size, n, out,
                [](const unsigned char* s, std::size_t i) {
                  return f16_to_float(reinterpret_cast<const std::uint16_t*>(s)[i]);
                },
                [](void* o, std::size_t i, float v) { static_cast<std::uint16_t*>(o)[i] = float_to_f16(v); });
      break;
  }
}

// Each process-local communicator of rank 0 gets its own segment name.
std::atomic<unsigned> g_segment_counter{0};

}  // namespace

ShmCommunicator::ShmCommunicator(Bootstrap& bootstrap, const CommOptions& options)
    : rank_(bootstrap.rank()), size_(bootstrap.size()), timeout_s_(options.timeout_s) {
  TPB_INPUT_CHECK(options.max_bytes > 0, "shm: CommOptions::max_bytes must be positive");
  TPB_CHECK(size_ >= 1 && rank_ >= 0 && rank_ < size_, "shm: bad rank " << rank_ << " of " << size_);
  slot_bytes_ = round_up(options.max_bytes, kLineBytes);
  segment_bytes_ = slots_offset(size_) + slot_bytes_ * static_cast<std::size_t>(size_);

  // Rank 0 creates and initialises the segment, then hands its name (or its failure) to the
  // others through the bootstrap, which is also the barrier that orders creation before opening.
  std::string name;
  std::string failure;
  if (rank_ == 0) {
    std::ostringstream os;
    os << "/" << bootstrap.group_id() << "-shm" << g_segment_counter++ << "-" << getpid();
    name = os.str();
    const int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0) {
      failure = "shm_open(" + name + ") failed: " + errno_text();
    } else if (ftruncate(fd, static_cast<off_t>(segment_bytes_)) != 0) {
      failure = "ftruncate(" + name + ", " + std::to_string(segment_bytes_) + ") failed: " + errno_text();
    } else {
      void* p = mmap(nullptr, segment_bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
      if (p == MAP_FAILED) {
        failure = "mmap of " + name + " failed: " + errno_text();
      } else {
        base_ = static_cast<unsigned char*>(p);
        // ftruncate zero-filled the counters; only the header needs writing.
        auto* header = reinterpret_cast<SegmentHeader*>(base_);
        header->world_size = static_cast<std::uint64_t>(size_);
        header->slot_bytes = slot_bytes_;
        std::atomic_ref<std::uint64_t>(header->magic).store(kMagic, std::memory_order_release);
      }
    }
    if (fd >= 0) close(fd);
    if (!failure.empty()) shm_unlink(name.c_str());
  }
  const std::vector<std::string> names = bootstrap.all_gather(rank_ == 0 ? (failure.empty() ? name : "!" + failure) : "");
  TPB_CHECK(!names.empty() && !names[0].empty(), "shm: rank 0 sent no segment name");
  if (names[0][0] == '!') TPB_SYSTEM_FAIL("shm: rank 0 could not create the segment: " << names[0].substr(1));
  name = names[0];

  if (rank_ != 0) {
    const int fd = shm_open(name.c_str(), O_RDWR, 0600);
    if (fd < 0) failure = "shm_open(" + name + ") failed: " + errno_text();
    struct stat st {};
    if (failure.empty() && (fstat(fd, &st) != 0 || static_cast<std::size_t>(st.st_size) != segment_bytes_)) {
      failure = "segment " + name + " has " + std::to_string(st.st_size) + " bytes, expected " +
                std::to_string(segment_bytes_) + " (do all ranks use the same max_bytes?)";
    }
    if (failure.empty()) {
      void* p = mmap(nullptr, segment_bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
      if (p == MAP_FAILED) failure = "mmap of " + name + " failed: " + errno_text();
      else base_ = static_cast<unsigned char*>(p);
    }
    if (fd >= 0) close(fd);
    if (failure.empty()) {
      auto* header = reinterpret_cast<SegmentHeader*>(base_);
      if (std::atomic_ref<std::uint64_t>(header->magic).load(std::memory_order_acquire) != kMagic ||
          header->world_size != static_cast<std::uint64_t>(size_) || header->slot_bytes != slot_bytes_) {
        failure = "segment " + name + " does not match this group (magic, world size or slot size)";
      }
    }
  }
  // Every rank reports whether it mapped the segment; then rank 0 removes the name, which
  // nobody needs any more (the mappings keep the memory alive).
  const std::vector<std::string> mapped = bootstrap.all_gather(failure);
  if (rank_ == 0) shm_unlink(name.c_str());
  for (int r = 0; r < size_; ++r) {
    if (!mapped[static_cast<std::size_t>(r)].empty()) {
      if (base_ != nullptr) munmap(base_, segment_bytes_);
      base_ = nullptr;
      TPB_SYSTEM_FAIL("shm: rank " << r << ": " << mapped[static_cast<std::size_t>(r)]);
    }
  }
  for (int r = 0; r < size_; ++r) slots_.push_back(slot(r));
}

ShmCommunicator::~ShmCommunicator() {
  if (base_ != nullptr) munmap(base_, segment_bytes_);
}

unsigned char* ShmCommunicator::slot(int r) const {
  return base_ + slots_offset(size_) + static_cast<std::size_t>(r) * slot_bytes_;
}

std::uint64_t* ShmCommunicator::arrival_counter(int r) const {
  return reinterpret_cast<std::uint64_t*>(base_ + counters_offset() + static_cast<std::size_t>(r) * kLineBytes);
}

// Barrier number `epoch`: a rank publishes its arrival (release: its slot writes become
// visible) and waits until every counter has reached `epoch` (acquire). Counters only grow,
// so there is no reset phase and a timeout can name exactly the ranks still missing.
void ShmCommunicator::wait_for_all(std::uint64_t epoch, const char* what) {
  std::atomic_ref<std::uint64_t>(*arrival_counter(rank_)).store(epoch, std::memory_order_release);
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  // Spin briefly (the common case when every rank has a core), then yield, then sleep, so
  // that more ranks than cores (4 ranks on a 2-core CI machine) still make progress.
  constexpr int kSpinRounds = 2000;
  constexpr int kYieldRounds = 20000;
  for (int round = 0;; ++round) {
    bool all = true;
    for (int r = 0; r < size_ && all; ++r) {
      all = std::atomic_ref<std::uint64_t>(*arrival_counter(r)).load(std::memory_order_acquire) >= epoch;
    }
    if (all) return;
    if (round < kSpinRounds) continue;
    if (round < kYieldRounds) {
      sched_yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    if (round % 256 == 0 &&
        std::chrono::duration<double>(clock::now() - start).count() > timeout_s_) {
      std::ostringstream missing;
      int n_missing = 0;
      for (int r = 0; r < size_; ++r) {
        if (std::atomic_ref<std::uint64_t>(*arrival_counter(r)).load(std::memory_order_acquire) < epoch) {
          missing << (n_missing++ ? ", " : "") << r;
        }
      }
      TPB_FAIL("shm " << what << " on rank " << rank_ << ": rank" << (n_missing > 1 ? "s " : " ")
                      << missing.str() << " did not arrive within " << timeout_s_ << " s");
    }
  }
}

void ShmCommunicator::barrier() { wait_for_all(++epoch_, "barrier"); }

void ShmCommunicator::all_reduce(const void* in, void* out, std::size_t count, DType dtype,
                                 void* /*stream*/) {
  const std::size_t elem = dtype_size(dtype);
  const std::size_t chunk_elems = slot_bytes_ / elem;
  calls_.add("shm", count * elem);
  const auto* src = static_cast<const unsigned char*>(in);
  auto* dst = static_cast<unsigned char*>(out);
  // Every chunk is read into this rank's slot before `out` is written, so in == out is safe.
  for (std::size_t first = 0; first < count; first += chunk_elems) {
    const std::size_t n = std::min(chunk_elems, count - first);
    std::memcpy(slot(rank_), src + first * elem, n * elem);
    wait_for_all(++epoch_, "all_reduce");
    reduce_chunk(slots_.data(), size_, n, dtype, dst + first * elem);
    wait_for_all(++epoch_, "all_reduce");
  }
}

void ShmCommunicator::all_gather(const void* in, void* out, std::size_t count_per_rank, DType dtype,
                                 void* /*stream*/) {
  const std::size_t elem = dtype_size(dtype);
  const std::size_t chunk_elems = slot_bytes_ / elem;
  const auto* src = static_cast<const unsigned char*>(in);
  auto* dst = static_cast<unsigned char*>(out);
  for (std::size_t first = 0; first < count_per_rank; first += chunk_elems) {
    const std::size_t n = std::min(chunk_elems, count_per_rank - first);
    std::memcpy(slot(rank_), src + first * elem, n * elem);
    wait_for_all(++epoch_, "all_gather");
    for (int r = 0; r < size_; ++r) {
      std::memcpy(dst + (static_cast<std::size_t>(r) * count_per_rank + first) * elem, slot(r), n * elem);
    }
    wait_for_all(++epoch_, "all_gather");
  }
}

}  // namespace tpb
