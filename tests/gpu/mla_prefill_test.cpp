// Causal MLA prefill attention on the GPU (tpb/kernels/gpu/mla_prefill.h) against the CPU
// reference tpb::kernels::mla_attention_ref on the same bf16-rounded inputs widened to fp32:
// with and without cached tokens before the new ones, odd query lengths, a batch, small head
// dims, one 8K-token sequence (checked on sample rows); the same call twice gives the same bits.
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <ostream>
#include <string>
#include <vector>

#include "gpu_test_support.h"
#include "tpb/cuda_check.h"
#include "tpb/dtype.h"
#include "tpb/kernels/device.h"
#include "tpb/kernels/gpu/mla_prefill.h"
#include "tpb/kernels/mla_attention.h"

namespace tpb::test {
namespace {

// With q in [-2, 2) and keys in [-1, 1) over 192 dims the scores spread over about one unit
// at this scale (DeepSeek-V3's 1/sqrt(192) times a yarn mscale near 1.5): a softmax far
// from uniform, so the running max and the rescaling are exercised.
constexpr float kScale = 0.108f;
constexpr float kQAmp = 2.0f;
constexpr float kKAmp = 1.0f;
constexpr float kVAmp = 1.0f;

struct PrefillCase {
  std::string name;
  gpu::MlaPrefillShape shape;
  std::vector<std::int64_t> check_rows;  // query rows compared per sequence; empty: all
};

gpu::MlaPrefillShape shape(std::int64_t batch, std::int64_t q_len, std::int64_t past, std::int64_t heads,
                           std::int64_t nope = 128, std::int64_t rope = 64, std::int64_t v_dim = 128) {
  gpu::MlaPrefillShape s;
  s.batch = batch;
  s.q_len = q_len;
  s.past = past;
  s.heads = heads;
  s.nope = nope;
  s.rope = rope;
  s.v_dim = v_dim;
  return s;
}

struct PrefillRun {
  gpu::MlaPrefillShape s;
  std::vector<std::uint16_t> q, k_nope, k_rot, v;
  DeviceBuffer<std::uint16_t> d_q, d_k_nope, d_k_rot, d_v, d_out;

  PrefillRun(const gpu::MlaPrefillShape& sh, std::uint64_t seed)
      : s(sh),
        q(hashed_bf16(seed, static_cast<std::size_t>(sh.batch * sh.q_len * sh.heads * (sh.nope + sh.rope)), kQAmp)),
        k_nope(hashed_bf16(seed + 1, static_cast<std::size_t>(sh.batch * (sh.past + sh.q_len) * sh.heads * sh.nope), kKAmp)),
        k_rot(hashed_bf16(seed + 2, static_cast<std::size_t>(sh.batch * (sh.past + sh.q_len) * sh.rope), kKAmp)),
        v(hashed_bf16(seed + 3, static_cast<std::size_t>(sh.batch * (sh.past + sh.q_len) * sh.heads * sh.v_dim), kVAmp)),
        d_q(q.size()),
        d_k_nope(k_nope.size()),
        d_k_rot(k_rot.size()),
        d_v(v.size()),
        d_out(static_cast<std::size_t>(sh.batch * sh.q_len * sh.heads * sh.v_dim)) {
    d_q.upload(q.data());
    d_k_nope.upload(k_nope.data());
    d_k_rot.upload(k_rot.data());
    d_v.upload(v.data());
  }

