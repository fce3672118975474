// The memory planner: the serving formula, byte counts of every quantized format, TP
// sharding of every tensor family, communicator buffers, activations, and Kimi-K2.5 totals.
// Expected values are computed by hand in the comments next to them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "reference_engine/comm/backends.h"
#include "reference_engine/config/model_config.h"
#include "reference_engine/memory/attention_widths.h"
#include "reference_engine/memory/comm_bytes.h"
#include "reference_engine/memory/gpu_catalog.h"
#include "reference_engine/memory/planner.h"
#include "reference_engine/memory/weight_bytes.h"
#include "tpb/check.h"

namespace tpb {
namespace {

// Kimi-K2.5's text model (MODEL.md) in the nested form, with the vision_config fields of the
// released checkpoint (MoonViT: 27 blocks, hidden 1152, intermediate 4304).
nlohmann::json kimi_k25_json(bool detailed_vision) {
  auto j = nlohmann::json::parse(R"({
    "model_type": "kimi_k25",
    "text_config": {
      "model_type": "deepseek_v3", "vocab_size": 163840, "hidden_size": 7168,
      "intermediate_size": 18432, "moe_intermediate_size": 2048, "num_hidden_layers": 61,
      "first_k_dense_replace": 1, "num_attention_heads": 64, "num_key_value_heads": 64,
      "q_lora_rank": 1536, "kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64,
      "v_head_dim": 128, "n_routed_experts": 384, "n_shared_experts": 1, "num_experts_per_tok": 8,
      "n_group": 1, "topk_group": 1, "routed_scaling_factor": 2.827, "norm_topk_prob": true,
      "scoring_func": "sigmoid", "topk_method": "noaux_tc", "rms_norm_eps": 1e-5,
      "max_position_embeddings": 262144, "rope_theta": 50000.0, "tie_word_embeddings": false,
      "rope_scaling": {"type": "yarn", "factor": 64.0, "beta_fast": 32.0, "beta_slow": 1.0,
                       "mscale": 1.0, "mscale_all_dim": 1.0, "original_max_position_embeddings": 4096}
    }})");
  if (detailed_vision) {
    j["vision_config"] = nlohmann::json::parse(R"({
      "vt_hidden_size": 1152, "vt_intermediate_size": 4304, "vt_num_hidden_layers": 27,
      "vt_num_attention_heads": 16, "patch_size": 14, "init_pos_emb_height": 64,
      "init_pos_emb_width": 64, "init_pos_emb_time": 4, "merge_kernel_size": [2, 2],
      "mm_hidden_size": 1152, "text_hidden_size": 7168})");
  } else {
    j["vision_config"] = {{"model_type", "moonvit"}};
  }
  return j;
}

ModelConfig kimi(bool vision = false) {
  ModelConfig c = parse_model_config(kimi_k25_json(true), "kimi.json");
  c.has_vision_tower = vision;
  return c;
}

// tests/unit/model_config_test.cpp's tiny model shape, hand-checkable.
ModelConfig tiny() {
  return parse_model_config(nlohmann::json::parse(R"({
    "model_type": "deepseek_v3", "vocab_size": 256, "hidden_size": 64, "intermediate_size": 128,
    "moe_intermediate_size": 32, "num_hidden_layers": 3, "first_k_dense_replace": 1,
    "num_attention_heads": 4, "num_key_value_heads": 4, "q_lora_rank": 32, "kv_lora_rank": 32,
    "qk_nope_head_dim": 16, "qk_rope_head_dim": 8, "v_head_dim": 16, "n_routed_experts": 8,
    "n_shared_experts": 1, "num_experts_per_tok": 2, "n_group": 1, "topk_group": 1,
    "rms_norm_eps": 1e-6})"),
                            "tiny.json");
}

const TensorFamily& family(const std::vector<TensorFamily>& fs, const std::string& name) {
  for (const auto& f : fs)
    if (f.name == name) return f;
  throw std::runtime_error("no family " + name);
}

// ---- bytes of one tensor in each format ------------------------------------------------

TEST(WeightBytes, Bf16IsTwoBytesPerElement) {
  EXPECT_EQ(tensor_bytes(WeightFormat::bf16, 3, 5), 30);
  EXPECT_EQ(tensor_bytes(WeightFormat::bf16, 7168, 1), 14336);
  EXPECT_EQ(tensor_bytes(WeightFormat::f32, 384, 1), 1536);
}

TEST(WeightBytes, Fp8HasOneFp32ScalePer128x128Block) {
  EXPECT_EQ(tensor_bytes(WeightFormat::fp8_block128, 128, 128), 16384 + 4);
  // Ragged edges round up: 129 x 200 -> 2 x 2 blocks.
  EXPECT_EQ(tensor_bytes(WeightFormat::fp8_block128, 129, 200), 129 * 200 + 4 * 4);
  // A Kimi expert down_proj [7168, 2048]: 56 x 16 blocks.
  EXPECT_EQ(tensor_bytes(WeightFormat::fp8_block128, 7168, 2048), 14680064 + 56 * 16 * 4);
  // One row or column still takes a whole block's scale.
  EXPECT_EQ(tensor_bytes(WeightFormat::fp8_block128, 1, 1), 1 + 4);
}

TEST(WeightBytes, Int4PacksEightNibblesAndABf16ScalePer32Inputs) {
  // [2048, 7168]: weight_packed 2048 x 896 int32, weight_scale 2048 x 224 bf16, weight_shape 8 B.
  EXPECT_EQ(tensor_bytes(WeightFormat::int4_group32, 2048, 7168), 2048 * 896 * 4 + 2048 * 224 * 2 + 8);
  // 0.5 B + 2/32 B per element, plus the 8 B shape.
  EXPECT_EQ(tensor_bytes(WeightFormat::int4_group32, 64, 64), 64 * 64 * 9 / 16 + 8);
  // Ragged input dim 33: 5 packed int32 and 2 groups per row.
  EXPECT_EQ(tensor_bytes(WeightFormat::int4_group32, 4, 33), 4 * 5 * 4 + 4 * 2 * 2 + 8);
}

TEST(WeightBytes, QuantizationNamesParseAndRejectOthers) {
  EXPECT_EQ(parse_quantization("int4", "--quant"), Quantization::int4);
  EXPECT_EQ(parse_quantization("fp8", "--quant"), Quantization::fp8);
  EXPECT_EQ(parse_quantization("bf16", "--quant"), Quantization::bf16);
  try {
    parse_quantization("nvfp4", "--quant");
    FAIL() << "no throw";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("--quant: expected bf16, fp8, int4 or f32, got 'nvfp4'"), std::string::npos);
  }
}

// ---- which tensors each quantization touches -------------------------------------------

