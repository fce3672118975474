// The data roots (see data_home.h). The executable's folder comes from /proc/self/exe, which
// names the binary itself whatever the command line or a symlink to it said.
#include "reference_engine/config/data_home.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <system_error>

namespace tpb {

namespace fs = std::filesystem;

std::string installed_data_dir() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec || exe.empty()) return "";
  const fs::path share = (exe.parent_path() / ".." / "share" / "tpbench").lexically_normal();
  return fs::is_directory(share, ec) ? share.string() : "";
}

std::vector<std::string> data_roots() {
  std::vector<std::string> roots;
  auto add = [&](const fs::path& p) {
    std::error_code ec;
    if (p.empty() || !fs::is_directory(p, ec)) return;
    const std::string s = fs::absolute(p, ec).lexically_normal().string();
    if (!ec && std::find(roots.begin(), roots.end(), s) == roots.end()) roots.push_back(s);
  };
  if (const char* home = std::getenv("TPB_HOME"); home != nullptr && *home != '\0') add(home);
  add(installed_data_dir());
#ifdef TPB_SOURCE_DIR
  add(TPB_SOURCE_DIR);
#endif
  return roots;
}

}  // namespace tpb
