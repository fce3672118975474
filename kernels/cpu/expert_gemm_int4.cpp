// Plain-loop reference of the INT4 routed-expert GEMM (see tpb/kernels/expert_gemm_int4.h).
#include "tpb/kernels/expert_gemm_int4.h"

#include <vector>

#include "tpb/check.h"
#include "tpb/kernels/int4_format.h"

namespace tpb::kernels {

void pack_int4_rows(const std::int8_t* q, std::int64_t rows, std::int64_t in, std::uint32_t* packed) {
  TPB_CHECK(rows >= 0 && in > 0, "pack_int4_rows: rows " << rows << " in " << in);
  const std::int64_t words = int4::packed_words(in);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t w = 0; w < words; ++w) {
      std::uint32_t word = 0;
      for (int j = 0; j < int4::kPerWord && w * int4::kPerWord + j < in; ++j) {
        const int v = q[r * in + w * int4::kPerWord + j];
        TPB_CHECK(v >= -8 && v <= 7, "pack_int4_rows: q = " << v << " at (" << r << ", " << w * 8 + j
                                                           << ") is outside [-8, 7]");
        word |= static_cast<std::uint32_t>(v + int4::kNibbleOffset) << (int4::kBits * j);
      }
      packed[r * words + w] = word;
    }
}

void dequant_int4_rows(const std::uint32_t* packed, const std::uint16_t* scale_bits, std::int64_t rows,
                       std::int64_t in, float* w) {
  TPB_CHECK(rows >= 0 && in > 0, "dequant_int4_rows: rows " << rows << " in " << in);
  const std::int64_t words = int4::packed_words(in), groups = int4::scale_groups(in);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t j = 0; j < in; ++j) {
      const int q = int4::unpack(packed[r * words + j / int4::kPerWord], static_cast<int>(j % int4::kPerWord));
      w[r * in + j] = int4::dequant(q, scale_bits[r * groups + j / int4::kGroupSize]);
    }
}

void expert_gemm_int4_ref(const float* x_sorted, const std::int32_t* offsets, std::int64_t experts,
                          const std::uint32_t* packed, const std::uint16_t* scale_bits, std::int64_t in,
                          std::int64_t out, float* y_sorted) {
  TPB_CHECK(experts >= 0 && in > 0 && out > 0,
            "expert_gemm_int4_ref: experts " << experts << " in " << in << " out " << out);
  if (experts == 0) return;
  TPB_CHECK(offsets[0] == 0, "expert_gemm_int4_ref: offsets[0] = " << offsets[0]);
  const std::int64_t words = int4::packed_words(in), groups = int4::scale_groups(in);
  std::vector<float> w_row(static_cast<std::size_t>(in));  // one dequantized weight row
  for (std::int64_t e = 0; e < experts; ++e) {
    const std::int64_t begin = offsets[e], end = offsets[e + 1];
    TPB_CHECK(end >= begin, "expert_gemm_int4_ref: offsets decrease at expert " << e);
    if (end == begin) continue;
    const std::uint32_t* pe = packed + e * out * words;
    const std::uint16_t* se = scale_bits + e * out * groups;
    for (std::int64_t o = 0; o < out; ++o) {
      dequant_int4_rows(pe + o * words, se + o * groups, 1, in, w_row.data());
      for (std::int64_t p = begin; p < end; ++p) {
        const float* xp = x_sorted + p * in;
        double acc = 0;
        for (std::int64_t j = 0; j < in; ++j) acc += static_cast<double>(xp[j]) * w_row[static_cast<std::size_t>(j)];
        y_sorted[p * out + o] = static_cast<float>(acc);
      }
    }
  }
}

}  // namespace tpb::kernels