TEST(WeightBytes, EachQuantizationTouchesTheDocumentedFamilies) {
  const ModelConfig c = kimi();
  const auto bf16 = tensor_families(c, Quantization::bf16);
  const auto fp8 = tensor_families(c, Quantization::fp8);
  const auto int4 = tensor_families(c, Quantization::int4);
  for (const auto& f : bf16) EXPECT_TRUE(f.format == WeightFormat::bf16 || f.format == WeightFormat::f32) << f.name;
  const std::vector<std::string> linear = {"q_a_proj", "q_b_proj", "kv_a_proj_with_mqa", "kv_b_proj", "o_proj",
                                           "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj",
                                           "shared_experts.gate_proj", "shared_experts.up_proj",
                                           "shared_experts.down_proj"};
  const std::vector<std::string> experts = {"experts.gate_proj", "experts.up_proj", "experts.down_proj"};
  const std::vector<std::string> never = {"embed_tokens", "lm_head", "mlp.gate", "input_layernorm",
                                          "post_attention_layernorm", "q_a_layernorm", "kv_a_layernorm", "norm"};
  for (const auto& n : linear) {
    EXPECT_EQ(family(fp8, n).format, WeightFormat::fp8_block128) << n;
    EXPECT_EQ(family(int4, n).format, WeightFormat::bf16) << n;
  }
  for (const auto& n : experts) {
    EXPECT_EQ(family(fp8, n).format, WeightFormat::fp8_block128) << n;
    EXPECT_EQ(family(int4, n).format, WeightFormat::int4_group32) << n;
  }
  for (const auto& n : never) {
    EXPECT_EQ(family(fp8, n).format, WeightFormat::bf16) << n;
    EXPECT_EQ(family(int4, n).format, WeightFormat::bf16) << n;
  }
  EXPECT_EQ(family(int4, "mlp.gate.e_score_correction_bias").format, WeightFormat::f32);
}

// ---- TP sharding of every family ---------------------------------------------------------

TEST(WeightBytes, EveryFamilyHasTheTpSplitOfModelMd) {
  const auto fs = tensor_families(kimi(), Quantization::bf16);
  const std::map<std::string, TpSplit> expected = {
      {"embed_tokens", TpSplit::column},      {"q_a_proj", TpSplit::replicated},
      {"q_a_layernorm", TpSplit::replicated}, {"q_b_proj", TpSplit::column},
      {"kv_a_proj_with_mqa", TpSplit::replicated}, {"kv_a_layernorm", TpSplit::replicated},
      {"kv_b_proj", TpSplit::column},         {"o_proj", TpSplit::row},
      {"input_layernorm", TpSplit::replicated}, {"post_attention_layernorm", TpSplit::replicated},
      {"mlp.gate_proj", TpSplit::column},     {"mlp.up_proj", TpSplit::column},
      {"mlp.down_proj", TpSplit::row},        {"mlp.gate", TpSplit::replicated},
      {"mlp.gate.e_score_correction_bias", TpSplit::replicated},
      {"shared_experts.gate_proj", TpSplit::column}, {"shared_experts.up_proj", TpSplit::column},
      {"shared_experts.down_proj", TpSplit::row}, {"experts.gate_proj", TpSplit::column},
      {"experts.up_proj", TpSplit::column},   {"experts.down_proj", TpSplit::row},
      {"norm", TpSplit::replicated},          {"lm_head", TpSplit::column}};
  EXPECT_EQ(fs.size(), expected.size());
  for (const auto& [name, split] : expected) EXPECT_EQ(family(fs, name).split, split) << name;
  // Experts split by the intermediate dim: gate/up rows, down columns.
  EXPECT_EQ(shard_shape(family(fs, "experts.gate_proj"), 8).rows, 256);
  EXPECT_EQ(shard_shape(family(fs, "experts.gate_proj"), 8).cols, 7168);
  EXPECT_EQ(shard_shape(family(fs, "experts.down_proj"), 8).rows, 7168);
  EXPECT_EQ(shard_shape(family(fs, "experts.down_proj"), 8).cols, 256);
  // Heads: 64 / 8 = 8 heads of 192 (q) and 256 (kv_b) rows; o_proj 8 x 128 input columns.
  EXPECT_EQ(shard_shape(family(fs, "q_b_proj"), 8).rows, 8 * 192);
  EXPECT_EQ(shard_shape(family(fs, "kv_b_proj"), 8).rows, 8 * 256);
  EXPECT_EQ(shard_shape(family(fs, "o_proj"), 8).cols, 8 * 128);
  EXPECT_EQ(shard_shape(family(fs, "embed_tokens"), 8).rows, 163840 / 8);
  // Counts: 61 attention layers, 60 MoE layers x 384 experts, 1 dense layer.
  EXPECT_EQ(family(fs, "o_proj").count, 61);
  EXPECT_EQ(family(fs, "experts.up_proj").count, 60 * 384);
  EXPECT_EQ(family(fs, "mlp.up_proj").count, 1);
}

class ShardingTest : public ::testing::TestWithParam<std::tuple<Quantization, int>> {};

TEST_P(ShardingTest, ReplicatedOnEveryRankSplitSumsToGlobal) {
  const auto [quant, tp] = GetParam();
  const ModelConfig c = kimi();
  std::int64_t per_rank = 0, replicated = 0, split_global = 0, unsharded = 0;
  for (const auto& f : tensor_families(c, quant)) {
    const std::int64_t r = family_bytes_per_rank(f, tp), g = family_bytes_global(f);
    per_rank += r;
    unsharded += g;
    if (f.split == TpSplit::replicated) {
      EXPECT_EQ(r, g) << f.name << ": a replicated tensor is whole on every rank";
      replicated += g;
    } else {
      // Kimi's shards align with the 128 blocks and 32 groups at TP 1/2/8, so nothing rounds;
      // only int4's 8-byte weight_shape is held whole by every rank's shard.
      const std::int64_t shape_copies =
          f.format == WeightFormat::int4_group32 ? (tp - 1) * f.count * kInt4ShapeMetaBytes : 0;
      EXPECT_EQ(r * tp, g + shape_copies) << f.name << ": the shards of a split tensor sum to the tensor";
      split_global += g + shape_copies;
    }
  }
  const WeightBytes w = weight_bytes(c, quant, tp);
  EXPECT_EQ(w.bytes_per_rank, per_rank);
  EXPECT_EQ(w.bytes_per_rank, replicated + split_global / tp);
  EXPECT_EQ(w.bytes_global, unsharded);
}

INSTANTIATE_TEST_SUITE_P(KimiK25, ShardingTest,
                         ::testing::Combine(::testing::Values(Quantization::bf16, Quantization::fp8, Quantization::int4),
                                            ::testing::Values(1, 2, 8)),
                         [](const auto& info) {
                           return std::string(quantization_name(std::get<0>(info.param))) + "_tp" +
                                  std::to_string(std::get<1>(info.param));
                         });

