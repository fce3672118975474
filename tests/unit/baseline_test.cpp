#include <gtest/gtest.h>

#include <random>

#include "suite/records/baseline.h"

namespace tpb {
namespace {

nlohmann::json record(const std::string& id, double latency_scale, double noise, std::uint64_t seed, int n = 12) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> jitter(0.0, noise);
  nlohmann::json samples = nlohmann::json::array();
  for (int i = 0; i < n; ++i) samples.push_back(100.0 * latency_scale * (1.0 + jitter(rng)));
  return {{"case_id", id}, {"label", "decode tp2"}, {"status", "ok"},
          {"latency", {{"repetitions_us", samples}}},
          {"memory", nlohmann::json::array({{{"after_weights", {{"used_bytes", 1000000}}}}})},
          {"plan", {{"max_tokens", 5000}}},
          {"digests", nlohmann::json::array({{{"logits", "abcd"}}})}};
}

const MetricVerdict& find(const std::vector<MetricVerdict>& v, const std::string& metric) {
  for (const auto& x : v)
    if (x.metric == metric) return x;
  throw std::runtime_error("no metric " + metric);
}

TEST(Baseline, TenPercentSlowerIsRegression) {
  const auto v = compare_records(record("c1", 1.0, 0.01, 1), record("c1", 1.10, 0.01, 2), {});
  EXPECT_EQ(find(v, "latency_us").verdict, "regression");
  EXPECT_LT(find(v, "latency_us").p_value, 0.05);
}

// The significance side of the latency verdict, on one pair of runs: 8 % slower with 5 %
// noise is beyond the tolerance, and its Mann-Whitney p decides. With alpha just above that p
// it is a regression, just below it noise (not significant); inverting or dropping the alpha
// rule flips one of the two.
// The drift ceiling: the control against its stored self, either way, just inside and just
// outside; no control is never beyond it; the scenario's ceiling replaces the default.
TEST(BaselineControl, TheCeilingHoldsEitherWayJustInsideAndFailsJustOutside) {
  BaselineTolerances tol;  // 1.5
  const auto beyond = [&](double ratio) {
    LatencyControl c;
    c.ratio = ratio;
    return control_beyond_ceiling(c, tol);
  };
  EXPECT_FALSE(beyond(0)) << "no control ratio";
  EXPECT_FALSE(beyond(1.0));
  EXPECT_FALSE(beyond(1.49));
  EXPECT_TRUE(beyond(1.51));
  EXPECT_FALSE(beyond(1 / 1.49)) << "faster within the ceiling";
  EXPECT_TRUE(beyond(1 / 1.51)) << "faster beyond it";
  EXPECT_TRUE(beyond(984));
  tol = tolerances_from_json({{"control_ceiling", 1000}});
  EXPECT_FALSE(beyond(984));
  EXPECT_TRUE(beyond(1001));
}

// Rows without a decision say why, one sentence per kind, with the counts that make it so.
TEST(BaselineNotes, EachUndecidedKindIsExplainedOnce) {
  BaselineTolerances tol;
  std::vector<MetricVerdict> v(5);
  v[0].verdict = v[1].verdict = "insufficient-data";
  v[0].old_repetitions = 3, v[0].new_repetitions = 5;
  v[1].old_repetitions = 1, v[1].new_repetitions = 9;
  v[2].verdict = "noise";
  v[3].verdict = "ok";
  v[4].verdict = "no-baseline";
  const auto notes = verdict_notes(v, tol);
  ASSERT_EQ(notes.size(), 3u);
  EXPECT_NE(notes[0].find("2 rows insufficient-data"), std::string::npos) << notes[0];
  EXPECT_NE(notes[0].find("needs 9 per-repetition medians"), std::string::npos) << notes[0];
  EXPECT_NE(notes[0].find("as few as 1 (old) and 5 (new)"), std::string::npos) << notes[0];
  EXPECT_NE(notes[1].find("1 row noise"), std::string::npos) << notes[1];
  EXPECT_NE(notes[2].find("1 row no-baseline"), std::string::npos) << notes[2];
  EXPECT_TRUE(verdict_notes({v[3]}, tol).empty()) << "a decided row needs no note";
}

TEST(BaselineNotes, TheRunSaysWhenLatencyIsNotJudged) {
  BaselineTolerances tol;
  EXPECT_EQ(latency_judgement_note(tol, 9), "") << "judged";
  EXPECT_NE(latency_judgement_note(tol, 3).find("not judged: 3 repetitions per case; the U test needs 9"), std::string::npos);
  tol.latency_informational = true;
  EXPECT_NE(latency_judgement_note(tol, 1).find("informational ($.baseline.latency)"), std::string::npos);
  EXPECT_NE(latency_judgement_note(tol, 12).find("informational"), std::string::npos) << "declared, whatever the count";
}

TEST(Baseline, AlphaDecidesBetweenRegressionAndNoise) {
  const auto o = record("c1", 1.0, 0.05, 21), n = record("c1", 1.08, 0.05, 22);
  BaselineTolerances tol;
  const double p = find(compare_records(o, n, tol), "latency_us").p_value;
  ASSERT_GT(p, 1e-4) << "the pair must not be overwhelming";
  ASSERT_LT(p, 0.2);
  tol.alpha = p * 1.05;
  EXPECT_EQ(find(compare_records(o, n, tol), "latency_us").verdict, "regression") << "p " << p << " < alpha";
  tol.alpha = p * 0.95;
  EXPECT_EQ(find(compare_records(o, n, tol), "latency_us").verdict, "noise") << "p " << p << " > alpha";
  // The same on the faster side: an improvement only where significant.
  tol.alpha = p * 1.05;
  EXPECT_EQ(find(compare_records(n, o, tol), "latency_us").verdict, "improvement");
}

TEST(Baseline, NoisyButEqualIsNotRegression) {
  const auto v = compare_records(record("c1", 1.0, 0.08, 3), record("c1", 1.0, 0.08, 4), {});
  const auto& lat = find(v, "latency_us");
  EXPECT_TRUE(lat.verdict == "ok" || lat.verdict == "noise") << lat.verdict << " " << lat.detail;
}

TEST(Baseline, IterationsWithoutRepetitionsAreInsufficientData) {
  auto o = record("c1", 1.0, 0.01, 11), n = record("c1", 1.5, 0.01, 12);
  o["latency"] = {{"samples_us", o["latency"]["repetitions_us"]}, {"p50", 100.0}};
  n["latency"] = {{"samples_us", n["latency"]["repetitions_us"]}, {"p50", 150.0}};
  const auto verdicts = compare_records(o, n, {});
  const auto& lat = find(verdicts, "latency_us");
  EXPECT_EQ(lat.verdict, "insufficient-data");
  EXPECT_DOUBLE_EQ(lat.ratio, 1.5);
  // What each side really has (compare's JSON used to say "0 vs 0 repetitions").
  EXPECT_EQ(lat.detail,
            "OLD has 12 iteration samples in no per-repetition medians, NEW 12 iteration samples in no "
            "per-repetition medians; the test needs 9 repetitions on each side (measure.repetitions)");
  const auto j = to_json(lat);
  EXPECT_EQ(j["iteration_samples"]["old"], 12);
  EXPECT_EQ(j["iteration_samples"]["new"], 12);
  EXPECT_EQ(j["repetitions"]["new"], 0);
}

TEST(Baseline, FewSamplesAreInsufficientData) {
  const auto v = compare_records(record("c1", 1.0, 0.01, 5, 5), record("c1", 1.5, 0.01, 6, 5), {});
  EXPECT_EQ(find(v, "latency_us").verdict, "insufficient-data");
}

TEST(Baseline, MemoryKvAndDigests) {
  auto o = record("c1", 1.0, 0.01, 7), n = record("c1", 1.0, 0.01, 8);
  n["memory"][0]["after_weights"]["used_bytes"] = 1100000;  // +10 % > 2 %
  n["plan"]["max_tokens"] = 4000;                           // fewer tokens
  n["digests"][0]["logits"] = "ffff";
  const auto v = compare_records(o, n, {});
  EXPECT_EQ(find(v, "memory.rank0.after_weights").verdict, "regression");
  EXPECT_EQ(find(v, "kv_tokens").verdict, "regression");
  EXPECT_EQ(find(v, "digest.rank0.logits").verdict, "mismatch");
}

TEST(Baseline, MissingCaseIsNoBaselineNeverPass) {
  const auto v = compare_runs({record("old", 1, 0.01, 9)}, {record("new", 1, 0.01, 10)}, {});
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].verdict, "no-baseline");
  EXPECT_FALSE(is_regression(v[0]));
}

