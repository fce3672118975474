// The terminal's numbers (suite/records/case_summary.h): a case line's key numbers and the end-of-run
// tables, from records alone, with units and the statistic named.
#include <gtest/gtest.h>

#include "suite/records/case_summary.h"

namespace tpb {
namespace {

using nlohmann::json;

json allreduce_record(const std::string& label, double mean_us, double p50_us, double algbw) {
  return {{"workload", "allreduce"},
          {"label", label},
          {"status", "ok"},
          {"params", {{"tp", 2}}},
          {"latency", {{"mean", mean_us}, {"p50", p50_us}, {"p99", p50_us * 2}, {"unit", "us"}}},
          {"throughput", {{"algbw_GBps", algbw}, {"busbw_GBps", algbw}, {"basis", "mean"}}}};
}

json engine_record(const std::string& mode, const std::string& label, double p50_us, double tps, double x = -1) {
  json r = {{"workload", "engine"},
            {"label", label},
            {"status", "ok"},
            {"params", {{"mode", mode}}},
            {"latency", {{"mean", p50_us}, {"p50", p50_us}, {"p99", p50_us * 1.5}, {"unit", "us"}}},
            {"throughput", {{"tokens_per_s", tps}, {"basis", "mean"}}},
            {"metrics", json::array({json::object()})}};
  if (x > 0) r["metrics"][0]["x_weight_read_time"] = x;
  return r;
}

TEST(CaseSummary, KeyNumbersPerWorkload) {
  EXPECT_EQ(case_key_numbers(allreduce_record("tp2", 163.96, 87.59, 0.39970)),
            "mean 164.0 us  p50 87.59 us  algbw 0.400 GB/s  busbw 0.400 GB/s");
  EXPECT_EQ(case_key_numbers(engine_record("decode", "d", 15.9, 62918.4, 3.214)),
            "step p50 15.90 us  p99 23.85 us  mean 15.90 us = 62918 tok/s  x3.21 weight-read");
  EXPECT_EQ(case_key_numbers(engine_record("prefill", "p", 1234.0, 26112.0)), "TTFT p50 1.234 ms  p99 1.851 ms  mean 1.234 ms = 26112 tok/s");
  EXPECT_EQ(case_key_numbers({{"workload", "allreduce"}, {"status", "skipped"}, {"latency", nullptr}}), "")
      << "no latency, no numbers";
}

TEST(CaseSummary, OneTablePerWorkloadAndMode) {
  json failed = allreduce_record("tp2 1MiB", 2.5e6, 2.4e6, 0.42);
  failed["status"] = "fallback";
  const std::string t = results_tables({allreduce_record("tp2 64KiB", 12.25, 11.5, 5.351), failed,
                                        engine_record("decode", "decode tp1 b1", 15.9, 62918.4),
                                        {{"workload", "allreduce"}, {"label", "skipped one"}, {"status", "skipped"}}});
  EXPECT_NE(t.find("allreduce: mean and p50 of a step; algbw = bytes / mean time,\n  busbw = algbw x 2(n-1)/n"), std::string::npos) << t;
  EXPECT_NE(t.find("  case           mean       p50  algbw GB/s  busbw GB/s  status\n"), std::string::npos) << t;
  EXPECT_NE(t.find("  tp2 64KiB  12.25 us  11.50 us        5.35        5.35  ok\n"), std::string::npos) << t;
  EXPECT_NE(t.find("  tp2 1MiB    2.500 s   2.400 s       0.420       0.420  fallback\n"), std::string::npos) << t;
  EXPECT_NE(t.find("decode: one step"), std::string::npos) << t;
  EXPECT_NE(t.find("  decode tp1 b1  15.90 us  23.85 us  15.90 us     62918  ok\n"), std::string::npos)
      << t << "no row has x weight-read: no such column";
  const std::string gpu = results_tables({engine_record("decode", "decode tp1 b1", 15.9, 62918.4, 3.214),
                                          engine_record("decode", "decode tp1 b8", 20.1, 398000.0)});
  EXPECT_NE(gpu.find("  x weight-read: step p50 / the time to read the weights once\n"), std::string::npos) << gpu;
  for (const std::string& text : {t, gpu}) {
    std::size_t line_start = 0;
    for (std::size_t nl = text.find('\n'); nl != std::string::npos; line_start = nl + 1, nl = text.find('\n', line_start))
      if (text.compare(line_start, 2, "  ") != 0) {
        EXPECT_LE(nl - line_start, 70u) << "an explanation wider than 70 columns";
      }
  }
  EXPECT_NE(gpu.find("  case           step p50       p99      mean  tokens/s  x weight-read  status\n"), std::string::npos) << gpu;
  EXPECT_NE(gpu.find("  decode tp1 b1  15.90 us  23.85 us  15.90 us     62918           3.21  ok\n"), std::string::npos) << gpu;
  EXPECT_NE(gpu.find("  decode tp1 b8  20.10 us  30.15 us  20.10 us    398000              -  ok\n"), std::string::npos) << gpu;
  EXPECT_EQ(t.find("skipped one"), std::string::npos) << "a record without latency is not a row";
  EXPECT_EQ(t.find("prefill"), std::string::npos) << "no prefill records, no prefill table";
  EXPECT_EQ(results_tables({}), "");
}

// One statistic per column, said in the header: the tail of fewer than 100 samples is their
// maximum and is called so, for the whole column; tokens/s sits beside the mean it comes from.
TEST(CaseSummary, TheTailOfFewSamplesIsCalledMax) {
  json few = engine_record("decode", "few", 10.0, 100.0);
  few["latency"]["count"] = 30;
  few["latency"]["max"] = 99.0;
  json many = engine_record("decode", "many", 20.0, 50.0);
  many["latency"]["count"] = 1000;
  many["latency"]["max"] = 500.0;
  EXPECT_EQ(case_key_numbers(few), "step p50 10.00 us  max 99.00 us  mean 10.00 us = 100 tok/s");
  EXPECT_EQ(case_key_numbers(many), "step p50 20.00 us  p99 30.00 us  mean 20.00 us = 50.0 tok/s");
  const std::string mixed = results_tables({few, many});
  EXPECT_NE(mixed.find("p50, max (under 100 samples: no p99), mean"), std::string::npos) << mixed;
  EXPECT_NE(mixed.find("  case  step p50       max      mean  tokens/s  status\n"), std::string::npos) << mixed;
  EXPECT_NE(mixed.find("  many  20.00 us  500.0 us  20.00 us      50.0  ok\n"), std::string::npos)
      << mixed << "the whole column is max";
  EXPECT_NE(results_tables({many}).find("p50, p99, mean"), std::string::npos);
}

}  // namespace
}  // namespace tpb
