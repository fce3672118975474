// Case selection (`tpbench run --case`, `--filter`) and the records' `reproduce` command:
// selected cases keep their ids, a repeat and the control come along, unknown ids and
// filters that match nothing are input errors naming them.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <set>

#include "suite/scenario/case_selection.h"
#include "suite/records/results.h"
#include "tpb/check.h"

namespace tpb {
namespace {

using nlohmann::json;

// ci-smoke's shape: tp 1/2/4 x dtype x size, every case repeated, a control first and last.
Scenario smoke() {
  return parse_scenario(json::parse(R"({"schema": 1, "name": "smoke", "workload": "allreduce", "device": "cpu",
      "sweep": {"tp": [1, 2, 4], "allreduce": ["shm"], "dtype": ["bf16", "f32"], "message_bytes": [1028, 65536]},
      "checks": ["deterministic"], "control": {"tp": 2, "dtype": "bf16", "message_bytes": 65536}})"),
                        "smoke.json", ScenarioEnv{false});
}

std::vector<Case> expand(const Scenario& s) { return expand_cases(s, MachineInfo{false, 0, {"shm"}}); }

CaseSelection by_ids(std::vector<std::string> ids) { return CaseSelection{std::move(ids), {}}; }
CaseSelection by_filters(std::vector<std::string> texts) {
  CaseSelection sel;
  for (const auto& t : texts) sel.filters.push_back(parse_case_filter(t));
  return sel;
}

const Case& find(const std::vector<Case>& cases, const std::string& role, int tp, const std::string& dtype, int bytes) {
  return *std::find_if(cases.begin(), cases.end(), [&](const Case& c) {
    return c.role == role && c.tp == tp && c.params["dtype"] == dtype && c.params["message_bytes"] == bytes;
  });
}

std::string what(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no InputError)";
}

TEST(CaseSelection, EmptySelectionKeepsEveryCase) {
  const Scenario s = smoke();
  const auto all = expand(s);
  const auto sel = select_cases(s, all, CaseSelection{});
  ASSERT_EQ(sel.size(), all.size());
  for (std::size_t i = 0; i < all.size(); ++i) EXPECT_EQ(sel[i].id, all[i].id);
}

TEST(CaseSelection, ACaseComesWithItsRepeatAndTheControlIdsUnchanged) {
  const Scenario s = smoke();
  const auto all = expand(s);
  const Case& sweep = find(all, "sweep", 4, "f32", 1028);
  const Case& repeat = find(all, "repeat", 4, "f32", 1028);
  for (const std::string& id : {sweep.id, repeat.id}) {  // either id selects the pair
    const auto sel = select_cases(s, all, by_ids({id}));
    ASSERT_EQ(sel.size(), 4u) << id;
    EXPECT_EQ(sel[0].role, "control-start");
    EXPECT_EQ(sel[0].id, all.front().id);
    EXPECT_EQ(sel[1].id, sweep.id);
    EXPECT_EQ(sel[2].id, repeat.id);
    EXPECT_EQ(sel[3].role, "control-end");
    EXPECT_EQ(sel[3].id, all.back().id);
  }
}

TEST(CaseSelection, AControlIdSelectsTheControlAlone) {
  const Scenario s = smoke();
  const auto all = expand(s);
  const auto sel = select_cases(s, all, by_ids({all.back().id}));
  ASSERT_EQ(sel.size(), 2u);
  EXPECT_EQ(sel[0].role, "control-start");
  EXPECT_EQ(sel[1].role, "control-end");
}

TEST(CaseSelection, SeveralIdsKeepExpansionOrder) {
  const Scenario s = smoke();
  const auto all = expand(s);
  const Case& a = find(all, "sweep", 4, "bf16", 65536);
  const Case& b = find(all, "sweep", 1, "bf16", 1028);
  const auto sel = select_cases(s, all, by_ids(split_case_ids(a.id + ", " + b.id)));
  ASSERT_EQ(sel.size(), 6u);
  EXPECT_EQ(sel[1].id, b.id);  // tp 1 before tp 4, as in the sweep
  EXPECT_EQ(sel[3].id, a.id);
}

TEST(CaseSelection, FilterOnTpSelectsOnlyThatTp) {
  const Scenario s = smoke();
  const auto all = expand(s);
  const auto sel = select_cases(s, all, by_filters({"tp=2"}));
  ASSERT_EQ(sel.size(), 2u * 2u * 2u + 2u);  // dtype x size x (sweep, repeat) + the control twice
  for (const auto& c : sel) EXPECT_EQ(c.tp, 2) << c.label;
}

TEST(CaseSelection, FiltersOnDifferentKeysAllHoldARepeatedKeyTakesAnyValue) {
  const Scenario s = smoke();
  const auto all = expand(s);
  const auto sel = select_cases(s, all, by_filters({"tp=1", "tp=4", "dtype=f32", "message_bytes=1028"}));
  std::vector<std::string> labels;
  for (const auto& c : sel)
    if (c.role == "sweep") labels.push_back(c.label);
  EXPECT_EQ(labels, (std::vector<std::string>{"allreduce tp1 1028B f32 shm", "allreduce tp4 1028B f32 shm"}));
  EXPECT_EQ(sel.size(), 2u * 2u + 2u);
}