// compare exits 2 with the reason when nothing is comparable, instead of "0 regressions".
TEST(Baseline, NothingComparableSaysWhy) {
  const auto a = record("a", 1, 0.01, 1), b = record("b", 1, 0.01, 2);
  nlohmann::json skipped = {{"case_id", "a"}, {"status", "skipped"}, {"error", "device cuda: no GPU is visible"}};
  nlohmann::json failed = {{"case_id", "b"}, {"status", "failed"}};
  EXPECT_EQ(nothing_comparable({a, b}, {b}, "A", "B"), "");
  EXPECT_EQ(nothing_comparable({}, {a}, "/dev/null", "B"), "OLD /dev/null holds no record");
  EXPECT_EQ(nothing_comparable({a}, {}, "A", "empty.jsonl"), "NEW empty.jsonl holds no record");
  EXPECT_EQ(nothing_comparable({a}, {skipped, skipped, failed}, "A", "gpu-run"),
            "NEW gpu-run holds no ok record (3 records: 1 failed, 2 skipped)");
  EXPECT_EQ(nothing_comparable({a}, {b, record("c", 1, 0.01, 3)}, "A", "B"),
            "no case id in common: OLD A has 1 ok case, NEW B 2, none the same");
}

// A run of three cases with the control first and last (fabricated: each latency scaled, 3 %
// jitter, 12 repetitions).
std::vector<nlohmann::json> run_of(double control_scale, double case_a_scale, double case_b_scale,
                                   std::uint64_t seed) {
  auto role = [](nlohmann::json r, const std::string& role) {
    r["role"] = role;
    return r;
  };
  return {role(record("ctl", control_scale, 0.03, seed), "control-start"),
          role(record("a", case_a_scale, 0.03, seed + 1), "sweep"),
          role(record("b", case_b_scale, 0.03, seed + 2), "sweep"),
          role(record("ctl-end", control_scale, 0.03, seed + 3), "control-end")};
}

