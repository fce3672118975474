// Statistics for latency comparisons: a regression needs both a ratio of medians beyond
// tolerance and a two-sided Mann–Whitney U test rejecting at alpha (ARCHITECTURE.md,
// "Baselines and regressions"). Rank tests make no normality assumption, which latency
// samples (long right tails, occasional outliers) do not satisfy.
#pragma once

#include <cstdint>
#include <vector>

namespace tpb {

double median(std::vector<double> samples);  // empty -> NaN
// Linear-interpolated percentile, q in [0, 100]. empty -> NaN.
double percentile(std::vector<double> samples, double q);

struct MannWhitneyResult {
  double u = 0;        // U statistic of the first sample (count of pairs a > b, ties 1/2)
  double p_value = 1;  // two-sided
  bool exact = false;  // exact null distribution (no ties, small samples) vs normal approximation
};

// Two-sided Mann–Whitney U test. Exact p-value when there are no ties and n1*n2 <= 10000;
// otherwise the normal approximation with tie and continuity corrections.
MannWhitneyResult mann_whitney_u(const std::vector<double>& a, const std::vector<double>& b);

struct RatioInterval {
  double ratio = 0;  // median(new) / median(old)
  double low = 0;    // percentile-bootstrap confidence interval of that ratio
  double high = 0;
};

// Bootstrap CI of the ratio of medians; deterministic for a given seed.
RatioInterval median_ratio_interval(const std::vector<double>& old_samples,
                                    const std::vector<double>& new_samples, double confidence = 0.95,
                                    int resamples = 2000, std::uint64_t seed = 0x7470626eu);

}  // namespace tpb
