// Weight sources: safetensors blocks in F32/BF16/F16, per-expert and fused expert tensors,
// sharded checkpoints with an index and the `language_model.` prefix, clear errors, and a
// whole synthetic model written to a checkpoint and read back bit for bit at TP=2.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>

#include <nlohmann/json.hpp>

#include "reference_engine/config/model_config.h"
#include "reference_engine/model/engine.h"
#include "reference_engine/weights/safetensors.h"
#include "reference_engine/weights/weight_source.h"
#include "tests/unit/engine_test_support.h"
#include "tpb/dtype.h"

namespace tpb {
namespace {

namespace fs = std::filesystem;

struct RawTensor {
  std::vector<std::int64_t> shape;
  std::vector<float> values;  // row-major
};

// Writes `tensors` with every element converted to `dtype` ("F32", "BF16" or "F16").
void write_st(const fs::path& path, const std::map<std::string, RawTensor>& tensors, const std::string& dtype) {
  nlohmann::json header;
  std::string data;
  for (const auto& [name, t] : tensors) {
    const std::size_t begin = data.size();
    for (float v : t.values) {
      if (dtype == "F32") data.append(reinterpret_cast<const char*>(&v), 4);
      else {
        const std::uint16_t h = dtype == "BF16" ? float_to_bf16(v) : float_to_f16(v);
        data.append(reinterpret_cast<const char*>(&h), 2);
      }
    }
    header[name] = {{"dtype", dtype}, {"shape", t.shape}, {"data_offsets", {begin, data.size()}}};
  }
  const std::string h = header.dump();
  std::ofstream f(path, std::ios::binary);
  const std::uint64_t n = h.size();
  f.write(reinterpret_cast<const char*>(&n), 8);
  f << h << data;
}

RawTensor counting(std::vector<std::int64_t> shape, float offset) {
  RawTensor t{shape, {}};
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  for (std::int64_t i = 0; i < n; ++i) t.values.push_back(offset + 0.25f * static_cast<float>(i));  // exact in f16/bf16
  return t;
}

// This process's scratch root, removed when the test process exits (ctest runs each test
// in its own process).
const fs::path& scratch_root() {
  struct Root {
    fs::path path = fs::temp_directory_path() / ("tpb_engine_weights_" + std::to_string(::getpid()));
    ~Root() {
      std::error_code ec;
      fs::remove_all(path, ec);
    }
  };
  static const Root root;
  return root.path;
}

fs::path scratch(const std::string& name) {
  const fs::path d = scratch_root() / name;
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

WeightRequest block(const std::string& name, std::vector<std::int64_t> shape, std::int64_t r0, std::int64_t r1,
                    std::int64_t c0, std::int64_t c1) {
  WeightRequest r = full_tensor(name, std::move(shape), synthetic::InitKind::linear, 1);
  r.row_begin = r0;
  r.row_end = r1;
  r.col_begin = c0;
  r.col_end = c1;
  return r;
}

std::vector<float> read(WeightSource& src, const WeightRequest& r) {
  std::vector<float> out(r.rows() * r.cols());
  src.read(r, out.data());
  return out;
}

TEST(EngineWeights, ReadsBlocksInEveryDtype) {
  for (const std::string dtype : {"F32", "BF16", "F16"}) {
    const fs::path d = scratch("dtype_" + dtype);
    write_st(d / "model.safetensors", {{"w", counting({4, 6}, -2.0f)}}, dtype);
    auto src = open_safetensors_weights(d.string(), "");
    const auto got = read(*src, block("w", {4, 6}, 1, 3, 2, 5));
    const std::vector<float> want = {-2 + 0.25f * 8, -2 + 0.25f * 9, -2 + 0.25f * 10,
                                     -2 + 0.25f * 14, -2 + 0.25f * 15, -2 + 0.25f * 16};
    EXPECT_EQ(got, want) << dtype;
  }
}

TEST(EngineWeights, FusedAndPerExpertTensorsGiveTheSameBlocks) {
  const std::int64_t E = 3, I = 4, H = 5;
  std::map<std::string, RawTensor> per_expert, fused;
  RawTensor gate_up{{E, 2 * I, H}, {}}, down{{E, H, I}, {}};
  for (std::int64_t e = 0; e < E; ++e) {
    const auto g = counting({I, H}, 10.0f * e), u = counting({I, H}, 10.0f * e + 5), dn = counting({H, I}, -10.0f * e);
    per_expert["model.layers.1.mlp.experts." + std::to_string(e) + ".gate_proj.weight"] = g;
    per_expert["model.layers.1.mlp.experts." + std::to_string(e) + ".up_proj.weight"] = u;
    per_expert["model.layers.1.mlp.experts." + std::to_string(e) + ".down_proj.weight"] = dn;
    gate_up.values.insert(gate_up.values.end(), g.values.begin(), g.values.end());
    gate_up.values.insert(gate_up.values.end(), u.values.begin(), u.values.end());
    down.values.insert(down.values.end(), dn.values.begin(), dn.values.end());
  }
  fused["model.layers.1.mlp.experts.gate_up_proj"] = gate_up;
  fused["model.layers.1.mlp.experts.down_proj"] = down;
  const fs::path a = scratch("per_expert"), b = scratch("fused");
  write_st(a / "model.safetensors", per_expert, "F32");
  write_st(b / "model.safetensors", fused, "F16");
  auto pa = open_safetensors_weights(a.string(), ""), pb = open_safetensors_weights(b.string(), "");
  for (std::int64_t e = 0; e < E; ++e) {
    const std::string p = "model.layers.1.mlp.experts." + std::to_string(e);
    for (const char* proj : {".gate_proj.weight", ".up_proj.weight"}) {
      const auto r = block(p + proj, {I, H}, 2, 4, 0, H);  // rank 1 of TP=2
      EXPECT_EQ(read(*pa, r), read(*pb, r)) << p << proj;
    }
    const auto r = block(p + ".down_proj.weight", {H, I}, 0, H, 2, 4);
    EXPECT_EQ(read(*pa, r), read(*pb, r)) << p << ".down_proj.weight";
  }
  // The fused tensor must fit the config: a wrong intermediate size names the tensor.
  try {
    read(*pb, block("model.layers.1.mlp.experts.0.gate_proj.weight", {I + 1, H}, 0, 1, 0, H));
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("model.layers.1.mlp.experts.gate_up_proj"), std::string::npos) << e.what();
  }
}

TEST(EngineWeights, ShardedIndexWithPrefix) {
  const fs::path d = scratch("sharded");
  write_st(d / "part-1.safetensors", {{"language_model.a", counting({2, 3}, 0)}}, "F16");
  write_st(d / "part-2.safetensors", {{"language_model.b", counting({3}, 7)}, {"c", counting({1, 2}, 9)}}, "F32");
  nlohmann::json index = {{"metadata", nlohmann::json::object()},
                          {"weight_map", {{"language_model.a", "part-1.safetensors"},
                                          {"language_model.b", "part-2.safetensors"},
                                          {"c", "part-2.safetensors"}}}};
  std::ofstream(d / "model.safetensors.index.json") << index.dump();
  auto src = open_safetensors_weights(d.string(), "language_model.");
  EXPECT_EQ(read(*src, block("a", {2, 3}, 1, 2, 0, 3)), (std::vector<float>{0.75f, 1.0f, 1.25f}));
  EXPECT_EQ(read(*src, full_tensor("b", {3}, synthetic::InitKind::norm, 1)), (std::vector<float>{7.0f, 7.25f, 7.5f}));
  EXPECT_EQ(read(*src, block("c", {1, 2}, 0, 1, 0, 2)), (std::vector<float>{9.0f, 9.25f}));  // bare-name fallback
}

TEST(EngineWeights, MissingOrMisShapedTensorsNameTheTensor) {
  const fs::path d = scratch("errors");
  write_st(d / "model.safetensors", {{"model.norm.weight", counting({8}, 1)}}, "F32");
  auto src = open_safetensors_weights(d.string(), "");
  auto message = [&](const WeightRequest& r) -> std::string {
    try {
      read(*src, r);
    } catch (const InputError& e) {
      return e.what();
    }
    return "(no error)";
  };
  const std::string missing = message(full_tensor("lm_head.weight", {4, 8}, synthetic::InitKind::linear, 8));
  EXPECT_NE(missing.find("lm_head.weight"), std::string::npos) << missing;
  EXPECT_NE(missing.find("not found"), std::string::npos) << missing;
  const std::string shaped = message(full_tensor("model.norm.weight", {16}, synthetic::InitKind::norm, 1));
  EXPECT_NE(shaped.find("model.norm.weight"), std::string::npos) << shaped;
  EXPECT_NE(shaped.find("[8]"), std::string::npos) << shaped;
  EXPECT_NE(shaped.find("[16]"), std::string::npos) << shaped;
  EXPECT_THROW(open_safetensors_weights((d / "nope").string(), ""), InputError);
  std::ofstream(d / "broken.safetensors") << "not a safetensors file at all";
  EXPECT_THROW(open_safetensors_weights(d.string(), ""), InputError);
}

TEST(EngineWeights, SyntheticBlocksAreSlicesOfOneGlobalTensor) {
  auto src = make_synthetic_weights(5);
  const auto full = read(*src, block("model.layers.0.self_attn.o_proj.weight", {6, 8}, 0, 6, 0, 8));
  const auto part = read(*src, block("model.layers.0.self_attn.o_proj.weight", {6, 8}, 2, 5, 4, 8));
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 4; ++c) EXPECT_EQ(part[r * 4 + c], full[(r + 2) * 8 + c + 4]);
}

// Records every request of a TP=1 load, so the test can write the same global model to disk.
class RecordingSource : public WeightSource {
 public:
  explicit RecordingSource(WeightSource& inner) : inner_(inner) {}
  void read(const WeightRequest& r, float* out) override {
    inner_.read(r, out);
    tensors[r.name] = RawTensor{r.shape, std::vector<float>(out, out + r.rows() * r.cols())};
  }
  std::string describe() const override { return "recording"; }
  std::map<std::string, RawTensor> tensors;