const MetricVerdict& latency_of(const std::vector<MetricVerdict>& v, const std::string& case_id) {
  for (const auto& x : v)
    if (x.case_id == case_id && x.metric == "latency_us") return x;
  throw std::runtime_error("no latency verdict for " + case_id);
}

// Issue 15 path 5: the whole machine 3x slower, the control too, is drift, not 3 regressions.
TEST(BaselineControl, MachineSlowerAcrossTheBoardIsMachineDrift) {
  const auto old_run = run_of(1, 1, 1, 100), new_run = run_of(3, 3, 3, 200);
  const LatencyControl control = latency_control(old_run, new_run, {});
  EXPECT_EQ(control.case_id, "ctl");
  EXPECT_NEAR(control.ratio, 3.0, 0.3);
  EXPECT_TRUE(control.moved);
  const auto verdicts = compare_runs(old_run, new_run, {});
  for (const std::string id : {"ctl", "a", "b", "ctl-end"}) {
    const auto& v = latency_of(verdicts, id);
    EXPECT_EQ(v.verdict, "machine-drift") << id << ": " << v.detail;
    EXPECT_FALSE(is_regression(v));
    EXPECT_NEAR(v.ratio, 3.0, 0.3) << "the raw ratio stays in the verdict";
    EXPECT_NEAR(v.normalised_ratio, 1.0, 0.1);
    EXPECT_EQ(v.control_case_id, "ctl");
    EXPECT_LT(v.raw_p_value, 0.05);
    const auto j = to_json(v);
    EXPECT_TRUE(j.contains("normalised_ratio") && j.contains("control") && j.contains("ratio"));
  }
}

