// Synthetic weights (see weight_source.h and tpb/kernels/synthetic_weights.h): the value of
// element (r, c) of a global [R, C] tensor is synthetic::value(kind, scale, key(name), r*C + c),
// so any block of any shard is the same slice of the same global model.
#include <cmath>
#include <sstream>

#include "reference_engine/weights/weight_source.h"
#include "tpb/check.h"

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

namespace {

class SyntheticWeights : public WeightSource {
 public:
  explicit SyntheticWeights(std::uint64_t seed) : seed_(seed) {}

  void read(const WeightRequest& req, float* out) override {
    TPB_CHECK(req.row_begin >= 0 && req.row_end <= req.shape.at(0) && req.col_begin >= 0 &&
                  req.col_end <= req.global_cols() && req.rows() >= 0 && req.cols() >= 0,
              "synthetic weights: block out of range for " << req.name);
    TPB_CHECK(req.fan_in > 0, "synthetic weights: fan_in of " << req.name << " must be positive");
    const std::uint64_t key = synthetic::tensor_key(seed_, synthetic::name_hash(req.name.c_str()));
    // Rounded once on the host; a GPU generator receives this float, not the formula.
    const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(req.fan_in)));
    const std::int64_t C = req.global_cols();
    for (std::int64_t r = 0; r < req.rows(); ++r) {
      const std::uint64_t base = static_cast<std::uint64_t>((req.row_begin + r) * C + req.col_begin);
      float* row = out + r * req.cols();
      for (std::int64_t c = 0; c < req.cols(); ++c) row[c] = synthetic::value(req.init, scale, key, base + c);
    }
  }

  std::string describe() const override {
    std::ostringstream os;
    os << "synthetic(seed=" << seed_ << ")";
    return os.str();
  }

  std::optional<std::uint64_t> synthetic_seed() const override { return seed_; }

 private:
  std::uint64_t seed_;
};

}  // namespace

std::unique_ptr<WeightSource> make_synthetic_weights(std::uint64_t seed) {
  return std::make_unique<SyntheticWeights>(seed);
}

}  // namespace tpb
