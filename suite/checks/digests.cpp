#include "suite/checks/digests.h"

namespace tpb {

std::string digest_difference(const nlohmann::json& a, const nlohmann::json& b) {
  const std::string ida = a.value("case_id", "?"), idb = b.value("case_id", "?");
  const nlohmann::json da = a.value("digests", nlohmann::json::array());
  const nlohmann::json db = b.value("digests", nlohmann::json::array());
  if (!da.is_array() || da.empty()) return "case " + ida + " recorded no digests";
  if (!db.is_array() || db.empty()) return "case " + idb + " recorded no digests";
  if (da.size() != db.size())
    return "rank counts differ: " + std::to_string(da.size()) + " (" + ida + ") vs " + std::to_string(db.size()) + " (" + idb + ")";
  for (std::size_t r = 0; r < da.size(); ++r) {
    if (!da[r].is_object() || da[r].empty()) return "case " + ida + " rank " + std::to_string(r) + " recorded no digests";
    for (const auto& [name, hex] : da[r].items()) {
      if (!db[r].contains(name)) return "rank " + std::to_string(r) + " output '" + name + "' missing in " + idb;
      if (db[r][name] != hex)
        return "rank " + std::to_string(r) + " output '" + name + "': " + hex.dump() + " (" + ida + ") vs " +
               db[r][name].dump() + " (" + idb + ")";
    }
    for (const auto& [name, hex] : db[r].items())
      if (!da[r].contains(name)) return "rank " + std::to_string(r) + " output '" + name + "' missing in " + ida;
  }
  return "";
}

}  // namespace tpb
