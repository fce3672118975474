// INT4 routed experts as the loaders read them (int4_format.h): a checkpoint's
// weight_packed / weight_scale / weight_shape, the synthetic generator's INT4 values, and the
// config's quantization_config. Each checkpoint here is written byte by byte by the test, so
// the expected values come from the format's definition, not from the code under test.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "reference_engine/config/model_config.h"
#include "reference_engine/model/tensor_layout.h"
#include "reference_engine/weights/weight_source.h"
#include "tests/unit/engine_test_support.h"
#include "tpb/check.h"
#include "tpb/dtype.h"
#include "tpb/kernels/int4_format.h"

namespace tpb {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct RawTensor {
  std::string name;
  std::string dtype;  // "I32", "BF16", "F32"
  std::vector<std::int64_t> shape;
  std::vector<unsigned char> bytes;
};

template <class T>
std::vector<unsigned char> bytes_of(const std::vector<T>& v) {
  std::vector<unsigned char> b(v.size() * sizeof(T));
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

void write_raw_safetensors(const fs::path& path, const std::vector<RawTensor>& tensors) {
  json header = json::object();
  std::uint64_t offset = 0;
  for (const auto& t : tensors) {
    header[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {offset, offset + t.bytes.size()}}};
    offset += t.bytes.size();
  }
  const std::string h = header.dump();
  std::ofstream f(path, std::ios::binary);
  const std::uint64_t n = h.size();
  for (int i = 0; i < 8; ++i) f.put(static_cast<char>((n >> (8 * i)) & 0xff));
  f << h;
  for (const auto& t : tensors) f.write(reinterpret_cast<const char*>(t.bytes.data()), static_cast<std::streamsize>(t.bytes.size()));
}

// One projection [out, in] in the format: random q (the whole range), random positive scales.
struct Int4Projection {
  std::int64_t out = 0, in = 0;
  std::vector<int> q;                  // [out, in]
  std::vector<std::uint16_t> scales;   // [out, ceil(in / 32)] bf16 bits
  std::vector<std::uint32_t> packed;   // [out, ceil(in / 8)]

  Int4Projection(std::int64_t o, std::int64_t i, std::uint32_t seed) : out(o), in(i) {
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int> qd(-8, 7);
    std::uniform_real_distribution<float> sd(0.001f, 0.1f);
    q.resize(static_cast<std::size_t>(out * in));
    for (int& v : q) v = qd(rng);
    const std::int64_t groups = int4::scale_groups(in), words = int4::packed_words(in);
    scales.resize(static_cast<std::size_t>(out * groups));
    for (auto& s : scales) s = float_to_bf16(sd(rng));
    packed.assign(static_cast<std::size_t>(out * words), 0);
    // Packed by hand from the format's words (MODEL.md), not with int4::pack8: input j in bits
    // 4 (j mod 8) .. + 3, nibble = q + 8; a ragged last word's spare nibbles hold 0.
    for (std::int64_t r = 0; r < out; ++r)
      for (std::int64_t j = 0; j < in; ++j)
        packed[static_cast<std::size_t>(r * words + j / 8)] |=
            static_cast<std::uint32_t>(q[static_cast<std::size_t>(r * in + j)] + 8) << (4 * (j % 8));
  }
  // The weight the format defines: bf16(q x scale), rounded once (tpb::float_to_bf16).
  float expected(std::int64_t r, std::int64_t j) const {
    const float s = bf16_to_float(scales[static_cast<std::size_t>(r * int4::scale_groups(in) + j / 32)]);
    return bf16_to_float(float_to_bf16(static_cast<float>(q[static_cast<std::size_t>(r * in + j)]) * s));
  }
  std::vector<RawTensor> tensors(const std::string& base) const {
    return {{base + ".weight_packed", "I32", {out, int4::packed_words(in)}, bytes_of(packed)},
            {base + ".weight_scale", "BF16", {out, int4::scale_groups(in)}, bytes_of(scales)},
            {base + ".weight_shape", "I32", {2}, bytes_of(std::vector<std::int32_t>{static_cast<std::int32_t>(out), static_cast<std::int32_t>(in)})}};
  }
};

const char* kExpert = "model.layers.1.mlp.experts.3.gate_proj.weight";
const char* kBase = "model.layers.1.mlp.experts.3.gate_proj";

WeightRequest int4_request(std::int64_t out, std::int64_t in) {
  WeightRequest r = full_tensor(kExpert, {out, in}, synthetic::InitKind::linear, in);
  r.encoding = WeightEncoding::int4_group32;
  return r;
}

class Int4Checkpoint : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tpb_int4_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  void write(const std::vector<RawTensor>& t) { write_raw_safetensors(dir_ / "model.safetensors", t); }
  std::string error_of(const WeightRequest& r) {
    auto src = open_safetensors_weights(dir_.string(), "language_model.");
    std::vector<float> out(static_cast<std::size_t>(r.rows() * r.cols()));
    try {
      src->read(r, out.data());
    } catch (const InputError& e) {
      return e.what();
    }
    return "";
  }
  fs::path dir_;
};