TEST(WeightBytes, UnalignedShardsRoundTheirScalesUpPerRank) {
  // 256 output rows split 8 ways: 32 rows per rank, each rank still stores a full block row
  // of fp8 scales, so the shards hold 8 x 2 scales where the whole tensor holds 2 x 2.
  const TensorFamily f{"x", "attention", 256, 256, 1, TpSplit::column, WeightFormat::fp8_block128};
  EXPECT_EQ(family_bytes_per_rank(f, 8), 32 * 256 + 1 * 2 * 4);
  EXPECT_EQ(family_bytes_global(f), 256 * 256 + 2 * 2 * 4);
  EXPECT_GT(8 * family_bytes_per_rank(f, 8), family_bytes_global(f));
}

TEST(WeightBytes, TpThatDoesNotDivideIsAnInputError) {
  const TensorFamily f{"x", "attention", 10, 4, 1, TpSplit::column, WeightFormat::bf16};
  EXPECT_THROW(shard_shape(f, 4), InputError);
}

// ---- model totals ----------------------------------------------------------------------

TEST(WeightBytes, FamiliesCountEveryParameterOfTheConfig) {
  for (const ModelConfig& c : {kimi(), tiny()}) {
    const WeightBytes w = weight_bytes(c, Quantization::bf16, 1);
    EXPECT_EQ(w.elements_global, c.parameter_count());
    // bf16 everywhere but the fp32 router bias (E per MoE layer, 2 extra bytes each).
    std::int64_t moe_layers = 0;
    for (std::int64_t l = 0; l < c.num_hidden_layers; ++l) moe_layers += c.is_moe_layer(l);
    EXPECT_EQ(w.bytes_global, 2 * c.parameter_count() + 2 * c.n_routed_experts * moe_layers);
  }
}

TEST(WeightBytes, KimiK25Bf16IsAbout2Point05TB) {
  // 1,026,408,232,448 parameters x 2 B + 2 B extra per fp32 router-bias element (384 x 60).
  const WeightBytes w = weight_bytes(kimi(), Quantization::bf16, 1);
  EXPECT_EQ(w.bytes_global, 2052816510976);
  EXPECT_NEAR(static_cast<double>(w.bytes_global) / 1e12, 2.05, 0.01);
}

TEST(WeightBytes, KimiK25Int4IsAbout0Point59TB) {
  // Routed experts: 384 experts x 60 MoE layers x 3 tensors, each [2048, 7168] or [7168, 2048]
  // in int4 group 32 = 8,257,544 B (0.5625 B per weight + 8 B shape), = 570,761,441,280 B.
  // Everything else bf16: (1,026,408,232,448 - 23,040 x 44,040,192 expert weights) x 2 B
  // + 2 B more for each fp32 router-bias element (384 x 60) = 23,444,463,616 B.
  const std::int64_t one = 2048LL * 896 * 4 + 2048LL * 224 * 2 + 8;
  const std::int64_t experts = 384LL * 60 * 3 * one;
  const std::int64_t params = kimi().parameter_count();
  const std::int64_t rest = 2 * (params - 384LL * 60 * 3 * 2048 * 7168) + 2 * 384 * 60;
  EXPECT_EQ(rest, 23444463616);
  const WeightBytes w = weight_bytes(kimi(), Quantization::int4, 1);
  EXPECT_EQ(experts, 570761441280);
  EXPECT_EQ(w.bytes_global, experts + rest);
  EXPECT_NEAR(static_cast<double>(w.bytes_global) / 1e12, 0.594, 0.001);
  for (const auto& g : w.groups)
    if (g.group == "routed_experts") {
      EXPECT_EQ(g.bytes_global, experts);
    }
}