  std::vector<std::uint16_t> run() {
    TPB_CUDA_CHECK(cudaMemset(d_out.ptr, 0xff, d_out.count * 2));  // NaN bits: rows never written show up
    gpu::mla_prefill_attention(reinterpret_cast<const __nv_bfloat16*>(d_q.ptr),
                               reinterpret_cast<const __nv_bfloat16*>(d_k_nope.ptr),
                               reinterpret_cast<const __nv_bfloat16*>(d_k_rot.ptr),
                               reinterpret_cast<const __nv_bfloat16*>(d_v.ptr), s, kScale,
                               reinterpret_cast<__nv_bfloat16*>(d_out.ptr), nullptr);
    TPB_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<std::uint16_t> out(d_out.count);
    d_out.download(out.data());
    return out;
  }
};


std::vector<PrefillCase> cases() {
  return {
      {"b1_q1_past0_h2", shape(1, 1, 0, 2), {}},
      {"b1_q1_past300_h2", shape(1, 1, 300, 2), {}},
      {"b2_q37_past0_h4", shape(2, 37, 0, 4), {}},
      {"b2_q100_past29_h3", shape(2, 100, 29, 3), {}},
      {"b1_q333_past1000_h2", shape(1, 333, 1000, 2), {}},
      {"b1_q1025_past0_h2", shape(1, 1025, 0, 2), {}},
      // Narrow heads: lanes idle in the value columns, an even key-row stride padded to odd.
      {"b3_q65_past64_h2_small_dims", shape(3, 65, 64, 2, 16, 8, 24), {}},
      {"b1_q8192_past0_h1_sampled", shape(1, 8192, 0, 1), {0, 1, 31, 32, 33, 4095, 4096, 4097, 8158, 8190, 8191}},
  };
}

// gtest prints the case by name, not as bytes.
void PrintTo(const PrefillCase& c, std::ostream* os) { *os << c.name; }

class MlaPrefillTest : public ::testing::TestWithParam<PrefillCase> {};

TEST_P(MlaPrefillTest, MatchesCpuReference) {
  TPB_REQUIRE_GPU();
  const PrefillCase& c = GetParam();
  const gpu::MlaPrefillShape& s = c.shape;
  std::uint64_t seed = 1469598103934665603ull;  // FNV-1a of the case name: fixed, distinct per case
  for (char ch : c.name) seed = (seed ^ static_cast<unsigned char>(ch)) * 1099511628211ull;
  PrefillRun run(s, seed);
  const std::vector<std::uint16_t> gpu = run.run();

  const std::vector<float> q = widen(run.q), k_nope = widen(run.k_nope), k_rot = widen(run.k_rot), v = widen(run.v);
  kernels::MlaShape sh;
  sh.heads = s.heads;
  sh.nope = s.nope;
  sh.rope = s.rope;
  sh.v_dim = s.v_dim;
  const std::int64_t kv_len = s.past + s.q_len, qk = s.nope + s.rope;
  std::vector<std::int64_t> rows = c.check_rows;
  if (rows.empty())
    for (std::int64_t i = 0; i < s.q_len; ++i) rows.push_back(i);

  std::size_t bad = 0, checked = 0;
  double worst_excess = -1, max_abs = 0, diff2 = 0, ref2 = 0;
  std::string worst_where;
  std::vector<float> ref(static_cast<std::size_t>(s.heads * s.v_dim));
  for (std::int64_t b = 0; b < s.batch; ++b) {
    for (std::int64_t i : rows) {
      // One query row at position past + i sees keys 0..past+i of its sequence.
      kernels::mla_attention_ref(q.data() + ((b * s.q_len + i) * s.heads) * qk, k_nope.data() + b * kv_len * s.heads * s.nope,
                                 k_rot.data() + b * kv_len * s.rope, v.data() + b * kv_len * s.heads * s.v_dim,
                                 ref.data(), 1, s.past + i + 1, s.past + i, sh, kScale);
      // Tolerance as in mla_decode_test: bf16 output rounding (<= 2^-8 |value|) plus
      // 4 sqrt(n) + 64 fp32 roundings of 2^-24 * max|v| for the accumulation order over the
      // n visible keys and the 192-term score dot products.
      const double n = static_cast<double>(s.past + i + 1);
      const double abs_tol = (4.0 * std::sqrt(n) + 64.0) * 0x1.0p-24 * kVAmp;
      for (std::int64_t e = 0; e < s.heads * s.v_dim; ++e) {
        const std::size_t gi = static_cast<std::size_t>((b * s.q_len + i) * s.heads * s.v_dim + e);
        const double g = bf16_to_float(gpu[gi]);
        const double r = ref[static_cast<std::size_t>(e)];
        const double tol = 0x1.0p-8 * std::fabs(r) + abs_tol;
        const double err = std::fabs(g - r);
        max_abs = std::max(max_abs, err);
        diff2 += err * err;
        ref2 += r * r;
        ++checked;
        if (!std::isfinite(g) || err > tol) ++bad;
        const double excess = std::isfinite(g) ? err / tol : 1e30;
        if (excess > worst_excess) {
          worst_excess = excess;
          worst_where = "batch " + std::to_string(b) + " row " + std::to_string(i) + " head " +
                        std::to_string(e / s.v_dim) + " col " + std::to_string(e % s.v_dim) + ": gpu " +
                        std::to_string(g) + " ref " + std::to_string(r);
        }
      }
    }
  }
  EXPECT_EQ(bad, 0u) << "mla_prefill vs mla_attention_ref: " << bad << " of " << checked
                     << " outside tolerance; worst at " << worst_where << ", " << worst_excess
                     << " of the budget; max abs error " << max_abs << ", rel-L2 " << std::sqrt(diff2 / std::max(ref2, 1e-300));
}

INSTANTIATE_TEST_SUITE_P(Shapes, MlaPrefillTest, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<PrefillCase>& info) { return info.param.name; });

TEST(MlaPrefill, SameInputsSameBits) {
  TPB_REQUIRE_GPU();
  PrefillRun run(shape(2, 100, 29, 3), 5);
  const std::vector<std::uint16_t> a = run.run();
  const std::vector<std::uint16_t> b = run.run();
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * 2)) << "two identical calls differ";
}

}  // namespace
}  // namespace tpb::test
