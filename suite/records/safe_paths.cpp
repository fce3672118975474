#include "suite/records/safe_paths.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "tpb/check.h"

namespace tpb {

std::string safe_name_problem(std::string_view name) {
  if (name.empty()) return "empty";
  if (name.size() > kMaxSafeNameLength)
    return "longer than " + std::to_string(kMaxSafeNameLength) + " characters (" + std::to_string(name.size()) + ")";
  if (name.front() == '.') return "starts with '.'";
  for (const char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
    if (ok) continue;
    char shown[16];
    if (c >= 0x21 && c < 0x7f)
      std::snprintf(shown, sizeof shown, "'%c'", c);
    else
      std::snprintf(shown, sizeof shown, "byte 0x%02x", static_cast<unsigned char>(c));
    return std::string("contains ") + shown + " (allowed: letters, digits, '.', '_', '-')";
  }
  return "";
}

std::filesystem::path path_under(const std::filesystem::path& root, const std::filesystem::path& relative,
                                 const std::string& what) {
  TPB_INPUT_CHECK(!relative.empty() && relative.is_relative() && !relative.has_root_name(),
                  what << ": '" << relative.string() << "' is not a relative path under " << root.string());
  for (const auto& part : relative.lexically_normal())
    TPB_INPUT_CHECK(part != "..", what << ": '" << relative.string() << "' leaves " << root.string());
  return root / relative.lexically_normal();
}

std::string unwritable_file_reason(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_directory(path, ec)) return "it is a folder";
  fs::path parent = fs::absolute(fs::path(path), ec).parent_path();
  while (!parent.empty() && !fs::exists(parent, ec) && parent != parent.parent_path()) parent = parent.parent_path();
  if (!fs::is_directory(parent, ec)) return parent.string() + " is not a folder";
  std::string probe = (parent / ".tpbench-write-probe-XXXXXX").string();
  const int fd = ::mkstemp(probe.data());
  if (fd < 0) return "the folder " + parent.string() + " takes no new file (" + std::strerror(errno) + ")";
  ::close(fd);
  ::unlink(probe.c_str());
  return {};
}

}  // namespace tpb