TEST(WeightBytes, KimiK25Int4PerRankAtTp8) {
  // Split tensors / 8 + replicated ones whole (q_a, kv_a, router, norms) + each rank's own
  // 8-byte weight_shape of its 384 x 60 x 3 int4 expert shards.
  const WeightBytes w = weight_bytes(kimi(), Quantization::int4, 8);
  const auto fs = tensor_families(kimi(), Quantization::int4);
  std::int64_t replicated = 0;
  for (const auto& f : fs)
    if (f.split == TpSplit::replicated) replicated += family_bytes_global(f);
  const std::int64_t shapes = 384LL * 60 * 3 * 8;
  EXPECT_EQ(w.bytes_per_rank, (w.bytes_global - replicated - shapes) / 8 + shapes + replicated);
  EXPECT_GT(replicated, 2'000'000'000);  // 61 x (q_a 11.0 M + kv_a 4.1 M) + 60 x router 2.75 M params, bf16
  EXPECT_NEAR(static_cast<double>(w.bytes_per_rank) / 1e9, 76.2, 0.3);
}

TEST(WeightBytes, VisionTowerFromConfigOrLabelledAssumption) {
  ModelConfig detailed = parse_model_config(kimi_k25_json(true), "kimi.json");
  std::string note;
  const TensorFamily v = vision_tower_family(detailed, &note);
  // MoonViT 27 x 15,239,504 + patch embed 678,528 + pos-emb 4,718,592 + final norm 2,304
  // + projector 2,304 + 21,238,272 + 33,037,312 = 471,143,920 parameters.
  EXPECT_EQ(v.rows * v.cols * v.count, 471143920);
  EXPECT_EQ(v.split, TpSplit::replicated);
  EXPECT_NE(note.find("sized from vision_config"), std::string::npos) << note;
  const WeightBytes with = weight_bytes(detailed, Quantization::int4, 8);
  EXPECT_EQ(with.bytes_per_rank - weight_bytes(kimi(false), Quantization::int4, 8).bytes_per_rank, 2 * 471143920);

  ModelConfig stub = parse_model_config(kimi_k25_json(false), "kimi.json");
  vision_tower_family(stub, &note);
  EXPECT_NE(note.find("ASSUMPTION"), std::string::npos) << note;
  EXPECT_EQ(weight_bytes(stub, Quantization::bf16, 1).elements_global, stub.parameter_count() + 400'000'000);
}

// ---- communicator buffers -----------------------------------------------------------------

TEST(CommBytes, CustomAllreduceIsThreeMaxMessagesPerRank) {
  EXPECT_EQ(custom_allreduce_bytes(8 * kMiB, 8), 24 * kMiB + kCustomAllreduceSignalBytes);
  EXPECT_EQ(custom_allreduce_bytes(16 * kMiB, 2), 48 * kMiB + kCustomAllreduceSignalBytes);
  EXPECT_EQ(custom_allreduce_bytes(8 * kMiB, 1), 0);
}

TEST(CommBytes, NcclIsChannelsTimesOneRoundedConnection) {
  // 4 MiB + 512 KiB + 4800 KiB = 9.19 MiB -> 10 MiB at 2 MiB granularity.
  EXPECT_EQ(nccl_buffer_bytes(1), 0);
  EXPECT_EQ(nccl_buffer_bytes(2, 32), 320 * kMiB);
  EXPECT_EQ(nccl_buffer_bytes(8, 32), 320 * kMiB);
  EXPECT_EQ(nccl_buffer_bytes(8, 16), 160 * kMiB);
}

TEST(CommBytes, BackendsCombineTheirBuffers) {
  const auto custom = comm_bytes("custom-oneshot", 8, 8 * kMiB, 32, "--allreduce");
  const auto two = comm_bytes("custom-twoshot", 8, 8 * kMiB, 32, "--allreduce");
  const auto nccl = comm_bytes("nccl", 8, 8 * kMiB, 32, "--allreduce");
  const auto both = comm_bytes("auto", 8, 8 * kMiB, 32, "--allreduce");
  // The custom backends hold NCCL's buffers too (their fallback and all_gather), as auto does.
  EXPECT_EQ(custom.custom_bytes, custom_allreduce_bytes(8 * kMiB, 8));
  EXPECT_EQ(custom.total(), custom_allreduce_bytes(8 * kMiB, 8) + nccl_buffer_bytes(8, 32));
  EXPECT_EQ(two.total(), custom.total());
  EXPECT_EQ(nccl.total(), nccl_buffer_bytes(8, 32));
  EXPECT_EQ(both.total(), custom.total());
  EXPECT_EQ(comm_bytes("shm", 8, 8 * kMiB, 32, "--allreduce").total(), 0);
  EXPECT_THROW(comm_bytes("gloo", 8, 8 * kMiB, 32, "--allreduce"), InputError);
}

// Shared placement: NCCL over its socket transport, measured per rank on one H200 (NCCL
// 2.28.9): 415,236,096 B at TP 2 and 444,596,224 B at TP 4, = 368 MiB + 14 MiB x world.
TEST(CommBytes, NcclOverSocketsIsTheMeasuredLine) {
  EXPECT_EQ(nccl_socket_buffer_bytes(2), 415236096);  // 396 MiB, measured
  EXPECT_EQ(nccl_socket_buffer_bytes(4), 444596224);  // 424 MiB, measured
  EXPECT_EQ(nccl_socket_buffer_bytes(1), 0);          // no peers
  EXPECT_EQ(nccl_socket_buffer_bytes(8), 480 * kMiB); // the line, an estimate
  EXPECT_THROW(nccl_socket_buffer_bytes(0), InputError);
  // comm_bytes takes the socket figure for NCCL and for the custom backends' own NCCL
  // communicator; the channel count does not apply; without the flag nothing changes.
  EXPECT_EQ(comm_bytes("nccl", 2, 8 * kMiB, 32, "--allreduce", true).nccl_bytes, 415236096);
  EXPECT_EQ(comm_bytes("nccl", 2, 8 * kMiB, 16, "--allreduce", true).nccl_bytes, 415236096);
  const auto custom = comm_bytes("custom-oneshot", 4, 8 * kMiB, 32, "--allreduce", true);
  EXPECT_EQ(custom.custom_bytes, custom_allreduce_bytes(8 * kMiB, 4));
  EXPECT_EQ(custom.nccl_bytes, 444596224);
  EXPECT_EQ(comm_bytes("nccl", 2, 8 * kMiB, 32, "--allreduce").nccl_bytes, 320 * kMiB);
  EXPECT_EQ(comm_bytes("shm", 2, 8 * kMiB, 32, "--allreduce", true).total(), 0);
}

// ---- the interconnect: whether the custom allreduce can run ----------------------------------

TEST(CommBytes, InterconnectNamesParseAndRejectOthers) {
  for (Interconnect i : {Interconnect::nvlink, Interconnect::pcie_p2p, Interconnect::pcie_no_p2p})
    EXPECT_EQ(parse_interconnect(interconnect_name(i), "--interconnect"), i);
  EXPECT_STREQ(interconnect_name(Interconnect::pcie_no_p2p), "pcie-no-p2p");
  for (const char* bad : {"pcie", "NVLink", "", "pcie_no_p2p"}) {
    try {
      parse_interconnect(bad, "plan: --interconnect");
      ADD_FAILURE() << "'" << bad << "' parsed";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("plan: --interconnect: expected nvlink, pcie-p2p or pcie-no-p2p, got '" +
                                           std::string(bad) + "'"),
                std::string::npos)
          << e.what();
    }
  }
}

// The rules: the custom IPC allreduce needs CUDA peer access, which pcie-no-p2p lacks; on more
// than two GPUs joined only by PCIe it stays off unless forced (comm.custom_on_pcie), as SGLang,
// vLLM and tpbench's communicator keep it. Every backend of the table on every interconnect, at
// TP 2 and 8, forced or not: a backend with custom buffers plans NCCL's alone where a rule
// blocks it (tpbench's custom communicator then runs on NCCL); nothing else changes.
TEST(CommBytes, WhereTheCustomAllreduceDoesNotRunItsBackendsPlanNcclOnly) {
  EXPECT_EQ(custom_allreduce_blocker(Interconnect::nvlink, 8, false), "");
  EXPECT_EQ(custom_allreduce_blocker(Interconnect::pcie_p2p, 2, false), "") << "two PCIe GPUs: on";
  EXPECT_NE(custom_allreduce_blocker(Interconnect::pcie_p2p, 3, false).find("more than two GPUs joined only by PCIe"),
            std::string::npos);
  EXPECT_EQ(custom_allreduce_blocker(Interconnect::pcie_p2p, 8, true), "") << "forced";
  EXPECT_NE(custom_allreduce_blocker(Interconnect::pcie_no_p2p, 2, true).find("CUDA IPC peer access"), std::string::npos)
      << "forcing cannot make peer access";
  for (const BackendInfo* row : backend_table())
    for (int tp : {2, 8})
      for (bool forced : {false, true}) {
        const CommBytes nvlink = comm_bytes(row->name, tp, 8 * kMiB, 32, "--allreduce", false, Interconnect::nvlink);
        for (Interconnect ic : {Interconnect::nvlink, Interconnect::pcie_p2p, Interconnect::pcie_no_p2p}) {
          const CommBytes b = comm_bytes(row->name, tp, 8 * kMiB, 32, "--allreduce", false, ic, forced);
          const bool rule = ic == Interconnect::pcie_no_p2p || (ic == Interconnect::pcie_p2p && tp > 2 && !forced);
          const bool blocked = row->buffers == BackendBuffers::custom_and_nccl && rule;
          const std::string where = std::string(row->name) + " on " + interconnect_name(ic) + " at TP " +
                                    std::to_string(tp) + (forced ? ", forced" : "");
          EXPECT_EQ(b.custom_blocked, blocked) << where;
          EXPECT_EQ(b.blocked_reason, blocked ? custom_allreduce_blocker(ic, tp, forced) : "") << where;
          EXPECT_EQ(b.nccl_bytes, nvlink.nccl_bytes) << where;
          EXPECT_EQ(b.custom_bytes, blocked ? 0 : nvlink.custom_bytes) << where;
        }
      }
  // The custom buffers themselves: 3 x 8 MiB + the 4 KiB signal, on NVLink and PCIe P2P alike.
  EXPECT_EQ(comm_bytes("auto", 8, 8 * kMiB, 32, "--allreduce", false, Interconnect::pcie_p2p, true).custom_bytes,
            24 * kMiB + 4096);
  EXPECT_EQ(comm_bytes("auto", 2, 8 * kMiB, 32, "--allreduce", false, Interconnect::pcie_p2p).custom_bytes,
            24 * kMiB + 4096);
  // Ranks sharing one GPU open each other's buffers as local memory: neither rule applies.
  for (Interconnect ic : {Interconnect::pcie_no_p2p, Interconnect::pcie_p2p}) {
    const CommBytes shared = comm_bytes("auto", 4, 8 * kMiB, 32, "--allreduce", true, ic);
    EXPECT_FALSE(shared.custom_blocked) << interconnect_name(ic);
    EXPECT_EQ(shared.custom_bytes, custom_allreduce_bytes(8 * kMiB, 4));
  }
}

