// What a message may echo of the user's input. A message names the input and the rule; the
// value it quotes is there to be recognised, not to be read back whole: a 5,000-character
// name once came back whole in an error line (issue 37, finding 10). Values longer than a
// message can hold are cut, and say how long they were.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace tpb {

// The most bytes of one value a message quotes; a path keeps more (the file is named at its end).
inline constexpr std::size_t kMessageValueChars = 80;
inline constexpr std::size_t kMessagePathChars = 160;

// `text` as it is when it has at most `keep` bytes; else its first `keep` bytes (back to the
// start of a UTF-8 character, so the line stays valid text), then "... (N characters)", N its
// length in UTF-8 characters.
std::string cut_for_message(std::string_view text, std::size_t keep = kMessageValueChars);

}  // namespace tpb
