// Names that become file names, and paths that must stay inside their folder (issue 17):
// a scenario named "../../escaped-baseline" once wrote its baseline outside --baselines, and
// a preset "../x" read any .json file.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

namespace tpb {

// The longest name accepted where a name becomes a file name.
constexpr std::size_t kMaxSafeNameLength = 128;

// "" when `name` is 1..kMaxSafeNameLength characters of [A-Za-z0-9._-] not starting with '.';
// else what is wrong with it, for a message ("contains '/'", ...).
std::string safe_name_problem(std::string_view name);

// root / relative, after checking that it stays under root lexically (no "..", no absolute
// part); an InputError naming `what` otherwise.
std::filesystem::path path_under(const std::filesystem::path& root, const std::filesystem::path& relative,
                                 const std::string& what);

// Empty when a file can be written at `path`, else why not: the path is no folder, and its
// nearest existing ancestor is a folder that takes a new entry (write_file_atomic creates the
// folders in between). A probe file is created there and removed. Output paths (--junit) are
// checked with it before any case runs.
std::string unwritable_file_reason(const std::string& path);

}  // namespace tpb
