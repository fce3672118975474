#include "suite/records/run_folder.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "reference_engine/config/json_text.h"
#include "suite/records/results.h"
#include "tpb/check.h"
#include "tpb/system_check.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace tpb {

void create_run_folder(const std::string& run_dir, const std::string& run_json_text) {
  const fs::path dir(run_dir);
  const fs::path root = dir.has_parent_path() ? dir.parent_path() : fs::path(".");
  // Built with append: `"literal" + std::string&&` trips a false -Wrestrict in g++ 12 at -O3.
  const fs::path staging = root / std::string(".").append(dir.filename().string()).append(".new");
  const std::string run_json = (dir / "run.json").string();
  auto not_started = [&](const std::string& why) {
    std::error_code ignored;
    fs::remove_all(staging, ignored);
    TPB_SYSTEM_FAIL(run_json << ": cannot be written (" << why << "); the run was not started, and nothing of it was left in "
                             << root.string());
  };
  std::error_code ec;
  fs::create_directories(root, ec);
  if (ec) not_started(std::string("cannot create the folder ").append(root.string()).append(": ").append(ec.message()));
  fs::create_directory(staging, ec);
  if (ec) not_started(std::string("cannot create a folder in ").append(root.string()).append(": ").append(ec.message()));
  if (const std::string why = write_file_atomic_or_reason((staging / "run.json").string(), run_json_text); !why.empty())
    not_started(why);
  if (::rename(staging.c_str(), dir.c_str()) != 0) not_started(std::string("rename failed: ") + std::strerror(errno));
  // The rename durable: after a crash the results root holds the run whole, or not at all.
  const int fd = ::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

std::string resumable_note(const std::string& run_dir) {
  return "; " + run_dir + " keeps its run.json and every record written so far: `tpbench run --resume " + run_dir +
         "` finishes the run";
}

namespace {

// The checks of read_run_json_for_resume, each an InputError naming `file` and the JSON path.
class RunJsonShape {
 public:
  explicit RunJsonShape(std::string file) : file_(std::move(file)) {}

  void expect(bool ok, const std::string& path, const std::string& what, const json& got) const {
    TPB_INPUT_CHECK(ok, file_ << ": " << path << ": expected " << what << " (as tpbench writes it), got " << shown_json(got));
  }
  // An optional key: absent is fine; present, it must hold `ok`.
  template <class Pred>
  void optional(const json& object, const char* key, const std::string& path, Pred ok, const std::string& what) const {
    const auto it = object.find(key);
    if (it != object.end()) expect(ok(*it), path + "." + key, what, *it);
  }
  void strings(const json& list, const std::string& path) const {
    expect(list.is_array(), path, "a list of strings", list);
    for (std::size_t i = 0; i < list.size(); ++i)
      expect(list[i].is_string(), path + "[" + std::to_string(i) + "]", "a string", list[i]);
  }

 private:
  std::string file_;
};

bool is_object(const json& v) { return v.is_object(); }
bool is_array(const json& v) { return v.is_array(); }
bool is_string(const json& v) { return v.is_string(); }

}  // namespace

json read_run_json_for_resume(const std::string& run_dir) {
  const std::string file = (fs::path(run_dir) / "run.json").string();
  std::error_code ec;
  TPB_INPUT_CHECK(fs::is_regular_file(file, ec), "--resume " << run_dir << ": no run.json there (not a tpbench run folder)");
  json j = read_json_text_file(file);
  const RunJsonShape shape(file);
  shape.expect(j.is_object(), "$", "an object", j);
  const json& id = j.contains("run_id") ? j["run_id"] : json();
  shape.expect(id.is_string() && !id.get<std::string>().empty(), "$.run_id", "the run id", id);
  const json& sc = j.contains("scenario") ? j["scenario"] : json();
  shape.expect(sc.is_object(), "$.scenario", "an object with the scenario's name and document", sc);
  shape.expect(sc.contains("name") && sc["name"].is_string(), "$.scenario.name", "a string", sc.value("name", json()));
  shape.expect(sc.contains("document") && sc["document"].is_object(), "$.scenario.document",
               "an object (the scenario as the run read it)", sc.value("document", json()));
  shape.optional(sc, "source", "$.scenario", is_string, "a string");
  if (j.contains("selection") && !j["selection"].is_null()) {
    const json& sel = j["selection"];
    shape.expect(sel.is_object(), "$.selection", "null or an object of case and filter lists", sel);
    for (const char* key : {"case", "filter"})
      if (sel.contains(key)) shape.strings(sel[key], std::string("$.selection.") + key);
  }
  shape.optional(j, "invocation", "$", [](const json& v) { return v.is_null() || v.is_object(); }, "null or an object");
  if (j.contains("invocation") && j["invocation"].is_object() && j["invocation"].contains("case_options"))
    shape.strings(j["invocation"]["case_options"], "$.invocation.case_options");
  const json& prov = j.contains("provenance") ? j["provenance"] : json();
  shape.expect(prov.is_object(), "$.provenance", "an object", prov);
  if (prov.contains("hosts")) {
    const json& hosts = prov["hosts"];
    shape.expect(hosts.is_array(), "$.provenance.hosts", "a list of hosts", hosts);
    for (std::size_t i = 0; i < hosts.size(); ++i) {
      const std::string at = "$.provenance.hosts[" + std::to_string(i) + "]";
      shape.expect(hosts[i].is_object() && hosts[i].contains("host_id") && hosts[i]["host_id"].is_string(), at,
                   "an object with a string host_id", hosts[i]);
      shape.optional(hosts[i], "reports", at, [](const json& v) { return v.is_number_integer(); }, "an integer");
      shape.optional(hosts[i], "differences", at, is_array, "a list");
    }
  }
  shape.optional(j, "resumed", "$", is_array, "a list");
  shape.optional(j, "cases", "$", is_array, "a list");
  shape.optional(j, "launcher", "$", is_object, "an object");
  shape.optional(j, "summary", "$", is_object, "an object");
  return j;
}

}  // namespace tpb