TEST(CaseSelection, CaseAndFilterTogetherNarrow) {
  const Scenario s = smoke();
  const auto all = expand(s);
  const Case& a = find(all, "sweep", 4, "bf16", 65536);
  const Case& b = find(all, "sweep", 1, "bf16", 1028);
  CaseSelection sel = by_filters({"tp=4"});
  sel.ids = {a.id, b.id};
  const auto got = select_cases(s, all, sel);
  ASSERT_EQ(got.size(), 4u);
  EXPECT_EQ(got[1].id, a.id);
  sel.filters = {parse_case_filter("tp=2")};
  EXPECT_NE(what([&] { select_cases(s, all, sel); }).find("together select no case"), std::string::npos);
}

TEST(CaseSelection, ValuesMatchAsJsonOrText) {
  EXPECT_TRUE(filter_value_matches(json(2), "2"));
  EXPECT_TRUE(filter_value_matches(json(2u), "2.0"));
  EXPECT_TRUE(filter_value_matches(json(0.9), "0.90"));
  EXPECT_FALSE(filter_value_matches(json(0.9), "0.8"));
  EXPECT_TRUE(filter_value_matches(json(true), "true"));
  EXPECT_FALSE(filter_value_matches(json(true), "1"));
  EXPECT_TRUE(filter_value_matches(json("shm"), "shm"));
  EXPECT_TRUE(filter_value_matches(json("shm"), "\"shm\""));
  EXPECT_FALSE(filter_value_matches(json("shm"), "nccl"));
  EXPECT_FALSE(filter_value_matches(json(2), "two"));
}

TEST(CaseSelection, UnknownIdsAndFiltersMatchingNothingAreInputErrorsNamingThem) {
  const Scenario s = smoke();
  const auto all = expand(s);
  const std::string ids = what([&] { select_cases(s, all, by_ids({"0123456789abcdef", all[1].id, "nope"})); });
  EXPECT_NE(ids.find("no case with id 0123456789abcdef, nope"), std::string::npos) << ids;
  EXPECT_EQ(ids.find(all[1].id), std::string::npos) << ids;
  const std::string tp = what([&] { select_cases(s, all, by_filters({"tp=3"})); });
  EXPECT_NE(tp.find("--filter tp=3 matches no case (tp takes 1, 2, 4)"), std::string::npos) << tp;
  const std::string key = what([&] { select_cases(s, all, by_filters({"colour=blue", "dtype=f16"})); });
  EXPECT_NE(key.find("'colour' is not a parameter"), std::string::npos) << key;
  EXPECT_NE(key.find("--filter dtype=f16 matches no case (dtype takes bf16, f32)"), std::string::npos) << key;
  const std::string combo = what([&] { select_cases(s, all, by_filters({"tp=1", "dtype=f32", "message_bytes=65536"})); });
  EXPECT_EQ(combo.find("together select no case"), std::string::npos) << "tp 1 f32 64 KiB exists: " << combo;
  EXPECT_NE(what([] { parse_case_filter("tp"); }).find("expected KEY=VALUE"), std::string::npos);
  EXPECT_NE(what([] { parse_case_filter("=2"); }).find("expected KEY=VALUE"), std::string::npos);
  EXPECT_NE(what([] { split_case_ids("a,,b"); }).find("empty id"), std::string::npos);
}

TEST(CaseSelection, WithoutAControlOnlyTheNamedCases) {
  json doc = smoke().document;
  doc.erase("control");
  const Scenario s = parse_scenario(doc, "smoke.json", ScenarioEnv{false});
  const auto all = expand(s);
  const auto sel = select_cases(s, all, by_filters({"tp=4", "dtype=bf16", "message_bytes=1028"}));
  ASSERT_EQ(sel.size(), 2u);
  EXPECT_EQ(sel[0].role, "sweep");
  EXPECT_EQ(sel[1].role, "repeat");
}

TEST(CaseSelection, SelectionRoundTripsThroughRunJson) {
  CaseSelection sel = by_filters({"tp=2", "allreduce=shm"});
  sel.ids = {"00000000000000a1"};
  const CaseSelection back = CaseSelection::from_json(json::parse(sel.to_json().dump()));
  EXPECT_EQ(back.ids, sel.ids);
  ASSERT_EQ(back.filters.size(), 2u);
  EXPECT_EQ(back.filters[1].text(), "allreduce=shm");
  EXPECT_TRUE(CaseSelection{}.to_json().is_null());
  EXPECT_TRUE(CaseSelection::from_json(nullptr).empty());
}

TEST(Reproduce, OneShellLineQuotedWhereNeeded) {
  EXPECT_EQ(reproduce_command("/src/scenarios/ci-smoke.json", "0123456789abcdef", {}),
            "tpbench run /src/scenarios/ci-smoke.json --case 0123456789abcdef");
  EXPECT_EQ(reproduce_command("/my runs/it's.json", "00000000000000a1", {"--placement", "shared", "--mps", "require"}),
            "tpbench run '/my runs/it'\\''s.json' --case 00000000000000a1 --placement shared --mps require");
  EXPECT_EQ(shell_quote(""), "''");
  EXPECT_EQ(shell_quote("a$b"), "'a$b'");
}

TEST(RetryFailed, TheLastRecordOfACaseDecides) {
  const std::vector<json> records = {
      {{"case_id", "a"}, {"status", "failed"}}, {{"case_id", "b"}, {"status", "failed"}},
      {{"case_id", "c"}, {"status", "ok"}},     {{"case_id", "a"}, {"status", "ok"}},
      {{"case_id", "c"}, {"status", "failed"}}, {{"case_id", "d"}, {"status", "running"}},
  };
  EXPECT_EQ(failed_case_ids(records), (std::set<std::string>{"b", "c"}));
}

}  // namespace
}  // namespace tpb
