// The tensor-layout table (reference_engine/model/tensor_layout.h) and its three readers.
//
// Pinned: the CPU loader's requests (name, global shape, window, init kind, fan-in, in call
// order) and every value it stores, for small presets, as digests taken from the loader as
// it was before the table existed. Synthetic weights are a pure function of the request, so
// equal requests mean bit-identical models on the CPU and on the GPU (which makes the same
// requests, see device_weights.h).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <ostream>
#include <string>
#include <vector>

#include "reference_engine/config/model_config.h"
#include "reference_engine/model/model_weights.h"
#include "reference_engine/weights/weight_source.h"

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

// A synthetic source that digests every request and every value it hands out, in order.
class RecordingSource : public WeightSource {
 public:
  explicit RecordingSource(std::uint64_t seed) : inner_(make_synthetic_weights(seed)) {}
  void read(const WeightRequest& r, float* out) override {
    inner_->read(r, out);
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

}  // namespace
}  // namespace tpb