TEST(BaselineControl, OneCaseSlowerWithASteadyControlIsRegression) {
  const auto verdicts = compare_runs(run_of(1, 1, 1, 300), run_of(1, 3, 1, 400), {});
  const auto& a = latency_of(verdicts, "a");
  EXPECT_EQ(a.verdict, "regression") << a.detail;
  EXPECT_NEAR(a.ratio, 3.0, 0.3);
  EXPECT_NEAR(a.normalised_ratio, 3.0, 0.3);
  EXPECT_LT(a.p_value, 0.05);
  for (const std::string id : {"ctl", "b"}) {
    const auto& v = latency_of(verdicts, id);
    EXPECT_TRUE(v.verdict == "ok" || v.verdict == "noise") << id << ": " << v.verdict;
  }
}

// A case 3x slower on a machine 3x slower: 9x raw, 3x relative to the control.
TEST(BaselineControl, ARegressionOnADriftingMachineIsStillARegression) {
  const auto verdicts = compare_runs(run_of(1, 1, 1, 500), run_of(3, 9, 3, 600), {});
  EXPECT_EQ(latency_of(verdicts, "a").verdict, "regression");
  EXPECT_NEAR(latency_of(verdicts, "a").normalised_ratio, 3.0, 0.3);
  EXPECT_EQ(latency_of(verdicts, "b").verdict, "machine-drift");
}

TEST(BaselineControl, WithoutAControlTheRuleIsAsBefore) {
  // No control case: 3x slower everywhere is three regressions, the raw ratio judged.
  std::vector<nlohmann::json> old_run = {record("a", 1, 0.03, 1), record("b", 1, 0.03, 2)};
  std::vector<nlohmann::json> new_run = {record("a", 3, 0.03, 3), record("b", 3, 0.03, 4)};
  const LatencyControl control = latency_control(old_run, new_run, {});
  EXPECT_EQ(control.ratio, 0);
  EXPECT_EQ(control.why_none, "no control case ran ok");
  for (const std::string id : {"a", "b"}) {
    const auto verdicts = compare_runs(old_run, new_run, {});  // named: latency_of returns into it
    const auto& v = latency_of(verdicts, id);
    EXPECT_EQ(v.verdict, "regression");
    EXPECT_EQ(v.control_ratio, 0);
    EXPECT_FALSE(to_json(v).contains("normalised_ratio"));
  }
  // A control with too few repetitions normalises nothing, and says why.
  auto old_few = run_of(1, 1, 1, 7), new_few = run_of(3, 3, 3, 8);
  old_few[0]["latency"]["repetitions_us"] = nlohmann::json::array({100.0, 101.0});
  EXPECT_EQ(latency_control(old_few, new_few, {}).why_none, "control ctl has 2 vs 12 repetitions, need 9");
  EXPECT_EQ(latency_of(compare_runs(old_few, new_few, {}), "a").verdict, "regression");
}

