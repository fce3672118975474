// record.allreduce_ran (see allreduce_ran.h).
#include "suite/measure/allreduce_ran.h"

#include <algorithm>
#include <cstdint>
#include <tuple>

namespace tpb {

namespace {

using nlohmann::json;

std::uint64_t uint_field(const json& o, const char* key) {
  return o.is_object() && o.contains(key) && o[key].is_number_unsigned() ? o[key].get<std::uint64_t>() : 0;
}

std::string string_field(const json& o, const char* key) {
  return o.is_object() && o.contains(key) && o[key].is_string() ? o[key].get<std::string>() : std::string();
}

// A rank's allreduce_calls as the record's "ran" list, smallest messages first.
json ran_list(const json& comm) {
  json ran = json::array();
  if (!comm.is_object() || !comm.contains("allreduce_calls") || !comm["allreduce_calls"].is_array()) return ran;
  for (const json& e : comm["allreduce_calls"])
    if (e.is_object() && uint_field(e, "calls") > 0)
      ran.push_back({{"backend", string_field(e, "backend")},
                     {"calls", uint_field(e, "calls")},
                     {"bytes_min", uint_field(e, "bytes_min")},
                     {"bytes_max", uint_field(e, "bytes_max")}});
  std::sort(ran.begin(), ran.end(), [](const json& a, const json& b) {
    return std::make_tuple(uint_field(a, "bytes_min"), uint_field(a, "bytes_max"), string_field(a, "backend")) <
           std::make_tuple(uint_field(b, "bytes_min"), uint_field(b, "bytes_max"), string_field(b, "backend"));
  });
  return ran;
}

std::uint64_t total_calls(const json& ran) {
  std::uint64_t n = 0;
  for (const json& e : ran) n += uint_field(e, "calls");
  return n;
}

std::uint64_t calls_on(const json& ran, const std::string& backend) {
  std::uint64_t n = 0;
  for (const json& e : ran)
    if (string_field(e, "backend") == backend) n += uint_field(e, "calls");
  return n;
}

// "nccl" / "nccl and custom-twoshot": the backends of `ran` other than `except`.
std::string others_text(const json& ran, const std::string& except) {
  std::vector<std::string> names;
  for (const json& e : ran) {
    const std::string b = string_field(e, "backend");
    if (b != except && std::find(names.begin(), names.end(), b) == names.end()) names.push_back(b);
  }
  std::string text;
  for (std::size_t i = 0; i < names.size(); ++i)
    text += (i == 0 ? "" : i + 1 == names.size() ? " and " : ", ") + names[i];
  return text;
}

}  // namespace

std::string bytes_text(std::uint64_t bytes) {
  if (bytes >= (1u << 20) && bytes % (1u << 20) == 0) return std::to_string(bytes >> 20) + " MiB";
  if (bytes >= (1u << 10) && bytes % (1u << 10) == 0) return std::to_string(bytes >> 10) + " KiB";
  return std::to_string(bytes) + " B";
}

std::vector<std::string> ran_backends(const json& allreduce_ran) {
  std::vector<std::string> names;
  if (!allreduce_ran.is_object() || !allreduce_ran.contains("ran") || !allreduce_ran["ran"].is_array()) return names;
  for (const json& e : allreduce_ran["ran"]) {
    const std::string b = string_field(e, "backend");
    if (std::find(names.begin(), names.end(), b) == names.end()) names.push_back(b);
  }
  return names;
}

std::string ran_text(const json& ran) {
  if (!ran.is_array() || ran.empty()) return "no allreduce call counted";
  std::string text;
  for (const json& e : ran) {
    const std::uint64_t lo = uint_field(e, "bytes_min"), hi = uint_field(e, "bytes_max"), n = uint_field(e, "calls");
    text += (text.empty() ? "" : ", ") + string_field(e, "backend") + " " + std::to_string(n) + (n == 1 ? " call (" : " calls (") +
            bytes_text(lo) + (hi != lo ? " to " + bytes_text(hi) : std::string()) + ")";
  }
  return text;
}

json allreduce_ran_from_ranks(const json& params, const std::vector<json>& comm_per_rank) {
  const std::string requested = string_field(params, "allreduce");
  const json rank0 = comm_per_rank.empty() ? json::object() : comm_per_rank.front();
  if (requested.empty() && string_field(rank0, "backend").empty()) return nullptr;
  const json ran = ran_list(rank0);
  const std::string reason = string_field(rank0, "fallback_reason");
  const std::uint64_t total = total_calls(ran);
  json out = {{"requested", requested}, {"backend", string_field(rank0, "backend")}, {"ran", ran}, {"fallback", nullptr}};
  if (total == 0) {
    out["verdict"] = "no-calls";
  } else if (requested == "auto") {
    // Auto picks a path per message size: whatever it picked is as requested. When no custom
    // path carried a call it ran NCCL alone, and its reason says why (thresholds, peer access).
    out["verdict"] = "as-requested";
    bool custom = false;
    for (const json& e : ran) custom = custom || string_field(e, "backend").rfind("custom-", 0) == 0;
    if (!custom) out["fallback"] = reason.empty() ? "auto ran " + others_text(ran, "") + " only" : reason;
  } else {
    const std::uint64_t own = calls_on(ran, requested);
    if (own == total) {
      out["verdict"] = "as-requested";
    } else {
      out["verdict"] = own == 0 ? "fallback" : "partial-fallback";
      out["fallback"] = !reason.empty() ? reason
                                        : others_text(ran, requested) + " carried " + std::to_string(total - own) + " of " +
                                              std::to_string(total) + " allreduce calls";
    }
  }
  for (std::size_t r = 1; r < comm_per_rank.size(); ++r) {
    const json other = ran_list(comm_per_rank[r]);
    if (other != ran) {
      out["ranks_differ"] = "rank " + std::to_string(r) + " ran " + ran_text(other) + ", rank 0 " + ran_text(ran);
      break;
    }
  }
  return out;
}

std::string allreduce_ran_note(const json& ar) {
  if (!ar.is_object()) return "";
  const std::string requested = string_field(ar, "requested"), verdict = string_field(ar, "verdict");
  const json ran = ar.value("ran", json::array());
  const std::string why = string_field(ar, "fallback");
  const std::string total = std::to_string(total_calls(ran));
  std::string note;
  if (verdict == "fallback")
    note = requested + " requested, " + others_text(ran, requested) + " ran all " + total + " allreduce calls";
  else if (verdict == "partial-fallback")
    note = requested + " requested: " + others_text(ran, requested) + " ran " +
           std::to_string(total_calls(ran) - calls_on(ran, requested)) + " of " + total + " allreduce calls";
  else if (requested == "auto" && !why.empty())
    note = "auto ran " + others_text(ran, "") + " for all " + total + " allreduce calls";
  if (!note.empty()) note += " [" + ran_text(ran) + "]" + (why.empty() ? std::string() : " (" + why + ")");
  const std::string differ = string_field(ar, "ranks_differ");
  if (!differ.empty()) note += (note.empty() ? "" : "; ") + std::string("ranks differ: ") + differ;
  return note;
}

}  // namespace tpb