// Ragged widths: 52 inputs = 6.5 words and 1.625 groups; every element, every block.
TEST_F(Int4Checkpoint, DequantizesEveryElementAsTheFormatDefines) {
  const Int4Projection p(5, 52, 1);
  std::vector<RawTensor> t = p.tensors(std::string("language_model.") + kBase);
  write(t);
  auto src = open_safetensors_weights(dir_.string(), "language_model.");
  WeightRequest whole = int4_request(5, 52);
  std::vector<float> got(5 * 52);
  src->read(whole, got.data());
  for (std::int64_t r = 0; r < 5; ++r)
    for (std::int64_t j = 0; j < 52; ++j) ASSERT_EQ(got[r * 52 + j], p.expected(r, j)) << "at [" << r << ", " << j << "]";
  // A rank's block (TP column and row splits) is the same slice of the same values.
  WeightRequest block = whole;
  block.row_begin = 1, block.row_end = 4, block.col_begin = 13, block.col_end = 45;
  std::vector<float> part(static_cast<std::size_t>(block.rows() * block.cols()));
  src->read(block, part.data());
  for (std::int64_t r = 0; r < block.rows(); ++r)
    for (std::int64_t c = 0; c < block.cols(); ++c)
      ASSERT_EQ(part[r * block.cols() + c], p.expected(block.row_begin + r, block.col_begin + c));
}

TEST_F(Int4Checkpoint, PackedReadIsTheStoredWordsAndScales) {
  const Int4Projection p(3, 96, 2);
  write(p.tensors(kBase));
  auto src = open_safetensors_weights(dir_.string(), "");
  WeightRequest r = int4_request(3, 96);
  r.col_begin = 32;  // a row-split shard: groups 1 and 2
  std::vector<std::uint32_t> words(3 * 8);
  std::vector<std::uint16_t> scales(3 * 2);
  src->read_int4(r, words.data(), scales.data());
  for (std::int64_t row = 0; row < 3; ++row) {
    for (int w = 0; w < 8; ++w) EXPECT_EQ(words[row * 8 + w], p.packed[row * 12 + 4 + w]);
    for (int g = 0; g < 2; ++g) EXPECT_EQ(scales[row * 2 + g], p.scales[row * 3 + 1 + g]);
  }
  r.col_begin = 8;  // not on a group
  EXPECT_THROW(src->read_int4(r, words.data(), scales.data()), Error);
}

TEST_F(Int4Checkpoint, RefusesWhatItCannotRun) {
  const Int4Projection p(4, 64, 3);
  auto with = [&](auto&& edit) {
    std::vector<RawTensor> t = p.tensors(kBase);
    edit(t);
    write(t);
    return error_of(int4_request(4, 64));
  };
  EXPECT_TRUE(with([](auto&) {}).empty());
  std::string e = with([](auto& t) { t.erase(t.begin() + 1); });
  EXPECT_NE(e.find("weight_scale (the group scales) not found"), std::string::npos) << e;
  e = with([](auto& t) { t[0].shape = {4, 4}; t[0].bytes.resize(4 * 4 * 4); });
  EXPECT_NE(e.find(".weight_packed: expected I32 [4, 8]"), std::string::npos) << e;
  e = with([](auto& t) { t[2].bytes = bytes_of(std::vector<std::int32_t>{4, 60}); });
  EXPECT_NE(e.find("weight_shape says [4, 60], the config needs [4, 64]"), std::string::npos) << e;
  // weight_shape as I64 (compressed-tensors 0.20 writes it so): read the same.
  EXPECT_TRUE(with([](auto& t) {
                t[2].dtype = "I64";
                t[2].bytes = bytes_of(std::vector<std::int64_t>{4, 64});
              }).empty());
  e = with([](auto& t) { t[2].dtype = "I64"; t[2].bytes = bytes_of(std::vector<std::int64_t>{4, 32}); });
  EXPECT_NE(e.find("weight_shape says [4, 32], the config needs [4, 64]"), std::string::npos) << e;
  e = with([](auto& t) { t[1].dtype = "F32"; t[1].shape = {4, 1}; });
  EXPECT_NE(e.find(".weight_scale: expected BF16 [4, 2]"), std::string::npos) << e;
  e = with([](auto& t) { t[1].bytes[0] = 0x80, t[1].bytes[1] = 0x7f; });  // +Inf
  EXPECT_NE(e.find("non-finite scale at [0, 0]"), std::string::npos) << e;
  // The expert stored unquantized while the config says INT4, and the reverse.
  e = with([](auto& t) { t = {{kExpert, "F32", {4, 64}, std::vector<unsigned char>(4 * 64 * 4)}}; });
  EXPECT_NE(e.find("the expert is stored unquantized"), std::string::npos) << e;
  write(p.tensors(kBase));
  WeightRequest dense = int4_request(4, 64);
  dense.encoding = WeightEncoding::dense;
  e = error_of(dense);
  EXPECT_NE(e.find("is stored packed"), std::string::npos) << e;
}

