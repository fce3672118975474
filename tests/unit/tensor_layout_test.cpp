// The tensor-layout table (reference_engine/model/tensor_layout.h) and its three readers:
// the CPU loader, the GPU engine's device plan (device_weights.h, counted here without a GPU)
// and the planner's weight bytes agree byte for byte for every preset at TP 1, 2, 4 and 8.
//
// Pinned: the CPU loader's requests (name, global shape, window, init kind, fan-in, in call
// order) and every value it stores, for small presets, as digests taken from the loader as
// it was before the table existed. Synthetic weights are a pure function of the request, so
// equal requests mean bit-identical models on the CPU and on the GPU (which makes the same
// requests, RequestsAreTheCpuLoadersInOrder).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <ostream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "reference_engine/config/model_config.h"
#include "reference_engine/memory/weight_bytes.h"
#include "reference_engine/model/device_weights.h"
#include "reference_engine/model/model_weights.h"
#include "reference_engine/model/tensor_layout.h"
#include "reference_engine/weights/weight_source.h"
#include "tpb/check.h"

namespace tpb {
namespace {

// FNV-1a, 64 bit, over raw bytes.
struct Digest {
  std::uint64_t h = 1469598103934665603ull;
  void bytes(const void* p, std::size_t n) {
    const auto* b = static_cast<const unsigned char*>(p);
    for (std::size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
  }
  void i64(std::int64_t v) { bytes(&v, sizeof v); }
  void str(const std::string& s) {
    i64(static_cast<std::int64_t>(s.size()));
    bytes(s.data(), s.size());
  }
  void floats(const std::vector<float>& v) {
    i64(static_cast<std::int64_t>(v.size()));
    bytes(v.data(), v.size() * sizeof(float));
  }
};

// A synthetic source that digests every request and every value it hands out, in order, and
// keeps the requests.
class RecordingSource : public WeightSource {
 public:
  explicit RecordingSource(std::uint64_t seed) : inner_(make_synthetic_weights(seed)) {}
  void read(const WeightRequest& r, float* out) override {
    inner_->read(r, out);
    requests.push_back(r);
    d.str(r.name);
    for (std::int64_t s : r.shape) d.i64(s);
    d.i64(r.row_begin);
    d.i64(r.row_end);
    d.i64(r.col_begin);
    d.i64(r.col_end);
    d.i64(static_cast<std::int64_t>(r.init));
    d.i64(r.fan_in);
    d.bytes(out, static_cast<std::size_t>(r.rows() * r.cols()) * sizeof(float));
  }
  std::string describe() const override { return "recording"; }
  Digest d;
  std::vector<WeightRequest> requests;