// The control normalises the significance test too, not only the ratio: a case 2.2 x slower
// on a machine whose control is 2 x slower is 1.1 x relative to it, and with 20 % noise that
// is not significant, so the verdict is machine-drift (the machine moved, the case with it).
// Judging the raw samples instead would call it a regression.
TEST(BaselineControl, TheSignificanceTestIsRelativeToTheControl) {
  auto role = [](nlohmann::json r, const std::string& role) {
    r["role"] = role;
    return r;
  };
  const std::vector<nlohmann::json> old_run = {role(record("ctl", 1.0, 0.01, 31), "control-start"),
                                               role(record("a", 1.0, 0.2, 32), "sweep")};
  const std::vector<nlohmann::json> new_run = {role(record("ctl", 2.0, 0.01, 33), "control-start"),
                                               role(record("a", 2.2, 0.2, 34), "sweep")};
  const auto verdicts = compare_runs(old_run, new_run, {});  // named: latency_of returns into it
  const auto& a = latency_of(verdicts, "a");
  ASSERT_GT(a.p_value, 0.05) << "relative to the control the pair must not be significant: " << a.detail;
  ASSERT_LT(a.raw_p_value, 0.05) << "raw it must be: " << a.detail;
  EXPECT_EQ(a.verdict, "machine-drift") << a.detail;
}

// A control that moved beyond the tolerance but not significantly (a noisy control) has not
// moved: its ratio may not explain a case's slowdown away.
TEST(BaselineControl, ANoisyControlHasNotMoved) {
  auto role = [](nlohmann::json r, const std::string& role) {
    r["role"] = role;
    return r;
  };
  const std::vector<nlohmann::json> old_run = {role(record("ctl", 1.0, 0.3, 41), "control-start")};
  const std::vector<nlohmann::json> new_run = {role(record("ctl", 1.1, 0.3, 42), "control-start")};
  const LatencyControl c = latency_control(old_run, new_run, {});
  ASSERT_GT(std::abs(c.ratio - 1.0), 0.05) << "beyond the default 5 % tolerance";
  ASSERT_GT(c.p_value, 0.05) << "and not significant";
  EXPECT_FALSE(c.moved);
}

// A digest that differs from the stored one is a regression for the exit status and JUnit.
TEST(Baseline, ADigestMismatchIsARegression) {
  auto o = record("c1", 1.0, 0.01, 51), n = record("c1", 1.0, 0.01, 52);
  n["digests"][0]["logits"] = "ffff";
  const auto v = compare_records(o, n, {});
  EXPECT_TRUE(is_regression(find(v, "digest.rank0.logits")));
  EXPECT_FALSE(is_regression(find(v, "latency_us")));
}

// "The last record of a case counts" in compare: a case that was ok and then failed in NEW
// is not compared by its earlier ok record but reported not-ok (a regression); a record
// repeated in NEW is compared once; a baseline whose last record of a case failed is no
// baseline for it.
TEST(Baseline, CompareTakesEachCasesLastRecordOnce) {
  auto failed = [](nlohmann::json r) {
    r["status"] = "failed";
    return r;
  };
  const auto old_ok = record("c1", 1.0, 0.01, 61), new_ok = record("c1", 1.0, 0.01, 62);
  const auto later_failed = compare_runs({old_ok}, {new_ok, failed(new_ok)}, {});
  ASSERT_EQ(later_failed.size(), 1u);
  EXPECT_EQ(later_failed[0].metric, "case");
  EXPECT_EQ(later_failed[0].verdict, "not-ok") << later_failed[0].detail;
  EXPECT_TRUE(is_regression(later_failed[0]));
  const auto retried = compare_runs({old_ok}, {failed(new_ok), new_ok}, {});
  EXPECT_EQ(find(retried, "latency_us").verdict, "ok") << "the retry that passed is the case's record";
  std::size_t twice = 0;
  for (const auto& v : compare_runs({old_ok}, {new_ok, new_ok}, {})) twice += v.metric == "latency_us";
  EXPECT_EQ(twice, 1u) << "a repeated record is compared once";
  const auto stale = compare_runs({old_ok, failed(old_ok)}, {new_ok}, {});
  ASSERT_EQ(stale.size(), 1u);
  EXPECT_EQ(stale[0].verdict, "no-baseline");
  EXPECT_NE(stale[0].detail.find("last record in the baseline is failed"), std::string::npos) << stale[0].detail;
}

