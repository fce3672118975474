// Custom CUDA-IPC allreduce kernels: one-shot and two-shot (see tpb/kernels/allreduce.h for
// the shared layout, tpb/kernels/allreduce_ref.h for the arithmetic they must match).
//
// Why this shape:
// - The input is copied into this rank's own IPC buffer INSIDE the kernel (one launch, no
//   separate memcpy, graph-safe because the buffer never moves).
// - Barriers are per block: block b only reads peer data that block b of each peer wrote,
//   because every stage maps 16-byte packs to blocks the same way on every rank. A block
//   publishes with st.release.sys after __syncthreads (cumulative over the block's writes)
//   and waits with ld.acquire.sys; this is the pattern vLLM, SGLang and TensorRT-LLM use.
// - Flags grow by one per barrier per block (counter[b]) and are compared wrap-safely, so no
//   reset is needed between calls and a captured graph replays correctly.
// - No end barrier: data buffers alternate by call parity (call_count, bumped by the last
//   block of each kernel). A peer can only overwrite the buffer half we read in call k once
//   it has passed a barrier of call k+1 with us, and our call k+1 starts only after our whole
//   call-k kernel finished (stream order). This saves one NVLink round trip per call.
// - Spin-waits are bounded by the global nanosecond timer. A call fails on a timeout, on a
//   peer whose call (call index, element count, algorithm, dtype: the high bits of each
//   barrier flag word) differs from this rank's, or on meeting another call of the same
//   communicator in flight. The first failure is recorded once (own signal's `failed`, then the host-mapped report);
//   every block of a failed call, and of every later call until recover(), writes NaN over the
//   part of `out` it owns: a failed call can never leave a plausible, stale output behind.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "tpb/cuda_check.h"
#include "tpb/kernels/allreduce.h"
#include "tpb/kernels/allreduce_flag.h"

namespace tpb {
namespace {

// ---- memory-model primitives ------------------------------------------------------------

__device__ __forceinline__ void st_release_sys(std::uint32_t* addr, std::uint32_t v) {
  asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(addr), "r"(v) : "memory");
}

__device__ __forceinline__ void st_release_sys_u64(std::uint64_t* addr, std::uint64_t v) {
  asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(addr), "l"(v) : "memory");
}

__device__ __forceinline__ std::uint64_t ld_acquire_sys_u64(const std::uint64_t* addr) {
  std::uint64_t v;
  asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(addr) : "memory");
  return v;
}

