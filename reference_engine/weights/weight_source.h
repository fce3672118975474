// WeightSource: where a rank's weight slices come from — synthetic (a pure function of the
// seed, the global tensor name and the global index) or an HF safetensors checkpoint. The
// engine asks for the rectangular block of a global tensor that its shard owns; a source
// produces exactly that block in fp32 and never materialises the rest.
//
// Names are the canonical DeepseekV3 names without any prefix, with routed experts in the
// per-expert form ("model.layers.3.mlp.experts.17.gate_proj.weight"); a checkpoint source
// maps them onto `language_model.`-prefixed or fused expert tensors as the files hold them.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tpb/kernels/synthetic_weights.h"

namespace tpb {

// How the model holds a tensor, which decides what a source reads for it.
enum class WeightEncoding {
  dense,         // one value per element (a checkpoint's F32/BF16/F16 tensor; a synthetic value)
  int4_group32,  // INT4 pack-quantized, group 32 (tpb/kernels/int4_format.h): a checkpoint's
                 // weight_packed + weight_scale + weight_shape; synthetic int4_q and scales
};

struct WeightRequest {
  std::string name;                  // canonical global tensor name
  std::vector<std::int64_t> shape;   // global shape, [rows] or [rows, cols]
  std::int64_t row_begin = 0;        // first row of the block (dim 0), inclusive
  std::int64_t row_end = 0;          // end row of the block, exclusive
  std::int64_t col_begin = 0;        // first column (dim 1; 0 for 1-D), inclusive
  std::int64_t col_end = 0;          // end column, exclusive (1 for 1-D)
  synthetic::InitKind init = synthetic::InitKind::linear;  // synthetic value rule
  std::int64_t fan_in = 1;           // synthetic scale = 1/sqrt(fan_in) for linear weights
  WeightEncoding encoding = WeightEncoding::dense;  // int4_group32: a 2-D routed-expert weight of an int4 model

  std::int64_t rows() const { return row_end - row_begin; }
  std::int64_t cols() const { return col_end - col_begin; }
  std::int64_t global_cols() const { return shape.size() == 2 ? shape[1] : 1; }
};

// The whole tensor, replicated on every rank.
WeightRequest full_tensor(std::string name, std::vector<std::int64_t> shape, synthetic::InitKind init,
                          std::int64_t fan_in);

class WeightSource {
 public:
  virtual ~WeightSource() = default;
  // Writes the block [rows(), cols()] row-major into out. Throws InputError naming the
  // tensor when it is missing or its shape differs from request.shape.
  // An int4_group32 request gives the dequantized weight, int4::dequant(q, scale): the exact
  // bf16 value the format defines, in fp32.
  virtual void read(const WeightRequest& request, float* out) = 0;
  // The packed form of an int4_group32 request, for engines that keep it packed: `packed`
  // [rows(), cols() / 8] words and `scales` [rows(), cols() / 32] bf16 bits, row-major, as
  // int4_format.h lays them out. col_begin and cols() must be multiples of 32 (a group never
  // straddles a shard: the GPU engine checks its widths first).
  // The default refuses: a source without a packed form (a test's) serves bf16 models only.
  virtual void read_int4(const WeightRequest& request, std::uint32_t* packed, std::uint16_t* scales);
  // "synthetic(seed=7)" or "safetensors(DIR, 3 files)", for logs and results.
  virtual std::string describe() const = 0;
  // The seed of a synthetic source (whose values a device can generate itself from the
  // request, see tpb/kernels/gpu/synthetic_fill.h), nullopt for every other source.
  virtual std::optional<std::uint64_t> synthetic_seed() const { return std::nullopt; }
};

// Throws unless `request` is an int4_group32 block whose columns start and end on a group
// (what read_int4 needs); for the sources' read_int4.
void check_int4_window(const WeightRequest& request);

std::unique_ptr<WeightSource> make_synthetic_weights(std::uint64_t seed);

// Opens an HF checkpoint folder: model.safetensors.index.json (sharded), else every
// *.safetensors in it. `prefix` is tried first on every name ("language_model." for K2.5's
// nested config), then the bare name.
std::unique_ptr<WeightSource> open_safetensors_weights(const std::string& dir, const std::string& prefix);

}  // namespace tpb
