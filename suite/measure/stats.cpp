#include "suite/measure/stats.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

namespace tpb {

double percentile(std::vector<double> s, double q) {
  if (s.empty()) return std::numeric_limits<double>::quiet_NaN();
  std::sort(s.begin(), s.end());
  const double pos = std::clamp(q, 0.0, 100.0) / 100.0 * static_cast<double>(s.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(pos));
  const auto hi = std::min(lo + 1, s.size() - 1);
  return s[lo] + (s[hi] - s[lo]) * (pos - static_cast<double>(lo));
}

double median(std::vector<double> s) { return percentile(std::move(s), 50.0); }

namespace {

// Number of arrangements with U = u for sizes (m, n), by the recurrence
// f(m, n, u) = f(m-1, n, u-n) + f(m, n-1, u). Returns the null CDF P(U <= u) for all u.
std::vector<double> exact_u_distribution(int m, int n) {
  // counts[j][u] for the current m, all n' in 0..n.
  std::vector<std::vector<double>> prev(n + 1), cur(n + 1);
  for (int j = 0; j <= n; ++j) prev[j] = {1.0};  // m = 0: U = 0 only
  for (int i = 1; i <= m; ++i) {
    cur[0] = {1.0};  // n' = 0: U = 0 only
    for (int j = 1; j <= n; ++j) {
      std::vector<double> c(static_cast<std::size_t>(i * j + 1), 0.0);
      for (std::size_t u = 0; u < c.size(); ++u) {
        if (u < cur[j - 1].size()) c[u] += cur[j - 1][u];                            // largest is from b
        if (u >= static_cast<std::size_t>(j) && u - j < prev[j].size()) c[u] += prev[j][u - j];  // largest is from a
      }
      cur[j] = std::move(c);
    }
    std::swap(prev, cur);
  }
  std::vector<double> counts = prev[n];
  double total = 0;
  for (double c : counts) total += c;
  std::vector<double> cdf(counts.size());
  double acc = 0;
  for (std::size_t u = 0; u < counts.size(); ++u) cdf[u] = (acc += counts[u]) / total;
  return cdf;
}

}  // namespace

MannWhitneyResult mann_whitney_u(const std::vector<double>& a, const std::vector<double>& b) {
  MannWhitneyResult r;
  const std::size_t m = a.size(), n = b.size();
  if (m == 0 || n == 0) return r;
  // Midranks over the pooled sample.
  struct Item { double v; int group; };
  std::vector<Item> pooled;
  for (double v : a) pooled.push_back({v, 0});
  for (double v : b) pooled.push_back({v, 1});
  std::sort(pooled.begin(), pooled.end(), [](const Item& x, const Item& y) { return x.v < y.v; });
  double rank_sum_a = 0, tie_term = 0;
  bool ties = false;
  for (std::size_t i = 0; i < pooled.size();) {
    std::size_t j = i;
    while (j < pooled.size() && pooled[j].v == pooled[i].v) ++j;
    const double midrank = (static_cast<double>(i + 1) + static_cast<double>(j)) / 2.0;
    const double t = static_cast<double>(j - i);
    if (t > 1) {
      ties = true;
      tie_term += t * t * t - t;
    }
    for (std::size_t k = i; k < j; ++k)
      if (pooled[k].group == 0) rank_sum_a += midrank;
    i = j;
  }
  const double dm = static_cast<double>(m), dn = static_cast<double>(n);
  r.u = rank_sum_a - dm * (dm + 1) / 2.0;
  if (!ties && m * n <= 10000) {
    const auto cdf = exact_u_distribution(static_cast<int>(m), static_cast<int>(n));
    const auto u = static_cast<std::size_t>(std::llround(r.u));
    const double lower = cdf[u];                          // P(U <= u)
    const double upper = 1.0 - (u > 0 ? cdf[u - 1] : 0);  // P(U >= u)
    r.p_value = std::min(1.0, 2.0 * std::min(lower, upper));
    r.exact = true;
    return r;
  }
  const double N = dm + dn;
  const double mean = dm * dn / 2.0;
  const double var = dm * dn / 12.0 * ((N + 1) - tie_term / (N * (N - 1)));
  if (var <= 0) return r;  // every value equal: no evidence of a difference
  const double z = (std::abs(r.u - mean) - 0.5) / std::sqrt(var);
  r.p_value = std::min(1.0, std::erfc(std::max(z, 0.0) / std::sqrt(2.0)));
  return r;
}

RatioInterval median_ratio_interval(const std::vector<double>& old_samples,
                                    const std::vector<double>& new_samples, double confidence,
                                    int resamples, std::uint64_t seed) {
  RatioInterval r;
  r.ratio = median(new_samples) / median(old_samples);
  if (old_samples.empty() || new_samples.empty()) return r;
  std::mt19937_64 rng(seed);
  std::vector<double> ratios;
  ratios.reserve(static_cast<std::size_t>(resamples));
  std::vector<double> o(old_samples.size()), n(new_samples.size());
  std::uniform_int_distribution<std::size_t> pick_o(0, old_samples.size() - 1), pick_n(0, new_samples.size() - 1);
  for (int i = 0; i < resamples; ++i) {
    for (auto& v : o) v = old_samples[pick_o(rng)];
    for (auto& v : n) v = new_samples[pick_n(rng)];
    ratios.push_back(median(n) / median(o));
  }
  const double tail = (1.0 - confidence) / 2.0 * 100.0;
  r.low = percentile(ratios, tail);
  r.high = percentile(std::move(ratios), 100.0 - tail);
  return r;
}

}  // namespace tpb