__device__ __forceinline__ std::uint64_t global_timer_ns() {
  std::uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// A barrier wait reads only its flag for this long before it also watches the rank's
// `failed` word and the timeout: the fast path stays one load per spin.
constexpr std::uint64_t kQuietSpinNs = 20000;

// ---- element conversions (fp32 accumulate, round once: RNE like the CPU reference) -------

template <typename T> __device__ __forceinline__ float to_f32(T v);
template <> __device__ __forceinline__ float to_f32<float>(float v) { return v; }
template <> __device__ __forceinline__ float to_f32<__half>(__half v) { return __half2float(v); }
template <> __device__ __forceinline__ float to_f32<__nv_bfloat16>(__nv_bfloat16 v) { return __bfloat162float(v); }

template <typename T> __device__ __forceinline__ T from_f32(float v);
template <> __device__ __forceinline__ float from_f32<float>(float v) { return v; }
template <> __device__ __forceinline__ __half from_f32<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

// One 16-byte pack: 8 bf16/fp16 or 4 fp32.
template <typename T>
union Pack {
  static constexpr int kElems = 16 / sizeof(T);
  uint4 v;
  T e[kElems];
};

// Loads pack p of a user buffer: one 16-byte load when aligned and whole, else per element
// (tail or misaligned pointer), zero-filling past `count`.
template <typename T>
__device__ __forceinline__ uint4 load_user_pack(const T* in, std::size_t p, std::size_t count, bool aligned) {
  constexpr int E = Pack<T>::kElems;
  Pack<T> x;
  const std::size_t first = p * E;
  if (aligned && first + E <= count) {
    x.v = reinterpret_cast<const uint4*>(in)[p];
  } else {
#pragma unroll
    for (int j = 0; j < E; ++j) x.e[j] = first + j < count ? in[first + j] : from_f32<T>(0.f);
  }
  return x.v;
}

template <typename T>
__device__ __forceinline__ void store_user_pack(T* out, std::size_t p, std::size_t count, bool aligned, uint4 v) {
  constexpr int E = Pack<T>::kElems;
  Pack<T> x;
  x.v = v;
  const std::size_t first = p * E;
  if (aligned && first + E <= count) {
    reinterpret_cast<uint4*>(out)[p] = v;
  } else {
#pragma unroll
    for (int j = 0; j < E; ++j)
      if (first + j < count) out[first + j] = x.e[j];
  }
}

// Sum of W packs (one per rank, index = rank), in rank order 0..W-1, fp32, rounded once.
template <typename T, int W>
__device__ __forceinline__ uint4 sum_packs(const Pack<T>* in) {
  constexpr int E = Pack<T>::kElems;
  Pack<T> out;
#pragma unroll
  for (int j = 0; j < E; ++j) {
    float acc = to_f32(in[0].e[j]);
#pragma unroll
    for (int r = 1; r < W; ++r) acc += to_f32(in[r].e[j]);
    out.e[j] = from_f32<T>(acc);
  }
  return out.v;
}

// Sum of pack p over all ranks' buffers, in rank order 0..W-1, fp32, rounded once.
template <typename T, int W>
__device__ __forceinline__ uint4 reduce_pack(const uint4* const* bufs, std::size_t p) {
  constexpr int E = Pack<T>::kElems;
  Pack<T> in[W];
#pragma unroll
  for (int r = 0; r < W; ++r) in[r].v = bufs[r][p];  // W independent loads in flight
  Pack<T> out;
#pragma unroll
  for (int j = 0; j < E; ++j) {
    float acc = to_f32(in[0].e[j]);
#pragma unroll
    for (int r = 1; r < W; ++r) acc += to_f32(in[r].e[j]);
    out.e[j] = from_f32<T>(acc);
  }
  return out.v;
}

struct BlockState {
  std::uint32_t flag;       // last barrier flag used by this block
  int failed;               // the communicator failed earlier (AllreduceSignal::failed)
  AllreduceCallTag tag;     // this call (the error report's "mine")
  std::uint64_t tag_bits;   // this call as the high 48 bits of its barrier flag words
  std::uint32_t was_in_flight;  // block 0, thread 0: in_flight as this call found it
};

// The failure paths below are __noinline__: kept out of the kernels' hot path, whose every
// instruction-cache line a small call fetches cold on the SM it lands on.

// Records the first failure of this rank: own signal's `failed` decides who writes the report.
// Plain values only: a reference to the launch's parameters would put them on the stack.
__device__ __noinline__ void record_failure(AllreduceSignal* self, AllreduceErrorReport* report, int code, int peer,
                                            AllreduceCallTag mine, AllreduceCallTag theirs) {
  if (atomicCAS(&self->failed, 0u, static_cast<std::uint32_t>(code)) != 0u) return;
  volatile AllreduceErrorReport* r = report;
  r->peer = peer;
  r->mine.call = mine.call;
  r->mine.shape = mine.shape;
  r->mine.bytes = mine.bytes;
  r->theirs.call = theirs.call;
  r->theirs.shape = theirs.shape;
  r->theirs.bytes = theirs.bytes;
  __threadfence_system();
  r->code = code;
  __threadfence_system();
}

__device__ __noinline__ void spin_for(std::uint64_t ns) {
  const std::uint64_t start = global_timer_ns();
  while (global_timer_ns() - start < ns) {
  }
}

// Test hook (AllreduceDelayAt): every thread of the block waits `delay_ns` at `at`.
__device__ __forceinline__ void test_delay(const AllreduceLaunch& a, AllreduceDelayAt at) {
  if (a.delay_at == at) spin_for(a.delay_ns);
}

// Per-block barrier across ranks. Each peer's flag word names its call, checked against this
// call's as soon as it arrives. Returns false (in every thread) when the call failed here or
// elsewhere on this rank.
template <int W>
__device__ bool block_barrier(const AllreduceLaunch& a, BlockState& s) {
  __shared__ int failed_here;
  if (threadIdx.x == 0) failed_here = 0;
  const std::uint32_t flag = ++s.flag;
  // A second call of this communicator in flight (another stream, or a graph replayed beside
  // an eager call) races on counter[] and blocks_done: fail it rather than sum garbage. The
  // atomic was issued in block_begin; its answer is only needed here.
  if (s.was_in_flight != 0u) {  // only block 0's thread 0 holds it, until its first barrier
    s.was_in_flight = 0u;
    record_failure(a.signals[a.rank], a.report, kAllreduceErrorConcurrent, -1, s.tag, AllreduceCallTag{});
    failed_here = 1;
  }
  __syncthreads();  // the block's writes so far happen before the release below
  if (threadIdx.x < W && failed_here == 0) {
    const int peer = threadIdx.x;
    AllreduceSignal* self = a.signals[a.rank];
    const std::uint64_t word = allreduce_flag_word(s.tag_bits, flag);
    st_release_sys_u64(&a.signals[peer]->sync[blockIdx.x][a.rank][flag & 1u], word);
    const std::uint64_t* slot = &self->sync[blockIdx.x][peer][flag & 1u];
    const std::uint64_t start = global_timer_ns();
    std::uint64_t seen;
    // The slot holds flags f - 2, f, f + 2, ... of this parity: wait until the peer's count
    // reaches f (16-bit wrap-safe difference).
    while (allreduce_flag_before(seen = ld_acquire_sys_u64(slot), flag)) {
      const std::uint64_t waited = global_timer_ns() - start;
      if (waited < kQuietSpinNs) continue;  // the fast path reads the flag alone
      // Another block of this rank failed (a mismatch, a timeout): no peer block will come.
      if (*reinterpret_cast<volatile std::uint32_t*>(&self->failed) != 0u) {
        seen = word;  // not a mismatch: this rank failed elsewhere
        failed_here = 1;
        break;
      }
      if (waited > a.timeout_ns) {
        record_failure(a.signals[a.rank], a.report, kAllreduceErrorTimeout, peer, s.tag, AllreduceCallTag{});
        seen = word;
        failed_here = 1;
        break;
      }
    }
    // A peer two barriers ahead in this slot, or one on another call, size or algorithm.
    if (seen != word) {
      record_failure(a.signals[a.rank], a.report, kAllreduceErrorMismatch, peer, s.tag, allreduce_flag_call(seen, s.tag.call));
      failed_here = 1;
    }
  }
  __syncthreads();
  return failed_here == 0;
}

// Reads this block's flag counter, the call parity and the failed state; builds the call's
// tag; block 0 marks the call in flight.
__device__ void block_begin(const AllreduceLaunch& a, AllreduceAlgo algo, BlockState& s, std::uint32_t& parity) {
  __shared__ std::uint32_t sh[4];
  AllreduceSignal* self = a.signals[a.rank];
  s.was_in_flight = 0u;
  if (threadIdx.x == 0) {
    if (blockIdx.x == 0) s.was_in_flight = atomicExch(&self->in_flight, 1u);
    sh[0] = self->counter[blockIdx.x];
    sh[1] = self->call_count;
    sh[2] = self->failed;
  }
  __syncthreads();
  s.flag = sh[0];
  parity = sh[1] & 1u;
  s.failed = sh[2] != 0;
  s.tag.call = sh[1];
  s.tag.shape = allreduce_shape(algo == AllreduceAlgo::two_shot, a.dtype);
  s.tag.bytes = static_cast<std::uint64_t>(a.count) * (a.dtype == DType::f32 ? 4u : 2u);
  s.tag_bits = allreduce_flag_tag_bits(s.tag.call, s.tag.shape, a.count);
}

// Stores the block's flag counter; the last block of the grid ends the call.
__device__ void block_end(const AllreduceLaunch& a, const BlockState& s) {
  if (threadIdx.x != 0) return;
  AllreduceSignal* self = a.signals[a.rank];
  self->counter[blockIdx.x] = s.flag;
  __threadfence();
  if (atomicAdd(&self->blocks_done, 1u) == gridDim.x - 1) {
    self->blocks_done = 0;
    self->in_flight = 0;
    self->call_count += 1;  // every block of this call has read call_count already
  }
}

template <typename T>
__device__ __forceinline__ uint4 nan_pack() {
  Pack<T> x;
#pragma unroll
  for (int j = 0; j < Pack<T>::kElems; ++j) x.e[j] = from_f32<T>(__int_as_float(0x7fc00000));
  return x.v;
}

// A failed one-shot call: NaN over the packs of `out` this thread owns (first, first + stride, ...).
template <typename T>
__device__ __noinline__ void poison_one_shot(T* out, std::size_t count, std::size_t npacks, std::size_t first,
                                             std::size_t stride, bool aligned) {
  for (std::size_t p = first; p < npacks; p += stride) store_user_pack(out, p, count, aligned, nan_pack<T>());
}

// A failed two-shot call: NaN over the packs this thread owns in each rank's slice.
template <typename T>
__device__ __noinline__ void poison_two_shot(T* out, std::size_t count, std::size_t npacks, std::size_t slice,
                                             int world, std::size_t first, std::size_t stride, bool aligned) {
  for (int r = 0; r < world; ++r)
    for (std::size_t q = first; q < slice; q += stride)
      if (r * slice + q < npacks) store_user_pack(out, r * slice + q, count, aligned, nan_pack<T>());
}

template <typename T, int W>
__global__ void __launch_bounds__(kAllreduceThreads) one_shot_kernel(AllreduceLaunch a, std::size_t npacks) {
  const T* in = static_cast<const T*>(a.in);
  T* out = static_cast<T*>(a.out);
  const bool in_aligned = (reinterpret_cast<std::uintptr_t>(in) & 15) == 0;
  const bool out_aligned = (reinterpret_cast<std::uintptr_t>(out) & 15) == 0;
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  const std::size_t first = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  // The packs of `out` this thread writes: on failure it writes NaN over exactly these.
  const auto poison = [&] { poison_one_shot(out, a.count, npacks, first, stride, out_aligned); };
  test_delay(a, AllreduceDelayAt::before_copy_in);
  // The first two input packs do not depend on the signal state: start their loads before
  // reading it, so the two memory latencies overlap (small messages are latency-bound).
  const std::size_t p0 = first, p1 = first + stride;
  uint4 v0{}, v1{};
  if (p0 < npacks) v0 = load_user_pack(in, p0, a.count, in_aligned);
  if (p1 < npacks) v1 = load_user_pack(in, p1, a.count, in_aligned);
  BlockState s;
  std::uint32_t parity;
  block_begin(a, AllreduceAlgo::one_shot, s, parity);
  if (__builtin_expect(s.failed, 0)) return poison();
  const uint4* bufs[W];
#pragma unroll
  for (int r = 0; r < W; ++r)
    bufs[r] = reinterpret_cast<const uint4*>(static_cast<const char*>(a.buffers[r]) + parity * a.buffer_bytes);
  uint4* mine = reinterpret_cast<uint4*>(static_cast<char*>(a.buffers[a.rank]) + parity * a.buffer_bytes);

  // Each thread handles packs first, first + stride, ... two at a time, so twice the loads
  // are in flight per round (measured 2 MiB: 12.9 us with one at a time, see NOTES.md). The
  // pack -> block mapping is unchanged, which the per-block barrier relies on.
  for (std::size_t p = first + 2 * stride; p < npacks; p += 2 * stride) {
    const std::size_t q = p + stride;
    const uint4 x = load_user_pack(in, p, a.count, in_aligned);
    uint4 y{};
    if (q < npacks) y = load_user_pack(in, q, a.count, in_aligned);
    mine[p] = x;
    if (q < npacks) mine[q] = y;
  }
  if (p0 < npacks) mine[p0] = v0;
  if (p1 < npacks) mine[p1] = v1;
  if (__builtin_expect(!block_barrier<W>(a, s), 0)) return poison();
  test_delay(a, AllreduceDelayAt::after_barrier);
  for (std::size_t p = first; p < npacks; p += 2 * stride) {
    const std::size_t q = p + stride;
    Pack<T> x[W], y[W];
#pragma unroll
    for (int r = 0; r < W; ++r) x[r].v = bufs[r][p];
    if (q < npacks) {
#pragma unroll
      for (int r = 0; r < W; ++r) y[r].v = bufs[r][q];
    }
    store_user_pack(out, p, a.count, out_aligned, sum_packs<T, W>(x));
    if (q < npacks) store_user_pack(out, q, a.count, out_aligned, sum_packs<T, W>(y));
  }
  block_end(a, s);
}

template <typename T, int W>
__global__ void __launch_bounds__(kAllreduceThreads) two_shot_kernel(AllreduceLaunch a, std::size_t npacks) {
  const T* in = static_cast<const T*>(a.in);
  T* out = static_cast<T*>(a.out);
  const bool in_aligned = (reinterpret_cast<std::uintptr_t>(in) & 15) == 0;
  const bool out_aligned = (reinterpret_cast<std::uintptr_t>(out) & 15) == 0;
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  const std::size_t first = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::size_t slice = (npacks + W - 1) / W;  // packs per rank's slice (last may be short)
  // The packs of `out` this thread writes (stages 2 and 3): on failure it writes NaN over them.
  const auto poison = [&] { poison_two_shot(out, a.count, npacks, slice, W, first, stride, out_aligned); };
  test_delay(a, AllreduceDelayAt::before_copy_in);
  BlockState s;
  std::uint32_t parity;
  block_begin(a, AllreduceAlgo::two_shot, s, parity);
  if (__builtin_expect(s.failed, 0)) return poison();
  const uint4* bufs[W];
#pragma unroll
  for (int r = 0; r < W; ++r)
    bufs[r] = reinterpret_cast<const uint4*>(static_cast<const char*>(a.buffers[r]) + parity * a.buffer_bytes);
  uint4* mine = reinterpret_cast<uint4*>(static_cast<char*>(a.buffers[a.rank]) + parity * a.buffer_bytes);

  // Stage 1: copy the input, slice by slice with the in-slice mapping used by stages 2 and 3.
#pragma unroll
  for (int r = 0; r < W; ++r)
    for (std::size_t q = first; q < slice; q += stride) {
      const std::size_t p = r * slice + q;
      if (p < npacks) mine[p] = load_user_pack(in, p, a.count, in_aligned);
    }
  if (__builtin_expect(!block_barrier<W>(a, s), 0)) return poison();
  test_delay(a, AllreduceDelayAt::after_barrier);
  // Stage 2: reduce this rank's slice from every rank; the result goes to the output and,
  // in place, to this rank's buffer (no peer reads this slice of ours during stage 2).
  for (std::size_t q = first; q < slice; q += stride) {
    const std::size_t p = a.rank * slice + q;
    if (p < npacks) {
      const uint4 sum = reduce_pack<T, W>(bufs, p);
      mine[p] = sum;
      store_user_pack(out, p, a.count, out_aligned, sum);
    }
  }
  test_delay(a, AllreduceDelayAt::between_stages);
  if (__builtin_expect(!block_barrier<W>(a, s), 0)) return poison();
  // Stage 3: gather the other ranks' reduced slices.
#pragma unroll
  for (int r = 0; r < W; ++r) {
    if (r == a.rank) continue;
    for (std::size_t q = first; q < slice; q += stride) {
      const std::size_t p = r * slice + q;
      if (p < npacks) store_user_pack(out, p, a.count, out_aligned, bufs[r][p]);
    }
  }
  block_end(a, s);
}

__global__ void selftest_kernel(AllreduceLaunch a, std::uint32_t value) {
  const int peer = threadIdx.x;
  if (peer < a.world && peer != a.rank) st_release_sys(&a.signals[peer]->selftest[a.rank], value);
}

// Copies the first `bytes` of every rank's data buffer (peers' through their mappings) to dst.
__global__ void selftest_read_kernel(AllreduceLaunch a, std::size_t bytes, uint4* dst) {
  const std::size_t packs = bytes / 16;
  for (int r = 0; r < a.world; ++r) {
    const auto* src = static_cast<const volatile uint4*>(a.buffers[r]);
    for (std::size_t p = threadIdx.x; p < packs; p += blockDim.x) {
      const volatile uint4& v = src[p];
      dst[r * packs + p] = make_uint4(v.x, v.y, v.z, v.w);
    }
  }
}

template <typename T, int W>
int blocks_per_sm_typed() {
  int one = 0, two = 0;
  TPB_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&one, one_shot_kernel<T, W>, kAllreduceThreads, 0));
  TPB_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&two, two_shot_kernel<T, W>, kAllreduceThreads, 0));
  return one < two ? one : two;
}