 private:
  std::unique_ptr<WeightSource> inner_;
};

// Every field of a loaded shard, in a fixed order: where each tensor landed.
std::uint64_t fields_digest(const ModelWeights& w) {
  Digest d;
  auto mlp = [&](const MlpWeights& m) {
    d.floats(m.gate);
    d.floats(m.up);
    d.floats(m.down);
  };
  d.floats(w.embed);
  for (const LayerWeights& l : w.layers) {
    for (const auto* v : {&l.input_norm, &l.post_attn_norm, &l.q_a, &l.q_a_norm, &l.q_b, &l.kv_a, &l.kv_a_norm,
                          &l.kv_b, &l.o, &l.router, &l.router_bias})
      d.floats(*v);
    d.i64(l.moe ? 1 : 0);
    mlp(l.mlp);
    d.i64(static_cast<std::int64_t>(l.experts.size()));
    for (const MlpWeights& e : l.experts) mlp(e);
  }
  d.floats(w.final_norm);
  d.floats(w.lm_head);
  d.i64(static_cast<std::int64_t>(w.bytes));
  return d.h;
}

struct Pinned {
  std::string preset;
  Shard shard;
  std::uint64_t requests;  // RecordingSource's digest
  std::uint64_t fields;    // fields_digest
};

void PrintTo(const Pinned& p, std::ostream* os) {
  *os << p.preset << " rank " << p.shard.rank << " of " << p.shard.tp;
}

class CpuLoaderPinned : public ::testing::TestWithParam<Pinned> {};

TEST_P(CpuLoaderPinned, RequestsAndValuesAreTheLoaderBeforeTheTable) {
  const Pinned& p = GetParam();
  const ModelConfig config = load_model_config_by_name(p.preset);
  RecordingSource source(7);
  const ModelWeights w = load_model_weights(config, p.shard, source);
  EXPECT_EQ(source.d.h, p.requests) << std::hex << "0x" << source.d.h;
  EXPECT_EQ(fields_digest(w), p.fields) << std::hex << "0x" << fields_digest(w);
}

INSTANTIATE_TEST_SUITE_P(Presets, CpuLoaderPinned,
                         ::testing::Values(Pinned{"tiny-dsv3", {1, 2}, 0x1720cf83cc52bafcull, 0x2171cac67970158dull},
                                           Pinned{"tiny-dsv3-grouped", {3, 4}, 0x78d23457ccd682c5ull, 0x6700c20064fc4f3aull},
                                           Pinned{"small-dsv3", {0, 2}, 0x4c17e7fe8afdecf3ull, 0x5ae5fd79ded2dfa2ull}),
                         [](const auto& info) {
                           std::string n = info.param.preset + "_rank" + std::to_string(info.param.shard.rank) +
                                           "_of_" + std::to_string(info.param.shard.tp);
                           for (char& c : n)
                             if (c == '-') c = '_';
                           return n;
                         });


// ---- the three readers of the table agree ------------------------------------------------

// Every preset in scenarios/models (PresetListIsTheModelsFolder keeps the list whole).
const std::vector<std::string> kPresets = {"deepseek-v3", "kimi-k2.5", "small-dsv3", "tiny-dsv3", "tiny-dsv3-grouped"};

TEST(TensorLayout, PresetListIsTheModelsFolder) {
  std::vector<std::string> found;
  for (const auto& entry : std::filesystem::directory_iterator(models_dir()))
    if (entry.path().extension() == ".json") found.push_back(entry.path().stem().string());
  std::sort(found.begin(), found.end());
  EXPECT_EQ(found, kPresets) << "a preset was added or removed: keep kPresets (this file) in step";
}

struct ReaderCase {
  std::string preset;
  int tp;
};

// The text model: the engines load no vision tower, and the planner leaves it out the same
// way when it plans an engine case (memory_plan in suite/workloads/engine_case.cpp).
ModelConfig text_model(const std::string& preset) {
  ModelConfig c = load_model_config_by_name(preset);
  c.has_vision_tower = false;
  return c;
}

void PrintTo(const ReaderCase& c, std::ostream* os) { *os << c.preset << " tp " << c.tp; }

void expect_readers_agree(const ModelConfig& c, int tp) {
  const TensorLayout layout = tensor_layout(c);
  try {
    c.validate_tp(tp);
  } catch (const InputError&) {
    // The engines refuse this TP size (e.g. tp does not divide the heads); so do their counts.
    EXPECT_THROW(model_weights_bytes(c, Shard{0, tp}), InputError);
    EXPECT_THROW(plan_device_weights(layout, Shard{0, tp}), InputError);
    return;
  }
  // The GPU engine holds the model's quantization: bf16, or int4 routed experts.
  const Quantization gpu_quant = c.quant == Quantization::int4 ? Quantization::int4 : Quantization::bf16;
  const WeightBytes planned_f32 = weight_bytes(c, Quantization::f32, tp);
  const WeightBytes planned_bf16 = weight_bytes(c, gpu_quant, tp);
  for (int rank = 0; rank < tp; ++rank) {
    const Shard shard{rank, tp};
    EXPECT_EQ(static_cast<std::int64_t>(model_weights_bytes(c, shard)), planned_f32.bytes_per_rank) << "rank " << rank;
    const DeviceWeightPlan plan = plan_device_weights(layout, shard);
    EXPECT_EQ(plan.bytes(), planned_bf16.bytes_per_rank) << "rank " << rank;
    if (rank > 0) continue;
    // Family by family on rank 0, so that a disagreement names its tensor.
    std::map<std::string, std::int64_t> cpu, gpu;
    for_each_shard_tensor(layout, shard, [&](const ShardTensor& t) {
      cpu[t.row->family] += t.request.rows() * t.request.cols() * 4;
    });
    for (const DeviceWeightBlock& b : plan.blocks) {
      const WeightFormat f = plan.buffers[b.buffer].format;
      gpu[b.tensor.row->family] += tensor_bytes(f, b.tensor.request.rows(), b.tensor.request.cols());
    }
    auto bytes_of = [](const std::map<std::string, std::int64_t>& loaded, const std::string& family) {
      const auto it = loaded.find(family);
      return it == loaded.end() ? std::int64_t{-1} : it->second;  // -1: the loader has no such family
    };
    const auto f32_families = tensor_families(c, Quantization::f32);
    for (const TensorFamily& f : f32_families)
      EXPECT_EQ(bytes_of(cpu, f.name), family_bytes_per_rank(f, tp)) << f.name << " (CPU loader vs planner f32)";
    for (const TensorFamily& f : tensor_families(c, gpu_quant))
      EXPECT_EQ(bytes_of(gpu, f.name), family_bytes_per_rank(f, tp))
          << f.name << " (GPU loader vs planner " << quantization_name(gpu_quant) << ")";
    EXPECT_EQ(cpu.size(), f32_families.size()) << "the CPU loader loads a family the planner does not count";
    EXPECT_EQ(gpu.size(), f32_families.size()) << "the GPU loader loads a family the planner does not count";
  }
}

class ThreeReaders : public ::testing::TestWithParam<ReaderCase> {};

TEST_P(ThreeReaders, AgreeByteForByteOnEveryRank) { expect_readers_agree(text_model(GetParam().preset), GetParam().tp); }

// The same model with INT4 routed experts (a scenario's "quant": "int4"), where every rank's
// expert widths are whole groups of 32, as the GPU engine needs; elsewhere its plan refuses.
TEST_P(ThreeReaders, AgreeAtInt4) {
  ModelConfig c = text_model(GetParam().preset);
  c.quant = Quantization::int4;
  const int tp = GetParam().tp;
  const bool whole_groups = c.hidden_size % 32 == 0 && c.moe_intermediate_size % (32 * tp) == 0;
  if (!whole_groups) {
    bool divides = true;
    try {
      c.validate_tp(tp);
    } catch (const InputError&) {
      divides = false;
    }
    if (divides && c.n_routed_experts > 0) {
      EXPECT_THROW(plan_device_weights(tensor_layout(c), Shard{0, tp}), InputError);
    }
    return;
  }
  expect_readers_agree(c, tp);
}

std::vector<ReaderCase> reader_cases() {
  std::vector<ReaderCase> cases;
  for (const std::string& preset : kPresets)
    for (int tp : {1, 2, 4, 8}) cases.push_back({preset, tp});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(EveryPreset, ThreeReaders, ::testing::ValuesIn(reader_cases()), [](const auto& info) {
  std::string n = info.param.preset + "_tp" + std::to_string(info.param.tp);
  for (char& ch : n)
    if (ch == '-' || ch == '.') ch = '_';
  return n;
});

// The table's other branches, on variants of tiny-dsv3 no preset takes: q_proj without a q
// low-rank, a tied lm_head, no shared experts, two (fused) shared experts, every layer MoE,
// no routed experts at all.
TEST(TensorLayout, ThreeReadersAgreeOnEveryBranchOfTheTable) {
  const ModelConfig tiny = text_model("tiny-dsv3");
  const std::vector<std::pair<std::string, std::function<void(ModelConfig&)>>> variants = {
      {"no q_lora", [](ModelConfig& c) { c.q_lora_rank = 0; }},
      {"tied embeddings", [](ModelConfig& c) { c.tie_word_embeddings = true; }},
      {"no shared experts", [](ModelConfig& c) { c.n_shared_experts = 0; }},
      {"two shared experts", [](ModelConfig& c) { c.n_shared_experts = 2; }},
      {"every layer MoE", [](ModelConfig& c) { c.first_k_dense_replace = 0; }},
      {"dense only", [](ModelConfig& c) {
         c.n_routed_experts = c.n_shared_experts = c.num_experts_per_tok = 0;
         c.first_k_dense_replace = c.num_hidden_layers;
       }},
  };
  for (const auto& [what, change] : variants) {
    ModelConfig c = tiny;
    change(c);
    c.validate();
    for (int tp : {1, 2, 4}) {
      SCOPED_TRACE(what + ", tp " + std::to_string(tp));
      expect_readers_agree(c, tp);
    }
  }
}

// model_weights_bytes is what load_model_weights actually holds.
TEST(TensorLayout, LoadedBytesEqualTheCount) {
  for (const char* preset : {"tiny-dsv3", "small-dsv3"}) {
    const ModelConfig c = text_model(preset);
    for (int rank = 0; rank < 2; ++rank) {
      auto source = make_synthetic_weights(7);
      EXPECT_EQ(load_model_weights(c, Shard{rank, 2}, *source).bytes, model_weights_bytes(c, Shard{rank, 2}))
          << preset << " rank " << rank;
    }
  }
}

// ---- the table's rows ----------------------------------------------------------------------

TEST(TensorLayout, NamesAreTheCanonicalPerExpertNames) {
  const TensorLayout layout = tensor_layout(text_model("tiny-dsv3"));
  std::map<std::string, const TensorLayoutRow*> by_family;
  for (const TensorLayoutRow& row : layout.rows) by_family[row.family] = &row;
  EXPECT_EQ(tensor_name(*by_family.at("experts.gate_proj"), 3, 17), "model.layers.3.mlp.experts.17.gate_proj.weight");
  EXPECT_EQ(tensor_name(*by_family.at("o_proj"), 0, -1), "model.layers.0.self_attn.o_proj.weight");
  EXPECT_EQ(tensor_name(*by_family.at("embed_tokens"), -1, -1), "model.embed_tokens.weight");
  EXPECT_EQ(tensor_name(*by_family.at("shared_experts.down_proj"), 2, -1),
            "model.layers.2.mlp.shared_experts.down_proj.weight");
}

TEST(TensorLayout, DtypeRulesPerQuantization) {
  EXPECT_EQ(storage_format(StorageRule::plain, Quantization::fp8), WeightFormat::bf16);
  EXPECT_EQ(storage_format(StorageRule::fp32, Quantization::bf16), WeightFormat::f32);
  EXPECT_EQ(storage_format(StorageRule::linear, Quantization::fp8), WeightFormat::fp8_block128);
  EXPECT_EQ(storage_format(StorageRule::linear, Quantization::int4), WeightFormat::bf16);
  EXPECT_EQ(storage_format(StorageRule::routed_expert, Quantization::int4), WeightFormat::int4_group32);
  for (StorageRule r : {StorageRule::plain, StorageRule::fp32, StorageRule::linear, StorageRule::routed_expert})
    EXPECT_EQ(storage_format(r, Quantization::f32), WeightFormat::f32);  // the CPU engine
}

TEST(TensorLayout, TiedEmbeddingsHaveNoLmHeadRow) {
  ModelConfig c = text_model("tiny-dsv3");
  c.tie_word_embeddings = true;
  for (const TensorLayoutRow& row : tensor_layout(c).rows) EXPECT_NE(row.slot, TensorSlot::lm_head);
  auto source = make_synthetic_weights(7);
  const ModelWeights w = load_model_weights(c, Shard{0, 1}, *source);
  EXPECT_EQ(w.lm_head, w.embed);
}

// ---- the GPU engine's packing, checked on the CPU --------------------------------------

// The GPU loader asks the source for exactly the CPU loader's blocks, in the same order: a
// synthetic source gives both engines the same model (the GPU rounds it to bf16).
TEST(DeviceWeights, RequestsAreTheCpuLoadersInOrder) {
  const ModelConfig c = text_model("tiny-dsv3");
  const TensorLayout layout = tensor_layout(c);
  RecordingSource source(7);
  load_model_weights(c, Shard{1, 2}, source);
  const DeviceWeightPlan plan = plan_device_weights(layout, Shard{1, 2});
  ASSERT_EQ(plan.blocks.size(), source.requests.size());
  for (std::size_t i = 0; i < plan.blocks.size(); ++i) {
    const WeightRequest& g = plan.blocks[i].tensor.request;
    const WeightRequest& r = source.requests[i];
    EXPECT_TRUE(g.name == r.name && g.shape == r.shape && g.row_begin == r.row_begin && g.row_end == r.row_end &&
                g.col_begin == r.col_begin && g.col_end == r.col_end && g.init == r.init && g.fan_in == r.fan_in)
        << "block " << i << ": " << g.name << " vs " << r.name;
  }
}

// What the kernels index: gate|up fused (up after gate's rows), and a layer's routed experts
// contiguous at a fixed stride; the router bias in fp32. tiny-dsv3 at TP 2: H 64, dense
// intermediate 64 per rank, expert intermediate 16 per rank, 8 experts, layers 1 and 2 MoE.
TEST(DeviceWeights, PacksGateUpAndExpertsAsTheKernelsReadThem) {
  const ModelConfig c = text_model("tiny-dsv3");
  const TensorLayout layout = tensor_layout(c);
  const DeviceWeightPlan plan = plan_device_weights(layout, Shard{0, 2});
  const std::int64_t H = 64, I = 16, E = 8, dense_I = 64;
  auto block = [&](const std::string& name) -> const DeviceWeightBlock& {
    for (const DeviceWeightBlock& b : plan.blocks)
      if (b.tensor.request.name == name) return b;
    throw std::runtime_error("no block " + name);
  };
  const auto& dense_gate = block("model.layers.0.mlp.gate_proj.weight");
  const auto& dense_up = block("model.layers.0.mlp.up_proj.weight");
  EXPECT_EQ(dense_gate.buffer, dense_up.buffer);
  EXPECT_EQ(dense_up.offset, dense_I * H);
  EXPECT_EQ(plan.buffers[dense_gate.buffer].elements, 2 * dense_I * H);
  for (std::int64_t e = 0; e < E; ++e) {
    const std::string p = "model.layers.2.mlp.experts." + std::to_string(e);
    const auto& gate = block(p + ".gate_proj.weight");
    const auto& up = block(p + ".up_proj.weight");
    const auto& down = block(p + ".down_proj.weight");
    EXPECT_EQ(gate.buffer, block("model.layers.2.mlp.experts.0.gate_proj.weight").buffer);
    EXPECT_EQ(up.buffer, gate.buffer);
    EXPECT_EQ(gate.offset, e * 2 * I * H);
    EXPECT_EQ(up.offset, e * 2 * I * H + I * H);
    EXPECT_EQ(down.offset, e * H * I);
    EXPECT_EQ(plan.buffers[gate.buffer].elements, E * 2 * I * H);
    EXPECT_EQ(plan.buffers[down.buffer].elements, E * H * I);
  }
  const auto& bias = block("model.layers.1.mlp.gate.e_score_correction_bias");
  EXPECT_EQ(plan.buffers[bias.buffer].format, WeightFormat::f32);
  EXPECT_EQ(plan.buffers[block("model.layers.1.mlp.gate.weight").buffer].format, WeightFormat::bf16);
  // Every buffer is allocated before its first block and each block lies inside its buffer.
  std::size_t allocated = 0;
  for (const DeviceWeightBlock& b : plan.blocks) {
    ASSERT_LE(b.buffer, allocated);
    if (b.buffer == allocated) ++allocated;
    EXPECT_LE(b.offset + b.tensor.request.rows() * b.tensor.request.cols(), plan.buffers[b.buffer].elements);
  }
  EXPECT_EQ(allocated, plan.buffers.size());
}

}  // namespace
}  // namespace tpb