TEST(GpuCatalog, KnowsTheBoardsCaseInsensitively) {
  // cudaMemGetInfo's total is nvidia-smi's total less the driver reserve.
  EXPECT_EQ(find_gpu("h200").smi_total_mib, 143771);
  for (const auto& g : gpu_catalog()) EXPECT_EQ(g.total_bytes, (g.smi_total_mib - g.reserved_mib) * kMiB) << g.name;
  EXPECT_EQ(find_gpu("H20-96GB").smi_total_mib, 97871);
  EXPECT_EQ(find_gpu("H100-80GB").family, "hopper");
  // The footprint before the weights: context plus the libraries an inference process loads,
  // as the tpbench worker measured it on an H200 (527 + 582 MiB); the others are estimates
  // of the same two parts.
  EXPECT_EQ(find_gpu("H200").cuda_context_bytes, (527 + 582) * kMiB);
  for (const auto& g : gpu_catalog()) {
    EXPECT_GT(g.cuda_context_bytes, 256 * kMiB + 582 * kMiB) << g.name;
    EXPECT_LT(g.cuda_context_bytes, 1024 * kMiB + 582 * kMiB) << g.name;
  }
  EXPECT_THROW(find_gpu("V100"), InputError);
}

// ---- the formula -------------------------------------------------------------------------

TEST(KvFormula, CellIsLatentPlusRopeTimesLayersTimesDtype) {
  EXPECT_EQ(kv_cell_bytes(kimi(), 2), 70272);  // 576 x 61 x 2
  EXPECT_EQ(kv_cell_bytes(kimi(), 1), 35136);
  EXPECT_EQ(kv_cell_bytes(tiny(), 2), 40 * 3 * 2);
  EXPECT_THROW(kv_cell_bytes(kimi(), 4), InputError);
  // Widths that are not multiples of 8: the GPU engine's padded row (attention_widths.h),
  // kv_lora_rank 20 -> 24 and rope 6 -> 8.
  ModelConfig odd = tiny();
  odd.kv_lora_rank = 20;
  odd.qk_rope_head_dim = 6;
  EXPECT_EQ(kv_cell_bytes(odd, 2), (24 + 8) * odd.num_hidden_layers * 2);
}

TEST(AttentionWidths, PadOnlyWhatTheKernelsNeed) {
  const AttentionWidths k = attention_widths(kimi());
  EXPECT_EQ(k.lora, 512);
  EXPECT_EQ(k.rope, 64);
  EXPECT_EQ(k.nope, 128);
  EXPECT_EQ(k.v, 128);
  ModelConfig odd = tiny();
  odd.kv_lora_rank = 20, odd.qk_rope_head_dim = 6, odd.qk_nope_head_dim = 11, odd.v_head_dim = 13;
  const AttentionWidths o = attention_widths(odd);
  EXPECT_EQ(o.lora, 24);
  EXPECT_EQ(o.rope, 8);
  EXPECT_EQ(o.cache_row(), 32);
  EXPECT_EQ(o.nope, 12);
  EXPECT_EQ(o.v, 14);
  EXPECT_NO_THROW(check_gpu_attention_widths(odd, "odd.json"));
  odd.v_head_dim = 129;
  try {
    check_gpu_attention_widths(odd, "odd.json");
    ADD_FAILURE() << "v_head_dim 129 accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("odd.json: v_head_dim: 129"), std::string::npos) << e.what();
  }
  odd.v_head_dim = 13, odd.kv_lora_rank = 513;
  EXPECT_THROW(check_gpu_attention_widths(odd, "odd.json"), InputError);
}

TEST(KvFormula, HandComputedCases) {
  const double G = static_cast<double>(kGiB);
  // total 80 GiB, avail 20 GiB, fraction 0.85: rest = 20 - 80 x 0.15 = 8 GiB;
  // 8 x 2^30 / 70272 = 122238.37 -> 122238 tokens.
  EXPECT_NEAR(kv_rest_bytes(80 * G, 20 * G, 0.85), 8 * G, 1.0);
  EXPECT_EQ(kv_max_tokens(80 * G, 20 * G, 0.85, 70272), 122238);
  // avail 10 GiB: rest = 10 - 12 = -2 GiB -> no token.
  EXPECT_NEAR(kv_rest_bytes(80 * G, 10 * G, 0.85), -2 * G, 1.0);
  EXPECT_EQ(kv_max_tokens(80 * G, 10 * G, 0.85, 70272), 0);
  // rest exactly 0 -> no token; rest one cell -> one token.
  EXPECT_EQ(kv_max_tokens(100.0, 50.0, 0.5, 10), 0);
  EXPECT_EQ(kv_max_tokens(100.0, 60.0, 0.5, 10), 1);
  EXPECT_EQ(kv_max_tokens(100.0, 59.0, 0.5, 10), 0);
}