template <typename T>
int blocks_per_sm_world(int world) {
  switch (world) {
    case 2: return blocks_per_sm_typed<T, 2>();
    case 4: return blocks_per_sm_typed<T, 4>();
    case 6: return blocks_per_sm_typed<T, 6>();
    case 8: return blocks_per_sm_typed<T, 8>();
    default: TPB_FAIL("custom allreduce has no kernel for world size " << world);
  }
}

template <typename T, int W>
void launch_typed(AllreduceAlgo algo, const AllreduceLaunch& a, cudaStream_t stream) {
  constexpr int E = Pack<T>::kElems;
  const std::size_t npacks = (a.count + E - 1) / E;
  const std::size_t work = algo == AllreduceAlgo::one_shot ? npacks : (npacks + W - 1) / W;
  std::size_t blocks = (work + kAllreduceThreads - 1) / kAllreduceThreads;
  if (blocks < 1) blocks = 1;
  if (blocks > static_cast<std::size_t>(a.max_blocks)) blocks = a.max_blocks;
  if (algo == AllreduceAlgo::one_shot)
    one_shot_kernel<T, W><<<static_cast<unsigned>(blocks), kAllreduceThreads, 0, stream>>>(a, npacks);
  else
    two_shot_kernel<T, W><<<static_cast<unsigned>(blocks), kAllreduceThreads, 0, stream>>>(a, npacks);
  TPB_CUDA_CHECK_LAUNCH();
}

