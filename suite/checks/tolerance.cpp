#include "suite/checks/tolerance.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace tpb {

namespace {

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

std::string first_values(const std::vector<float>& v, std::size_t n) {
  std::string s = "[";
  for (std::size_t i = 0; i < std::min(n, v.size()); ++i) s += (i ? ", " : "") + num(v[i]);
  return s + (v.size() > n ? ", ...]" : "]");
}

}  // namespace

FloatComparison compare_rel_l2(const std::vector<float>& ref, const std::vector<float>& got, double rel_l2_budget) {
  FloatComparison c;
  c.budget = rel_l2_budget;
  c.same_length = ref.size() == got.size();
  c.count = std::min(ref.size(), got.size());
  double diff_sq = 0, ref_sq = 0;
  for (std::size_t i = 0; i < c.count; ++i) {
    const bool bad_ref = !std::isfinite(ref[i]), bad_got = !std::isfinite(got[i]);
    c.nonfinite_ref += bad_ref;
    c.nonfinite_got += bad_got;
    if ((bad_ref || bad_got) && c.first_nonfinite < 0) c.first_nonfinite = static_cast<std::int64_t>(i);
    if (bad_ref || bad_got) continue;
    const double d = static_cast<double>(got[i]) - ref[i];
    diff_sq += d * d;
    ref_sq += static_cast<double>(ref[i]) * ref[i];
    if (std::fabs(d) > c.max_abs || c.worst_index < 0) {
      c.max_abs = std::fabs(d);
      c.worst_index = static_cast<std::int64_t>(i);
    }
  }
  c.rel_l2 = ref_sq > 0 ? std::sqrt(diff_sq / ref_sq) : (diff_sq > 0 ? INFINITY : 0.0);
  c.pass = c.same_length && c.count > 0 && c.nonfinite_ref == 0 && c.nonfinite_got == 0 && c.rel_l2 <= c.budget;
  return c;
}

std::string describe_comparison(const std::string& what, const FloatComparison& c, const std::vector<float>& ref,
                                const std::vector<float>& got, const std::string& ref_name, const std::string& got_name) {
  std::string s = what + ": " + ref_name + " vs " + got_name + ": ";
  if (!c.same_length) s += "lengths differ (" + std::to_string(ref.size()) + " vs " + std::to_string(got.size()) + "); ";
  if (c.count == 0) s += "nothing to compare; ";
  if (c.nonfinite_ref || c.nonfinite_got) {
    const auto i = static_cast<std::size_t>(c.first_nonfinite);
    s += "NaN/Inf: " + std::to_string(c.nonfinite_ref) + " in " + ref_name + ", " + std::to_string(c.nonfinite_got) +
         " in " + got_name + ", first at index " + std::to_string(i) + " (" + ref_name + ": " + num(ref[i]) + ", " +
         got_name + ": " + num(got[i]) + "); ";
  }
  s += "rel-L2 " + num(c.rel_l2) + " (budget " + num(c.budget) + ", " + num(100.0 * c.rel_l2 / c.budget) +
       "% used), max abs " + num(c.max_abs);
  if (c.worst_index >= 0) {
    const auto i = static_cast<std::size_t>(c.worst_index);
    s += " at index " + std::to_string(i) + " (" + ref_name + ": " + num(ref[i]) + ", " + got_name + ": " + num(got[i]) + ")";
  }
  s += " over " + std::to_string(c.count) + " values; first values: " + ref_name + " " + first_values(ref, 4) + ", " +
       got_name + " " + first_values(got, 4);
  return s;
}

std::vector<std::int64_t> greedy_tokens(const std::vector<float>& values, std::int64_t row_length) {
  std::vector<std::int64_t> out;
  if (row_length <= 0) return out;
  const std::size_t rows = values.size() / static_cast<std::size_t>(row_length);
  for (std::size_t r = 0; r < rows; ++r) {
    const auto begin = values.begin() + static_cast<std::ptrdiff_t>(r * row_length);
    out.push_back(std::max_element(begin, begin + row_length) - begin);
  }
  return out;
}

}  // namespace tpb
