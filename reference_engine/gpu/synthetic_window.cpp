// See synthetic_window.h. Mirrors SyntheticWeights::read in weights/synthetic.cpp: the same
// key, the same scale rounded once from double, the same global index (row * C + col).
#include "reference_engine/gpu/synthetic_window.h"

#include <cmath>

#include "tpb/check.h"

namespace tpb::gpu {

SyntheticWindow synthetic_window(const WeightRequest& req, std::uint64_t seed) {
  TPB_CHECK(req.row_begin >= 0 && req.row_end <= req.shape.at(0) && req.col_begin >= 0 &&
                req.col_end <= req.global_cols() && req.rows() >= 0 && req.cols() >= 0,
            "synthetic weights: block out of range for " << req.name);
  TPB_CHECK(req.fan_in > 0, "synthetic weights: fan_in of " << req.name << " must be positive");
  SyntheticWindow w;
  w.key = synthetic::tensor_key(seed, synthetic::name_hash(req.name.c_str()));
  w.kind = req.init;
  w.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(req.fan_in)));
  w.global_cols = req.global_cols();
  w.row_begin = req.row_begin;
  w.rows = req.rows();
  w.col_begin = req.col_begin;
  w.cols = req.cols();
  return w;
}

}  // namespace tpb::gpu