template <typename T>
void launch_world(AllreduceAlgo algo, const AllreduceLaunch& a, cudaStream_t stream) {
  switch (a.world) {
    case 2: return launch_typed<T, 2>(algo, a, stream);
    case 4: return launch_typed<T, 4>(algo, a, stream);
    case 6: return launch_typed<T, 6>(algo, a, stream);
    case 8: return launch_typed<T, 8>(algo, a, stream);
    default: TPB_FAIL("custom allreduce has no kernel for world size " << a.world);
  }
}

}  // namespace

std::size_t allreduce_allocation_bytes(std::size_t buffer_bytes) {
  return sizeof(AllreduceSignal) + 2 * buffer_bytes;
}

bool allreduce_world_supported(int world) { return world == 2 || world == 4 || world == 6 || world == 8; }

void launch_custom_allreduce(AllreduceAlgo algo, const AllreduceLaunch& a, void* stream) {
  TPB_CHECK(allreduce_world_supported(a.world), "custom allreduce: world size " << a.world << " unsupported");
  TPB_CHECK(a.rank >= 0 && a.rank < a.world, "custom allreduce: rank " << a.rank << " of " << a.world);
  TPB_CHECK(a.buffer_bytes % 16 == 0, "custom allreduce: buffer_bytes must be a multiple of 16");
  const std::size_t padded_bytes = (a.count * dtype_size(a.dtype) + 15) / 16 * 16;
  TPB_CHECK(padded_bytes <= a.buffer_bytes, "custom allreduce: message of " << padded_bytes
                                                << " bytes exceeds the registered buffer of " << a.buffer_bytes);
  TPB_CHECK(a.max_blocks >= 1 && a.max_blocks <= kAllreduceMaxBlocks, "custom allreduce: max_blocks " << a.max_blocks);
  TPB_CHECK(a.report != nullptr, "custom allreduce: no error report");
  if (a.count == 0) return;
  auto s = static_cast<cudaStream_t>(stream);
  switch (a.dtype) {
    case DType::bf16: return launch_world<__nv_bfloat16>(algo, a, s);
    case DType::f16: return launch_world<__half>(algo, a, s);
    case DType::f32: return launch_world<float>(algo, a, s);
  }
}