TEST(Baseline, HardwareDirName) {
  EXPECT_EQ(hardware_dir_name({{"gpus", nlohmann::json::array()}}), "cpu-ref");
  EXPECT_EQ(hardware_dir_name({{"gpus", {{{"name", "NVIDIA H200"}}, {{"name", "NVIDIA H200"}}}}}), "h200x2");
}

// A build as suite/records/provenance.cpp records it (a CUDA build, as on the GPU machine).
nlohmann::json build(const std::string& sha = "27adb80bd4ebc68760995a86564d06e5143997ad", bool dirty = false,
                     const std::string& type = "Release") {
  return {{"tpbench_version", "0.1.0"}, {"git_sha", sha},       {"git_dirty", dirty},
          {"build_type", type},         {"compiler", "GNU 13.3.0"}, {"cxx_flags", "-O3 -DNDEBUG"},
          {"have_cuda", true},          {"cuda_compiler", "13.0.88"}, {"cuda_flags", "-O3 -DNDEBUG"},
          {"cuda_architectures", "90"}};
}

bool mentions(const std::vector<std::string>& lines, const std::string& text) {
  for (const auto& l : lines)
    if (l.find(text) != std::string::npos) return true;
  return false;
}

TEST(BaselineBuild, SameBuildAndAnotherCommitAreLikeForLike) {
  // Another commit is what a baseline is for: not a mismatch.
  const auto same = compare_builds(build(), build());
  EXPECT_TRUE(same.compared);
  EXPECT_TRUE(same.like_for_like);
  EXPECT_TRUE(same.differences.empty());
  EXPECT_TRUE(same.notes().empty());
  EXPECT_TRUE(compare_builds(build(), build("be8f35f000000000000000000000000000000000")).like_for_like);
  EXPECT_EQ(compare_builds(build(), build()).to_json()["verdict"], "ok");
}

TEST(BaselineBuild, DirtySideIsNotLikeForLike) {
  for (const bool old_dirty : {true, false}) {
    const auto c = compare_builds(build("27adb80bd4ebc68760995a86564d06e5143997ad", old_dirty),
                                  build("27adb80bd4ebc68760995a86564d06e5143997ad", !old_dirty));
    EXPECT_FALSE(c.like_for_like);
    ASSERT_EQ(c.differences.size(), 1u);
    EXPECT_EQ(c.differences[0], std::string(old_dirty ? "OLD" : "NEW") + " is from a dirty tree (27adb80bd4eb+dirty)");
    EXPECT_EQ(c.to_json()["verdict"], "not-like-for-like");
  }
}

TEST(BaselineBuild, BuildTypeCompilerFlagsAndArchitecturesMustAgree) {
  const auto debug = compare_builds(build("a", false, "Debug"), build(), "stored baseline", "this build");
  EXPECT_FALSE(debug.like_for_like);
  EXPECT_EQ(debug.why(), "build type: Debug (stored baseline) vs Release (this build)");
  for (const char* key : {"compiler", "cxx_flags", "cuda_compiler", "cuda_flags", "cuda_architectures"}) {
    auto other = build();
    other[key] = "something else";
    const auto c = compare_builds(build(), other);
    EXPECT_FALSE(c.like_for_like) << key;
    EXPECT_EQ(c.differences.size(), 1u) << key;
  }
  // The path: another sha, a dirty tree and a Debug build: two reasons, both named.
  const auto incident = compare_builds(build("0123456789abcdef", true, "Debug"), build());
  EXPECT_FALSE(incident.like_for_like);
  EXPECT_EQ(incident.why(), "OLD is from a dirty tree (0123456789ab+dirty); build type: Debug (OLD) vs Release (NEW)");
}