 private:
  WeightSource& inner_;
};

std::vector<float> tp2_logits(const ModelConfig& c, const std::function<std::unique_ptr<WeightSource>()>& make) {
  std::vector<std::int64_t> tokens = {3, 17, 200, 5, 9, 31, 64, 2};
  auto out = test::run_ranks<std::vector<float>>(2, [&](Communicator& comm) {
    auto src = make();
    Engine e(c, Shard{comm.rank(), 2}, comm, *src);
    e.prefill(tokens, 2);
    std::vector<float> l = e.logits();
    e.decode({7, 8});
    l.insert(l.end(), e.logits().begin(), e.logits().end());
    return l;
  });
  return out[0];
}

TEST(EngineWeights, SyntheticModelRoundTripsThroughCheckpoints) {
  const ModelConfig c = load_model_config_by_name(test::preset("tiny-dsv3"));
  auto synthetic = make_synthetic_weights(77);
  RecordingSource rec(*synthetic);
  {
    test::SingleRankCommunicator comm;
    Engine e(c, Shard{}, comm, rec);
  }
  // Per-expert F32, single file.
  const fs::path a = scratch("roundtrip_per_expert");
  write_st(a / "model.safetensors", rec.tensors, "F32");
  // Fused experts, `language_model.` prefix, two files + index.
  std::map<std::string, RawTensor> fused;
  const std::regex expert_re(R"(^(.*\.mlp\.experts)\.(\d+)\.(gate_proj|up_proj|down_proj)\.weight$)");
  const std::int64_t E = c.n_routed_experts, I = c.moe_intermediate_size, H = c.hidden_size;
  for (const auto& [name, t] : rec.tensors) {
    std::smatch m;
    if (!std::regex_match(name, m, expert_re)) {
      fused["language_model." + name] = t;
      continue;
    }
    const std::int64_t e = std::stoll(m[2].str());
    const bool down = m[3].str() == "down_proj";
    RawTensor& f = fused["language_model." + m[1].str() + (down ? ".down_proj" : ".gate_up_proj")];
    if (f.values.empty()) {
      f.shape = down ? std::vector<std::int64_t>{E, H, I} : std::vector<std::int64_t>{E, 2 * I, H};
      f.values.assign(E * 2 * I * H / (down ? 2 : 1), 0.0f);
    }
    const std::int64_t offset = down ? e * H * I : e * 2 * I * H + (m[3].str() == "up_proj" ? I * H : 0);
    std::copy(t.values.begin(), t.values.end(), f.values.begin() + offset);
  }
  const fs::path b = scratch("roundtrip_fused");
  std::map<std::string, RawTensor> part1, part2;
  nlohmann::json weight_map;
  int i = 0;
  for (auto& [name, t] : fused) {
    const bool first = i++ % 2 == 0;
    (first ? part1 : part2)[name] = t;
    weight_map[name] = first ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors";
  }
  write_st(b / "model-00001-of-00002.safetensors", part1, "F32");
  write_st(b / "model-00002-of-00002.safetensors", part2, "F32");
  std::ofstream(b / "model.safetensors.index.json") << nlohmann::json{{"weight_map", weight_map}}.dump();

  const auto want = tp2_logits(c, [] { return make_synthetic_weights(77); });
  const auto from_a = tp2_logits(c, [&] { return open_safetensors_weights(a.string(), ""); });
  const auto from_b = tp2_logits(c, [&] { return open_safetensors_weights(b.string(), "language_model."); });
  ASSERT_EQ(want.size(), from_a.size());
  EXPECT_EQ(0, std::memcmp(want.data(), from_a.data(), want.size() * sizeof(float)));
  EXPECT_EQ(0, std::memcmp(want.data(), from_b.data(), want.size() * sizeof(float)));
}

}  // namespace
}  // namespace tpb