TEST(KvFormula, MinMemFractionSolvesTheFormula) {
  const double G = static_cast<double>(kGiB);
  const double total = 94.7 * G, avail = 23.4 * G;
  const std::int64_t cell = 70272;
  for (std::int64_t tokens : {std::int64_t{1}, std::int64_t{1000}, std::int64_t{131072}}) {
    const double f = kv_min_mem_fraction(total, avail, cell, tokens);
    // 1 - (avail - tokens x cell) / total, up to the ulps the floor needs.
    EXPECT_NEAR(f, 1.0 - (avail - static_cast<double>(tokens * cell)) / total, 1e-12);
    EXPECT_GE(kv_max_tokens(total, avail, f, cell), tokens) << tokens;
    EXPECT_LT(kv_max_tokens(total, avail, f - 1e-9, cell), tokens) << tokens;
    EXPECT_LT(kv_max_tokens(total, avail, std::nextafter(f, 0.0), cell), tokens) << tokens;
  }
  // avail smaller than one cell: no fraction works, the result says so by exceeding 1.
  EXPECT_GT(kv_min_mem_fraction(100.0, 5.0, 10, 1), 1.0);
}

// ---- activations -------------------------------------------------------------------------

TEST(Activation, HandComputedTinyModel) {
  // tiny(), TP 1, 1 sequence x 10 tokens, bf16 intermediates:
  //   attention per token 2x32 + 4x24 + 4x24 + 40 + 32 + 4x32 + 4x16 + 64 = 584 -> 11,680 B
  //   MoE 10x8x4 + 10x2x8 + 10x2x(64+32+64)x2 + 10x(96+64)x2 + 10x64x2 = 11,360 B
  //   dense 10x(256+128+64)x2 = 8,960 B;  logits 256x4 + 256x2 = 1,536 B
  //   residual 2x10x64x2 = 2,560 B;  peak = 2,560 + 11,680
  const ActivationPeak a = activation_peak(tiny(), 1, 1, 10);
  EXPECT_EQ(a.tokens, 10);
  EXPECT_EQ(a.attention_bytes, 11680);
  EXPECT_EQ(a.moe_bytes, 11360);
  EXPECT_EQ(a.dense_mlp_bytes, 8960);
  EXPECT_EQ(a.logits_bytes, 1536);
  EXPECT_EQ(a.residual_bytes, 2560);
  EXPECT_EQ(a.peak_bytes, 14240);
  EXPECT_EQ(a.largest, "attention");
  // Logits dominate a decode step of a large batch: 256 x (256 x 4 + 128 x 2) at TP 2.
  const ActivationPeak d = activation_peak(tiny(), 2, 256, 1);
  EXPECT_EQ(d.logits_bytes, 256 * (256 * 4 + 128 * 2));
  EXPECT_EQ(d.largest, "logits");
}

// ---- the whole plan ----------------------------------------------------------------------

PlanInput kimi_input(double gpu_mib, double fraction) {
  PlanInput in;
  in.config = kimi();
  in.tp = 8;
  in.quant = Quantization::int4;
  in.gpu_total_bytes = static_cast<std::int64_t>(gpu_mib) * kMiB;
  in.cuda_context_bytes = 560 * kMiB;
  in.mem_fraction = fraction;
  in.allreduce = "auto";
  in.graph_batch_sizes = {1, 8, 64};
  return in;
}

TEST(Planner, TermsChainFromGpuTotalToKvCache) {
  const MemoryPlan p = plan_memory(kimi_input(97871, 0.85));
  EXPECT_EQ(p.total_bytes, p.gpu_total_bytes - p.cuda_context_bytes - p.comm.total());
  EXPECT_EQ(p.avail_bytes, p.total_bytes - p.weights.bytes_per_rank);
  EXPECT_NEAR(p.slack_bytes, 0.15 * static_cast<double>(p.total_bytes), 1.0);
  EXPECT_NEAR(p.rest_bytes, static_cast<double>(p.avail_bytes) - p.slack_bytes, 1.0);
  EXPECT_EQ(p.kv_cell_bytes, 70272);
  EXPECT_EQ(p.max_tokens, static_cast<std::int64_t>(std::floor(p.rest_bytes / 70272.0)));
  EXPECT_TRUE(p.feasible);
  // The breakdown's subtracted terms reproduce each subtotal.
  std::int64_t running = 0;
  for (const auto& t : p.breakdown) {
    if (t.name == "gpu total") {
      running = t.bytes;
    } else if (t.sign == '-') {
      running -= t.bytes;
    } else if (t.sign == '=') {
      // rest is avail - slack with the slack rounded to whole bytes
      EXPECT_NEAR(static_cast<double>(running), static_cast<double>(t.bytes), 1.0) << t.name;
    }
  }
  EXPECT_EQ(p.graph_pools.size(), 3u);
  EXPECT_EQ(p.graph_pool_bytes, p.graph_pools.back().bytes);  // the largest batch sets the shared pool
}

TEST(Planner, InfeasiblePlanSaysWhichFractionsWork) {
  PlanInput in = kimi_input(97871, 0.70);
  in.requested_tokens = 100000;
  const MemoryPlan p = plan_memory(in);
  EXPECT_FALSE(p.feasible);
  EXPECT_LT(p.rest_bytes, 0.0);
  EXPECT_EQ(p.max_tokens, 0);
  EXPECT_NE(p.verdict.find("Not enough memory"), std::string::npos) << p.verdict;
  EXPECT_NE(p.verdict.find("gives at least one token"), std::string::npos) << p.verdict;
  EXPECT_NE(p.verdict.find("gives the requested 100000"), std::string::npos) << p.verdict;
  // At the fractions it names, the plan works; just below them it does not.
  in.mem_fraction = p.min_mem_fraction;
  in.requested_tokens = 0;
  EXPECT_TRUE(plan_memory(in).feasible);
  EXPECT_EQ(plan_memory(in).max_tokens, 1);
  in.mem_fraction = std::nextafter(p.min_mem_fraction, 0.0);
  EXPECT_FALSE(plan_memory(in).feasible);
  in.requested_tokens = 100000;
  in.mem_fraction = p.min_mem_fraction_requested;
  EXPECT_TRUE(plan_memory(in).feasible);
  EXPECT_GE(plan_memory(in).max_tokens, 100000);
  in.mem_fraction = p.min_mem_fraction_requested - 1e-9;
  EXPECT_FALSE(plan_memory(in).feasible);
}

TEST(Planner, CustomAllreduceCostsItsBuffersInTokens) {
  PlanInput in = kimi_input(97871, 0.85);
  in.allreduce = "nccl";
  const MemoryPlan nccl = plan_memory(in);
  in.allreduce = "auto";
  const MemoryPlan both = plan_memory(in);
  EXPECT_EQ(nccl.total_bytes - both.total_bytes, custom_allreduce_bytes(8 * kMiB, 8));
  // total shrinks by c, avail by c, slack by 0.15 c: rest by 0.85 c.
  EXPECT_NEAR(nccl.rest_bytes - both.rest_bytes, 0.85 * static_cast<double>(custom_allreduce_bytes(8 * kMiB, 8)), 1.0);
  EXPECT_LT(both.max_tokens, nccl.max_tokens);
}

