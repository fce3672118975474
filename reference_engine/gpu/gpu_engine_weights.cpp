// GpuEngine, loading: the constructor loads this rank's shard of the weights onto the device
// (the rows of the tensor-layout table, packed as plan_device_weights says, see
// reference_engine/model/device_weights.h), then sizes the KV cache and the step buffers
// (gpu_engine_buffers.cpp). Synthetic sources are generated on the device; others are read
// in fp32 on the host and converted.
#include "reference_engine/gpu/gpu_engine_impl.h"

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "reference_engine/gpu/synthetic_window.h"
#include "reference_engine/model/device_weights.h"
#include "reference_engine/model/rope_params.h"
#include "tpb/kernels/gpu/synthetic_fill.h"
#include "tpb/kernels/int4_format.h"
#include "tpb/kernels/rope_yarn.h"

namespace tpb {

using gpu_engine_internal::bf16;
using gpu_engine_internal::LayerW;
using gpu_engine_internal::check_mem_fraction;
using gpu_engine_internal::device_free_bytes;

namespace {

// Fills device blocks from a WeightSource: on the device for a synthetic source, else through
// the host in fp32 and converted on the device (one rounding, as float_to_bf16).
class DeviceLoader {
 public:
  DeviceLoader(WeightSource& source, cudaStream_t stream)
      : source_(source), seed_(source.synthetic_seed()), stream_(stream) {}
  ~DeviceLoader() {
    if (staging_ != nullptr) cudaFree(staging_);
  }

  void bf16_block(const WeightRequest& r, bf16* dst) {
    if (seed_) {
      gpu::synthetic_fill_bf16(gpu::synthetic_window(r, *seed_), dst, r.cols(), stream_);
      return;
    }
    float* staged = stage(r);
    gpu::convert_f32_to_bf16(staged, dst, r.rows() * r.cols(), stream_);
    TPB_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }
  // An INT4 block (int4_format.h): packed words and bf16 scales, generated on the device for a
  // synthetic source, else read packed on the host (never through fp32) and copied; and its
  // weight_shape entry, the block's [rows, cols] on this rank.
  void int4_block(const WeightRequest& r, std::uint32_t* packed, bf16* scales, std::int32_t* shape) {
    const std::int32_t rows_cols[2] = {static_cast<std::int32_t>(r.rows()), static_cast<std::int32_t>(r.cols())};
    TPB_CUDA_CHECK(cudaMemcpyAsync(shape, rows_cols, sizeof rows_cols, cudaMemcpyHostToDevice, stream_));
    TPB_CUDA_CHECK(cudaStreamSynchronize(stream_));  // rows_cols is a local
    if (seed_) {
      gpu::synthetic_fill_int4(gpu::synthetic_window(r, *seed_), packed, scales, stream_);
      return;
    }
    const std::size_t words = static_cast<std::size_t>(r.rows() * (r.cols() / int4::kPerWord));
    const std::size_t groups = static_cast<std::size_t>(r.rows() * (r.cols() / int4::kGroupSize));
    host_words_.resize(words);
    host_scales_.resize(groups);
    source_.read_int4(r, host_words_.data(), host_scales_.data());
    TPB_CUDA_CHECK(cudaMemcpyAsync(packed, host_words_.data(), words * 4, cudaMemcpyHostToDevice, stream_));
    TPB_CUDA_CHECK(cudaMemcpyAsync(scales, host_scales_.data(), groups * 2, cudaMemcpyHostToDevice, stream_));
    TPB_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }
  void f32_block(const WeightRequest& r, float* dst) {
    if (seed_) {
      gpu::synthetic_fill_f32(gpu::synthetic_window(r, *seed_), dst, r.cols(), stream_);
      return;
    }
    float* staged = stage(r);
    TPB_CUDA_CHECK(cudaMemcpyAsync(dst, staged, sizeof(float) * r.rows() * r.cols(), cudaMemcpyDeviceToDevice, stream_));
    TPB_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }

 private:
  float* stage(const WeightRequest& r) {
    const std::size_t n = static_cast<std::size_t>(r.rows() * r.cols());
    host_.resize(n);
    source_.read(r, host_.data());
    if (n > staging_count_) {
      TPB_CUDA_CHECK(cudaStreamSynchronize(stream_));
      if (staging_ != nullptr) TPB_CUDA_CHECK(cudaFree(staging_));
      staging_ = nullptr;
      TPB_CUDA_CHECK(cudaMalloc(&staging_, n * sizeof(float)));
      staging_count_ = n;
    }
    TPB_CUDA_CHECK(cudaMemcpyAsync(staging_, host_.data(), n * sizeof(float), cudaMemcpyHostToDevice, stream_));
    return staging_;
  }