// The synthetic INT4 model: read() is the dequantized form of read_int4(), and a shard's block
// is the same slice of the global tensor.
TEST(SyntheticInt4, ReadIsTheDequantizedPackedForm) {
  auto src = make_synthetic_weights(7);
  WeightRequest whole = int4_request(6, 128);
  std::vector<float> values(6 * 128);
  src->read(whole, values.data());
  std::vector<std::uint32_t> words(6 * 16);
  std::vector<std::uint16_t> scales(6 * 4);
  src->read_int4(whole, words.data(), scales.data());
  int seen_min = 0, seen_max = 0;
  for (std::int64_t r = 0; r < 6; ++r)
    for (std::int64_t j = 0; j < 128; ++j) {
      const int q = int4::unpack(words[r * 16 + j / 8], static_cast<int>(j % 8));
      seen_min = std::min(seen_min, q), seen_max = std::max(seen_max, q);
      const float s = bf16_to_float(scales[r * 4 + j / 32]);
      ASSERT_GT(s, 0.f);
      ASSERT_LE(s, 0.125f / std::sqrt(128.f) * 1.01f);  // scale / 8 x (0.75 + 0.25 u), u < 1
      ASSERT_EQ(values[r * 128 + j], bf16_to_float(float_to_bf16(static_cast<float>(q) * s)));
    }
  EXPECT_EQ(seen_min, -8);  // the whole range is drawn
  EXPECT_EQ(seen_max, 7);
  WeightRequest shard = whole;
  shard.row_begin = 2, shard.row_end = 5, shard.col_begin = 64;
  std::vector<float> part(static_cast<std::size_t>(shard.rows() * shard.cols()));
  src->read(shard, part.data());
  for (std::int64_t r = 0; r < shard.rows(); ++r)
    for (std::int64_t c = 0; c < shard.cols(); ++c) ASSERT_EQ(part[r * 64 + c], values[(r + 2) * 128 + 64 + c]);
}

// The tensor layout asks for the routed experts, and only them, in INT4 when the model is int4.
TEST(Int4Layout, OnlyRoutedExpertsAreInt4) {
  ModelConfig c = load_model_config_by_name(test::preset("tiny-dsv3"));
  c.quant = Quantization::int4;
  int int4 = 0, dense = 0;
  for_each_shard_tensor(tensor_layout(c), Shard{1, 2}, [&](const ShardTensor& t) {
    const bool expert = t.row->scope == TensorScope::routed_expert;
    EXPECT_EQ(t.request.encoding == WeightEncoding::int4_group32, expert) << t.request.name;
    (expert ? int4 : dense)++;
  });
  EXPECT_GT(int4, 0);
  EXPECT_GT(dense, 0);
}

// config.json's quantization_config: Kimi-K2.5's is int4; every other form is refused naming
// the field and what tpbench runs.
TEST(Int4Config, KimiPresetIsInt4AndOtherFormsAreRefused) {
  const std::string path = test::preset("kimi-k2.5");
  EXPECT_EQ(load_model_config_by_name(path).quant, Quantization::int4);
  json base = json::parse(std::ifstream(models_dir() + "/kimi-k2.5.json"));
  const json q = base["text_config"]["quantization_config"];
  // Beside text_config instead of inside it: read the same.
  json beside = base;
  beside["text_config"].erase("quantization_config");
  beside["quantization_config"] = q;
  EXPECT_EQ(parse_model_config(beside, "k.json").quant, Quantization::int4);
  beside.erase("quantization_config");
  EXPECT_EQ(parse_model_config(beside, "k.json").quant, Quantization::bf16);
  auto refused = [&](const std::string& pointer, const json& value) {
    json c = base;
    c["text_config"]["quantization_config"][json::json_pointer(pointer)] = value;
    try {
      parse_model_config(c, "k.json");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  const std::string g = "/config_groups/group_0/weights/";
  EXPECT_NE(refused("/quant_method", "fp8").find("k.json: $.text_config.quantization_config.quant_method: expected \"compressed-tensors\""), std::string::npos);
  EXPECT_NE(refused("/format", "int-quantized").find(".format: expected \"pack-quantized\""), std::string::npos);
  EXPECT_NE(refused(g + "symmetric", false).find(".weights.symmetric: expected true"), std::string::npos);
  EXPECT_NE(refused(g + "group_size", 128).find(".weights.group_size: expected 32, got 128"), std::string::npos);
  EXPECT_NE(refused(g + "num_bits", 8).find(".weights.num_bits: expected 4, got 8"), std::string::npos);
  EXPECT_NE(refused(g + "strategy", "channel").find(".weights.strategy: expected \"group\""), std::string::npos);
  EXPECT_NE(refused(g + "type", "float").find(".weights.type: expected \"int\""), std::string::npos);
  EXPECT_NE(refused("/config_groups/group_0/input_activations", json{{"num_bits", 8}}).find(".input_activations: expected null"),
            std::string::npos);
}

}  // namespace
}  // namespace tpb