// PlanInput::nccl_over_sockets swaps NCCL's NVLink estimate for the measured socket buffers:
// total shrinks by the difference, and the breakdown says which figure it took.
TEST(Planner, NcclOverSocketsTakesTheMeasuredBuffers) {
  for (int tp : {2, 4, 8}) {
    PlanInput in = kimi_input(400000, 0.85);  // a device that holds the int4 weights at TP 2
    in.tp = tp;
    in.allreduce = "nccl";
    const MemoryPlan nvlink = plan_memory(in);
    in.nccl_over_sockets = true;
    const MemoryPlan sockets = plan_memory(in);
    EXPECT_EQ(nvlink.comm.nccl_bytes, nccl_buffer_bytes(tp));
    EXPECT_EQ(sockets.comm.nccl_bytes, nccl_socket_buffer_bytes(tp));
    EXPECT_EQ(nvlink.total_bytes - sockets.total_bytes, nccl_socket_buffer_bytes(tp) - nccl_buffer_bytes(tp));
    EXPECT_LT(sockets.max_tokens, nvlink.max_tokens);
    const auto term = std::find_if(sockets.breakdown.begin(), sockets.breakdown.end(),
                                   [](const PlanTerm& t) { return t.name == "comm: nccl"; });
    ASSERT_NE(term, sockets.breakdown.end());
    EXPECT_EQ(term->bytes, nccl_socket_buffer_bytes(tp));
    EXPECT_EQ(term->note.rfind(tp == 8 ? "ESTIMATE socket" : "MEASURED socket", 0), 0u) << term->note;
  }
}

TEST(Planner, FractionSweepPlansEveryBackendAndFraction) {
  const auto points = sweep_mem_fraction(kimi_input(97871, 0.85), {"nccl", "auto"}, {0.75, 0.80, 0.85});
  ASSERT_EQ(points.size(), 6u);
  for (std::size_t i = 0; i < 3; ++i) {
    const auto& nccl = points[i];
    const auto& both = points[i + 3];
    EXPECT_EQ(nccl.allreduce, "nccl");
    EXPECT_EQ(both.allreduce, "auto");
    EXPECT_EQ(both.comm_bytes - nccl.comm_bytes, custom_allreduce_bytes(8 * kMiB, 8));
    EXPECT_LE(both.max_tokens, nccl.max_tokens);
    PlanInput in = kimi_input(97871, nccl.mem_fraction);
    in.allreduce = "nccl";
    EXPECT_EQ(plan_memory(in).max_tokens, nccl.max_tokens);
  }
  // More fraction, more tokens.
  EXPECT_LT(points[0].max_tokens, points[1].max_tokens);
  EXPECT_LT(points[1].max_tokens, points[2].max_tokens);
}

TEST(Planner, SlackCheckAndLargestFractionForIt) {
  PlanInput in = kimi_input(143771, 0.99);
  in.activation_seq_len = 16384;
  const MemoryPlan p = plan_memory(in);
  EXPECT_EQ(p.slack_needed_bytes, p.graph_pool_bytes + p.activation.peak_bytes);
  EXPECT_FALSE(p.slack_fits);
  EXPECT_NE(p.verdict.find("Warning"), std::string::npos);
  in.mem_fraction = p.max_mem_fraction_for_slack - 1e-6;
  EXPECT_TRUE(plan_memory(in).slack_fits);
}

TEST(Planner, WeightsThatDoNotFitSayNoFractionWorks) {
  PlanInput in = kimi_input(143771, 0.85);
  in.quant = Quantization::bf16;  // ~257 GB per rank at TP 8
  const MemoryPlan p = plan_memory(in);
  EXPECT_FALSE(p.feasible);
  EXPECT_LT(p.avail_bytes, 0);
  EXPECT_GT(p.min_mem_fraction, 1.0);
  EXPECT_NE(p.verdict.find("the weights do not fit"), std::string::npos) << p.verdict;
  EXPECT_NE(p.verdict.find("no mem_fraction works"), std::string::npos) << p.verdict;
}

// ---- issue 18: the incident's deployment ---------------------------------------------------
// Kimi-K2.5 with int4 experts at TP 8 on 8 x RTX PRO 6000 Blackwell Server Edition (96 GB, PCIe,
// no NVLink) at mem_fraction 0.55 stopped at start-up with "not enough memory": the custom
// allreduce's buffers were not counted and the KV budget went negative. This is what
// `tpbench plan --model kimi-k2.5 --gpu rtx-pro-6000 --tp 8 --quant int4 --mem-fraction 0.55`
// plans (the preset, the catalog entry, the CLI's default graphs and activations), term by term.

PlanInput incident_input(Interconnect interconnect) {
  const GpuSpec& g = find_gpu("RTX PRO 6000");
  PlanInput in;
  in.config = load_model_config_by_name(std::string(TPB_TEST_DATA_DIR) + "/../../scenarios/models/kimi-k2.5.json");
  in.tp = 8;
  in.quant = Quantization::int4;
  in.gpu_total_bytes = g.total_bytes;
  in.cuda_context_bytes = g.cuda_context_bytes;
  in.mem_fraction = 0.55;
  in.allreduce = "auto";  // the CLI's default, as serving engines start
  in.interconnect = interconnect;
  in.custom_on_pcie = true;  // the incident's deployment ran its IPC allreduce over PCIe
  in.graph_batch_sizes = {1, 2, 4, 8, 16, 32, 64, 128, 256};
  return in;
}

