// What every fuzz target shares: the rule for what counts as a finding, and the files a
// target hands to an API that reads a path.
//
// A target calls expect_only_input_errors(body): tpb::InputError (ScenarioError is one) is
// the documented answer to bad input and ends the input quietly; any other exception escaping
// the reader (std::out_of_range from a json::at, nlohmann's type_error, tpb::Error) is a
// finding: it is printed and the process aborts, which libFuzzer reports with the input.
// Crashes and sanitizer reports are findings without help from here.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>

namespace tpb::fuzz {

// Runs body; returns normally for success or an InputError, aborts on anything else.
void expect_only_input_errors(const std::function<void()>& body);

// Writes bytes to <scratch>/<name> (one scratch folder per process, removed at exit) and
// returns its path. The same name is overwritten by the next input.
std::string write_scratch_file(const std::string& name, std::string_view bytes);

// The two halves of an input for a target that reads two files: split at the first line
// "----" (the line itself belongs to neither); without one, both halves are the whole input
// (a file compared with itself, which is how the repository's files seed the corpus).
std::pair<std::string_view, std::string_view> split_in_two(std::string_view bytes);

inline std::string_view as_text(const std::uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

}  // namespace tpb::fuzz