void launch_allreduce_selftest(AllreduceSignal* const* signals, int rank, int world, std::uint32_t value,
                               void* stream) {
  AllreduceLaunch a;
  a.rank = rank;
  a.world = world;
  for (int r = 0; r < world; ++r) a.signals[r] = signals[r];
  selftest_kernel<<<1, kAllreduceMaxRanks, 0, static_cast<cudaStream_t>(stream)>>>(a, value);
  TPB_CUDA_CHECK_LAUNCH();
}

void launch_allreduce_selftest_read(void* const* buffers, int world, std::size_t bytes, void* dst, void* stream) {
  TPB_CHECK(bytes % 16 == 0, "custom allreduce self-test: read size must be a multiple of 16, got " << bytes);
  AllreduceLaunch a;
  a.world = world;
  for (int r = 0; r < world; ++r) a.buffers[r] = buffers[r];
  selftest_read_kernel<<<1, 256, 0, static_cast<cudaStream_t>(stream)>>>(a, bytes, static_cast<uint4*>(dst));
  TPB_CUDA_CHECK_LAUNCH();
}

int allreduce_blocks_per_sm(DType dtype, int world) {
  switch (dtype) {
    case DType::bf16: return blocks_per_sm_world<__nv_bfloat16>(world);
    case DType::f16: return blocks_per_sm_world<__half>(world);
    case DType::f32: return blocks_per_sm_world<float>(world);
  }
  return 0;
}

const char* allreduce_error_text(int code) {
  switch (code) {
    case 0: return "no error";
    case kAllreduceErrorTimeout:
      return "a peer rank never arrived at a custom-allreduce barrier within the timeout (peer process "
             "dead, hung, or calling collectives in a different order)";
    case kAllreduceErrorMismatch:
      return "a peer rank met this rank at a custom-allreduce barrier on a different call (another call "
             "index, size, algorithm or dtype: the ranks' calls diverged)";
    case kAllreduceErrorConcurrent:
      return "two calls of one custom-allreduce communicator ran at once (calls on two streams, or a graph "
             "replayed beside another call): one communicator serves one stream";
    default: return "unknown custom-allreduce error code";
  }
}

}  // namespace tpb