TEST(BaselineBuild, CudaFieldsCountOnlyWhereBothSidesHaveCuda) {
  auto cpu = build();
  cpu["have_cuda"] = false;
  cpu["cuda_compiler"] = "";
  cpu["cuda_flags"] = "";
  cpu["cuda_architectures"] = "";
  const auto c = compare_builds(cpu, build());
  EXPECT_TRUE(c.like_for_like) << c.why();
  EXPECT_TRUE(c.unknown_old.empty());
}

TEST(BaselineBuild, UnknownFieldsAreListedNotJudged) {
  // A record stored before builds were fingerprinted: version, sha, dirty and build type.
  const nlohmann::json old_record_provenance = {{"tpbench_version", "0.1.0"}, {"git_sha", "27adb80"},
                                                {"git_dirty", false}, {"build_type", "Release"}};
  const auto c = compare_builds(build_fingerprint(old_record_provenance), build(), "stored baseline", "this build");
  EXPECT_TRUE(c.like_for_like) << c.why();
  EXPECT_EQ(c.unknown_old, (std::vector<std::string>{"compiler", "C++ flags", "CUDA compiler", "CUDA flags",
                                                     "CUDA architectures"}));
  EXPECT_TRUE(c.unknown_new.empty());
  ASSERT_EQ(c.notes().size(), 1u);
  EXPECT_EQ(c.notes()[0],
            "stored baseline predates build fingerprints: compiler, C++ flags, CUDA compiler, CUDA flags, "
            "CUDA architectures unknown (judged on the fields both sides record)");
  // What is known on both sides still decides: the old build type differs.
  auto debug = old_record_provenance;
  debug["build_type"] = "Debug";
  EXPECT_FALSE(compare_builds(build_fingerprint(debug), build()).like_for_like);
}

TEST(BaselineBuild, RecordBuildFillsGapsFromItsFileOnlyForTheSameCommit) {
  const nlohmann::json file = build();  // a .provenance.json's provenance: the whole build
  const nlohmann::json rec = {{"provenance", {{"git_sha", file["git_sha"]}, {"git_dirty", false}, {"build_type", "Release"}}}};
  EXPECT_EQ(record_build(rec, file), build());
  nlohmann::json other = rec;
  other["provenance"]["git_sha"] = "ffff";
  EXPECT_TRUE(record_build(other, file)["compiler"].is_null());
  EXPECT_EQ(builds_of({rec, rec}, file).size(), 1u);
  EXPECT_EQ(builds_of({rec, other}, file).size(), 2u);
  EXPECT_EQ(builds_of({}, file).size(), 1u);
  EXPECT_TRUE(builds_of({}, nullptr).empty());
}

TEST(BaselineBuild, SetsOfBuilds) {
  EXPECT_FALSE(compare_build_sets({}, {build()}).compared);
  const auto mixed = compare_build_sets({build("aaaa"), build("bbbb")}, {build()});
  EXPECT_TRUE(mixed.compared);
  EXPECT_FALSE(mixed.like_for_like);
  EXPECT_TRUE(mentions(mixed.differences, "OLD holds records of 2 builds (aaaa, bbbb)"));
  const auto dirty = compare_build_sets({build("aaaa", true)}, {build()});
  EXPECT_FALSE(dirty.like_for_like);
}

TEST(BaselineBuild, DescribeAndFingerprint) {
  EXPECT_EQ(describe_build(build("27adb80bd4ebc68760995a86564d06e5143997ad", true, "Debug")),
            "tpbench 0.1.0, 27adb80bd4eb+dirty, Debug, GNU 13.3.0");
  EXPECT_EQ(describe_build(nlohmann::json::object()), "tpbench ?, ?+dirty?, ?, ?");
  // The fingerprint carries the build; the folder name stays the hardware's.
  nlohmann::json p = build();
  p["gpus"] = {{{"name", "NVIDIA H200"}}};
  EXPECT_EQ(hardware_fingerprint(p)["build"], build());
  EXPECT_EQ(hardware_dir_name(p), "h200x1");
}

}  // namespace
}  // namespace tpb