  WeightSource& source_;
  std::optional<std::uint64_t> seed_;
  cudaStream_t stream_;
  std::vector<float> host_;
  std::vector<std::uint32_t> host_words_;
  std::vector<std::uint16_t> host_scales_;
  float* staging_ = nullptr;
  std::size_t staging_count_ = 0;
};

}  // namespace

GpuEngine::GpuEngine(const ModelConfig& config, Shard shard, Communicator& comm, WeightSource& weights,
                     GpuEngineOptions options)
    : config_(config), shard_(shard), dims_(shard_dims(config, shard)), comm_(&comm), options_(options) {
  config_.validate();
  TPB_CHECK(comm.size() == shard.tp && comm.rank() == shard.rank,
            "gpu engine shard (rank " << shard.rank << " of " << shard.tp << ") does not match the communicator (rank "
                                      << comm.rank() << " of " << comm.size() << ")");
  check_gpu_attention_widths(config, "gpu engine: model " + config.name);
  TPB_INPUT_CHECK(options_.max_batch > 0 && options_.max_len > 0,
                  "gpu engine: max_batch (" << options_.max_batch << ") and max_len (" << options_.max_len
                                            << ") must be positive");
  check_mem_fraction(options_.mem_fraction);
  if (options_.max_prefill_tokens <= 0) options_.max_prefill_tokens = options_.max_batch * options_.max_len;
  max_tokens_ = std::max(options_.max_batch, options_.max_prefill_tokens);
  // The formula's `total`: free device memory before anything of the engine's, weights included.
  free_before_weights_ = device_free_bytes(&device_total_bytes_);

  const ModelConfig& c = config_;
  const std::int64_t H = c.hidden_size, rope = c.qk_rope_head_dim;

  // The device plan first: it refuses widths the kernels cannot take (an INT4 expert width not
  // a multiple of 32) before anything is allocated.
  const TensorLayout layout = tensor_layout(c);
  const DeviceWeightPlan plan = plan_device_weights(layout, shard);
  TPB_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  impl_ = std::make_unique<Impl>();
  impl_->widths = attention_widths(config_);
  Impl& m = *impl_;
  m.linear.set_one_row_gemv(options_.one_row_gemv);
  m.side.linear.set_one_row_gemv(options_.one_row_gemv);

  // Weights: the layout table's tensors in its loading order (load_model_weights' too), in
  // the buffers plan_device_weights packs them into, each allocated just before its first
  // tensor is loaded. The loader's staging buffer is freed before the weights are measured
  // and the KV pool sized: it is not part of the model's footprint.
  std::optional<DeviceLoader> loader;
  loader.emplace(weights, stream_);
  const std::size_t before = m.bytes;
  std::vector<void*> buffers;  // device address of each of plan.buffers allocated so far
  for (const DeviceWeightBlock& block : plan.blocks) {
    const DeviceWeightBuffer& b = plan.buffers[block.buffer];
    const bool f32 = b.format == WeightFormat::f32;
    const bool int4 = b.format == WeightFormat::int4_group32;
    if (block.buffer == buffers.size()) {
      if (int4) buffers.push_back(m.alloc<unsigned char>(b.bytes()));
      else buffers.push_back(f32 ? static_cast<void*>(m.alloc<float>(b.elements)) : m.alloc<bf16>(b.elements));
    }
    if (int4) {
      auto* base = static_cast<unsigned char*>(buffers[block.buffer]);
      const WeightRequest& r = block.tensor.request;
      loader->int4_block(r, reinterpret_cast<std::uint32_t*>(base) + block.offset / int4::kPerWord,
                         reinterpret_cast<bf16*>(base + b.int4_scales_offset_bytes()) + block.offset / int4::kGroupSize,
                         reinterpret_cast<std::int32_t*>(base + b.int4_shapes_offset_bytes()) + 2 * block.index);
      continue;
    }
    if (f32)
      loader->f32_block(block.tensor.request, static_cast<float*>(buffers[block.buffer]) + block.offset);
    else
      loader->bf16_block(block.tensor.request, static_cast<bf16*>(buffers[block.buffer]) + block.offset);
  }
  m.layers.resize(static_cast<std::size_t>(c.num_hidden_layers));
  for (std::int64_t l = 0; l < c.num_hidden_layers; ++l) m.layers[l].moe = c.is_moe_layer(l);
  // Points the kernels' weight pointer for buffer b at p.
  auto place = [&](const DeviceWeightBuffer& b, void* p) {
    bf16* w = static_cast<bf16*>(p);
    if (b.format == WeightFormat::int4_group32) {
      TPB_CHECK(b.scope == TensorScope::routed_expert, "gpu engine: only routed experts are INT4");
      auto* base = static_cast<unsigned char*>(p);
      LayerW& lw = m.layers[b.layer];
      gpu_engine_internal::Int4Experts& x = b.slot == TensorSlot::down ? lw.experts_down_int4 : lw.experts_gate_up_int4;
      x.packed = reinterpret_cast<const std::uint32_t*>(base);
      x.scales = reinterpret_cast<const bf16*>(base + b.int4_scales_offset_bytes());
      return;
    }
    if (b.layer < 0) {
      switch (b.slot) {
        case TensorSlot::embed: m.embed = w; return;
        case TensorSlot::final_norm: m.final_norm = w; return;
        case TensorSlot::lm_head: m.lm_head = w; return;
        default: break;
      }
      TPB_FAIL("gpu engine: no model-level weight for slot " << static_cast<int>(b.slot));
    }
    LayerW& lw = m.layers[b.layer];
    const bool routed = b.scope == TensorScope::routed_expert;
    switch (b.slot) {
      case TensorSlot::input_norm: lw.input_norm = w; return;
      case TensorSlot::post_attn_norm: lw.post_norm = w; return;
      case TensorSlot::q_a: lw.q_a = w; return;
      case TensorSlot::q_a_norm: lw.q_a_norm = w; return;
      case TensorSlot::q_b: lw.q_b = w; return;
      case TensorSlot::kv_a: lw.kv_a = w; return;
      case TensorSlot::kv_a_norm: lw.kv_a_norm = w; return;
      case TensorSlot::kv_b: lw.kv_b = w; return;
      case TensorSlot::o: lw.o = w; return;
      case TensorSlot::router: lw.router = w; return;
      case TensorSlot::router_bias: lw.router_bias = static_cast<float*>(p); return;
      case TensorSlot::gate:  // the fused gate|up
        if (routed) {
          lw.experts_gate_up = w;
        } else {
          lw.mlp_gate_up = w;
          lw.mlp_inter = b.scope == TensorScope::dense_layer ? dims_.intermediate : dims_.shared_intermediate;
        }
        return;
      case TensorSlot::down: (routed ? lw.experts_down : lw.mlp_down) = w; return;
      default: break;
    }
    TPB_FAIL("gpu engine: no layer weight for slot " << static_cast<int>(b.slot));
  };
  std::size_t routed_weight_bytes = 0;  // every routed expert of every MoE layer
  layer_fixed_weight_bytes_.assign(static_cast<std::size_t>(c.num_hidden_layers), 0);
  for (std::size_t i = 0; i < plan.buffers.size(); ++i) {
    const DeviceWeightBuffer& b = plan.buffers[i];
    place(b, buffers[i]);
    if (b.scope == TensorScope::routed_expert)
      routed_weight_bytes += static_cast<std::size_t>(b.bytes());
    else if (b.layer >= 0)
      layer_fixed_weight_bytes_[static_cast<std::size_t>(b.layer)] += static_cast<std::size_t>(b.bytes());
  }
  if (c.tie_word_embeddings) m.lm_head = m.embed;
  TPB_CUDA_CHECK(cudaStreamSynchronize(stream_));
  loader.reset();
  weight_bytes_ = m.bytes - before;
  // A step gathers rows of the embedding table but reads every other weight except the
  // routed experts it does not choose (a tied table is read whole as the lm_head).
  const std::size_t gathered = c.tie_word_embeddings ? 0 : static_cast<std::size_t>(dims_.vocab * H) * sizeof(bf16);
  step_fixed_weight_bytes_ = weight_bytes_ - routed_weight_bytes - gathered;
  if (options_.on_phase) options_.on_phase("after_weights");

  const kernels::RopeTable table = kernels::make_rope_table(rope_params(c));
  TPB_CHECK(static_cast<std::int64_t>(table.inv_freq.size()) * 2 == rope, "rope table of the wrong width");
  rope_factor_ = table.attention_factor;
  attention_scale_ = static_cast<float>(c.attention_scale());

  inv_freq_host_ = table.inv_freq;
  try {
    allocate_buffers();
  } catch (...) {
    // An infeasible pool is an expected outcome (the caller records it): leave nothing behind.
    impl_.reset();
    cudaStreamDestroy(stream_);
    stream_ = nullptr;
    throw;
  }
}

GpuEngine::~GpuEngine() {
  if (stream_ != nullptr) cudaStreamSynchronize(stream_);
  for (auto& [b, exec] : graphs_) cudaGraphExecDestroy(exec);  // not drop_graphs(): it may throw
  for (cudaEvent_t e : phase_events_) cudaEventDestroy(e);
  impl_.reset();
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

std::size_t GpuEngine::routed_expert_bytes() const {
  if (config_.n_routed_experts == 0) return 0;
  const std::int64_t weights = 3 * dims_.moe_intermediate * config_.hidden_size;  // gate, up, down
  if (config_.quant == Quantization::int4)  // what a step reads: packed words and scales (not the shapes)
    return static_cast<std::size_t>(weights / 2 + weights / int4::kGroupSize * 2);
  return static_cast<std::size_t>(weights) * sizeof(bf16);
}

std::size_t GpuEngine::layer_fixed_weight_bytes(std::int64_t layer) const {
  TPB_CHECK(layer >= 0 && layer < config_.num_hidden_layers, "layer_fixed_weight_bytes: no layer " << layer);
  return layer_fixed_weight_bytes_[static_cast<std::size_t>(layer)];
}

}  // namespace tpb