TEST(PlannerIncident, EveryTermOfTheRtxPro6000Plan) {
  ASSERT_EQ(find_gpu("RTX PRO 6000").interconnect, Interconnect::pcie_p2p);  // the catalog default
  const MemoryPlan p = plan_memory(incident_input(Interconnect::pcie_p2p));
  // Device: (97887 - 616) MiB = 101,996,036,096 B; context (600 + 582) MiB, a Blackwell estimate.
  EXPECT_EQ(p.gpu_total_bytes, 101996036096);
  EXPECT_EQ(p.cuda_context_bytes, 1182 * kMiB);
  // Communicator: PCIe P2P gives peer access, so auto holds the custom buffers (3 x 8 MiB + 4 KiB)
  // and NCCL's (32 channels x 10 MiB).
  EXPECT_EQ(p.allreduce_planned, "auto");
  EXPECT_EQ(p.allreduce_note, "");
  EXPECT_EQ(p.comm.custom_bytes, 25169920);
  EXPECT_EQ(p.comm.nccl_bytes, 335544320);
  // total = 101,996,036,096 - 1,239,416,832 - 25,169,920 - 335,544,320.
  EXPECT_EQ(p.total_bytes, 100395905024);
  // Weights: the int4 text model's shard plus the bf16 vision tower whole on every rank.
  ModelConfig text = incident_input(Interconnect::pcie_p2p).config;
  text.has_vision_tower = false;
  EXPECT_EQ(p.weights.bytes_per_rank, weight_bytes(text, Quantization::int4, 8).bytes_per_rank + 2 * 471143920);
  EXPECT_EQ(p.weights.bytes_per_rank, weight_bytes(kimi(true), Quantization::int4, 8).bytes_per_rank);
  EXPECT_EQ(p.avail_bytes, p.total_bytes - p.weights.bytes_per_rank);
  // The budget: slack = 0.45 total, rest = avail - slack, negative: not one KV token.
  EXPECT_NEAR(p.slack_bytes, 0.45 * 100395905024.0, 1.0);
  EXPECT_NEAR(p.rest_bytes, static_cast<double>(p.avail_bytes) - 0.45 * 100395905024.0, 1.0);
  EXPECT_LT(p.rest_bytes, 0.0);
  EXPECT_EQ(p.kv_cell_bytes, 70272);
  EXPECT_EQ(p.max_tokens, 0);
  EXPECT_EQ(p.kv_cache_bytes, 0);
  EXPECT_FALSE(p.feasible);
  EXPECT_TRUE(p.slack_fits);  // graphs and activations would fit in the 45 % slack
  // The fraction that gives one token solves avail - total (1 - f) = one cell.
  const double total = static_cast<double>(p.total_bytes), avail = static_cast<double>(p.avail_bytes);
  EXPECT_NEAR(p.min_mem_fraction, 1.0 - (avail - 70272.0) / total, 1e-12);
  EXPECT_GT(p.min_mem_fraction, 0.55);
  EXPECT_LT(p.min_mem_fraction, 1.0);
  char named[96];
  std::snprintf(named, sizeof named, "mem_fraction >= %.4f gives at least one token.",
                std::ceil(p.min_mem_fraction * 1e4 - 1e-9) / 1e4);
  EXPECT_EQ(p.verdict.rfind("Not enough memory: ", 0), 0u) << p.verdict;
  EXPECT_NE(p.verdict.find("no KV token fits"), std::string::npos) << p.verdict;
  EXPECT_NE(p.verdict.find(named), std::string::npos) << p.verdict;
  // The breakdown names both communicator terms with their bytes.
  std::map<std::string, std::int64_t> terms;
  for (const auto& t : p.breakdown) terms[t.name] = t.bytes;
  EXPECT_EQ(terms.at("comm: custom allreduce"), 25169920);
  EXPECT_EQ(terms.at("comm: nccl"), 335544320);
  EXPECT_EQ(terms.at("total (free before weights)"), 100395905024);
}

// What a plan without the custom buffers (the incident's) says instead: a smaller smallest
// fraction, at which the engine, holding the buffers, finds no room for one token.
TEST(PlannerIncident, UncountedCustomBuffersPromiseAFractionThatFails) {
  const MemoryPlan counted = plan_memory(incident_input(Interconnect::pcie_p2p));
  PlanInput in = incident_input(Interconnect::pcie_p2p);
  in.allreduce = "nccl";
  const MemoryPlan uncounted = plan_memory(in);
  EXPECT_EQ(uncounted.total_bytes - counted.total_bytes, 25169920);
  // total and avail shrink by c, the slack by 0.45 c: rest by 0.55 c.
  EXPECT_NEAR(uncounted.rest_bytes - counted.rest_bytes, 0.55 * 25169920.0, 1.0);
  EXPECT_LT(uncounted.min_mem_fraction, counted.min_mem_fraction);
  in = incident_input(Interconnect::pcie_p2p);
  in.mem_fraction = uncounted.min_mem_fraction;
  EXPECT_FALSE(plan_memory(in).feasible);
  in.mem_fraction = counted.min_mem_fraction;
  EXPECT_TRUE(plan_memory(in).feasible);
}

// The same box without PCIe P2P: the custom allreduce cannot run, auto plans NCCL's buffers
// alone and says so; everything else is the formula on the larger total.
TEST(PlannerIncident, WithoutP2pTheCustomAllreduceIsNotPlanned) {
  const MemoryPlan p2p = plan_memory(incident_input(Interconnect::pcie_p2p));
  const MemoryPlan none = plan_memory(incident_input(Interconnect::pcie_no_p2p));
  EXPECT_TRUE(none.comm.custom_blocked);
  EXPECT_EQ(none.comm.custom_bytes, 0);
  EXPECT_EQ(none.comm.nccl_bytes, 335544320);
  EXPECT_EQ(none.allreduce_planned, "nccl");
  EXPECT_NE(none.allreduce_note.find("cannot run on pcie-no-p2p"), std::string::npos) << none.allreduce_note;
  EXPECT_NE(none.allreduce_note.find("CUDA IPC peer access"), std::string::npos) << none.allreduce_note;
  EXPECT_NE(none.allreduce_note.find("auto plans NCCL only"), std::string::npos) << none.allreduce_note;
  EXPECT_EQ(none.total_bytes - p2p.total_bytes, 25169920);
  EXPECT_EQ(none.total_bytes, 101996036096 - 1182 * kMiB - 335544320);
  EXPECT_NEAR(none.rest_bytes - p2p.rest_bytes, 0.55 * 25169920.0, 1.0);
  EXPECT_FALSE(none.feasible);
  // The breakdown keeps a zero-byte, informational line that says why.
  const auto it = std::find_if(none.breakdown.begin(), none.breakdown.end(),
                               [](const PlanTerm& t) { return t.name == "comm: custom allreduce"; });
  ASSERT_NE(it, none.breakdown.end());
  EXPECT_EQ(it->bytes, 0);
  EXPECT_EQ(it->sign, ' ');
  EXPECT_NE(it->note.find("cannot run on pcie-no-p2p"), std::string::npos) << it->note;
  // nccl asks for no custom allreduce: nothing to block, nothing to say.
  PlanInput in = incident_input(Interconnect::pcie_no_p2p);
  in.allreduce = "nccl";
  const MemoryPlan nccl = plan_memory(in);
  EXPECT_FALSE(nccl.comm.custom_blocked);
  EXPECT_EQ(nccl.allreduce_planned, "nccl");
  EXPECT_EQ(nccl.allreduce_note, "");
  EXPECT_EQ(nccl.total_bytes, none.total_bytes);
}

TEST(Planner, BadInputsAreInputErrors) {
  PlanInput in = kimi_input(97871, 0.85);
  in.mem_fraction = 1.5;
  EXPECT_THROW(plan_memory(in), InputError);
  in = kimi_input(97871, 0.85);
  in.tp = 3;  // does not divide 64 heads
  EXPECT_THROW(plan_memory(in), InputError);
  in = kimi_input(0.5, 0.85);  // smaller than the context
  EXPECT_THROW(plan_memory(in), InputError);
}

}  // namespace
}  // namespace tpb
