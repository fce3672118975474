// Synthetic weights (see weight_source.h and tpb/kernels/synthetic_weights.h): the value of
// element (r, c) of a global [R, C] tensor is synthetic::value(kind, scale, key(name), r*C + c),
// so any block of any shard is the same slice of the same global model.
#include <cmath>
#include <sstream>
#include <utility>

#include "reference_engine/weights/weight_source.h"
#include "tpb/check.h"
#include "tpb/kernels/int4_format.h"

namespace tpb {

WeightRequest full_tensor(std::string name, std::vector<std::int64_t> shape, synthetic::InitKind init,
                          std::int64_t fan_in) {
  WeightRequest r;
  r.name = std::move(name);
  r.shape = std::move(shape);
  r.row_end = r.shape.at(0);
  r.col_end = r.shape.size() == 2 ? r.shape[1] : 1;
  r.init = init;
  r.fan_in = fan_in;
  return r;
}

void WeightSource::read_int4(const WeightRequest& request, std::uint32_t*, std::uint16_t*) {
  TPB_FAIL(describe() << " has no packed INT4 form of " << request.name);
}

void check_int4_window(const WeightRequest& req) {
  TPB_CHECK(req.encoding == WeightEncoding::int4_group32 && req.shape.size() == 2,
            req.name << ": a packed INT4 read needs a 2-D int4_group32 request");
  TPB_CHECK(req.col_begin % int4::kGroupSize == 0 && req.cols() % int4::kGroupSize == 0,
            req.name << ": packed INT4 columns [" << req.col_begin << ", " << req.col_end
                     << ") do not start and end on a group of " << int4::kGroupSize);
}

namespace {

class SyntheticWeights : public WeightSource {
 public:
  explicit SyntheticWeights(std::uint64_t seed) : seed_(seed) {}

  void read(const WeightRequest& req, float* out) override {
    const auto [key, scale] = draw_of(req);
    const std::int64_t C = req.global_cols();
    if (req.encoding == WeightEncoding::int4_group32) {
      const std::int64_t groups = int4::scale_groups(C);
      for (std::int64_t r = 0; r < req.rows(); ++r) {
        const std::int64_t gr = req.row_begin + r;
        float* row = out + r * req.cols();
        for (std::int64_t c = 0; c < req.cols(); ++c) {
          const std::int64_t gc = req.col_begin + c;
          const std::uint16_t s = synthetic::int4_scale_bits(key, static_cast<std::uint64_t>(gr * groups + gc / int4::kGroupSize), scale);
          row[c] = int4::dequant(synthetic::int4_q(key, static_cast<std::uint64_t>(gr * C + gc)), s);
        }
      }
      return;
    }
    for (std::int64_t r = 0; r < req.rows(); ++r) {
      const std::uint64_t base = static_cast<std::uint64_t>((req.row_begin + r) * C + req.col_begin);
      float* row = out + r * req.cols();
      for (std::int64_t c = 0; c < req.cols(); ++c) row[c] = synthetic::value(req.init, scale, key, base + c);
    }
  }

  void read_int4(const WeightRequest& req, std::uint32_t* packed, std::uint16_t* scales) override {
    check_int4_window(req);
    const auto [key, scale] = draw_of(req);
    const std::int64_t C = req.global_cols(), groups = int4::scale_groups(C);
    const std::int64_t words = req.cols() / int4::kPerWord, local_groups = req.cols() / int4::kGroupSize;
    for (std::int64_t r = 0; r < req.rows(); ++r) {
      const std::int64_t gr = req.row_begin + r;
      for (std::int64_t w = 0; w < words; ++w) {
        int q[int4::kPerWord];
        for (int j = 0; j < int4::kPerWord; ++j)
          q[j] = synthetic::int4_q(key, static_cast<std::uint64_t>(gr * C + req.col_begin + w * int4::kPerWord + j));
        packed[r * words + w] = int4::pack8(q);
      }
      for (std::int64_t g = 0; g < local_groups; ++g)
        scales[r * local_groups + g] = synthetic::int4_scale_bits(
            key, static_cast<std::uint64_t>(gr * groups + req.col_begin / int4::kGroupSize + g), scale);
    }
  }

  std::string describe() const override {
    std::ostringstream os;
    os << "synthetic(seed=" << seed_ << ")";
    return os.str();
  }

  std::optional<std::uint64_t> synthetic_seed() const override { return seed_; }

 private:
  // The tensor's key and its linear scale, after checking the request's block.
  std::pair<std::uint64_t, float> draw_of(const WeightRequest& req) const {
    TPB_CHECK(req.row_begin >= 0 && req.row_end <= req.shape.at(0) && req.col_begin >= 0 &&
                  req.col_end <= req.global_cols() && req.rows() >= 0 && req.cols() >= 0,
              "synthetic weights: block out of range for " << req.name);
    TPB_CHECK(req.fan_in > 0, "synthetic weights: fan_in of " << req.name << " must be positive");
    // The scale is rounded once on the host; a GPU generator receives this float, not the formula.
    return {synthetic::tensor_key(seed_, synthetic::name_hash(req.name.c_str())),
            static_cast<float>(1.0 / std::sqrt(static_cast<double>(req.fan_in)))};
  }

  std::uint64_t seed_;
};

}  // namespace

std::unique_ptr<WeightSource> make_synthetic_weights(std::uint64_t seed) {
  return std::make_unique<SyntheticWeights>(seed);
}

}  // namespace tpb
