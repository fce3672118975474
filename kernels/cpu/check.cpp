#include "tpb/check.h"
#include "tpb/message_text.h"
#include "tpb/system_check.h"

namespace tpb {

void throw_error(bool input_error, const char* statement, const char* file, int line,
                 const std::string& message) {
  std::ostringstream os;
  os << message;
  // Input errors are for users: the message names the file and field; the source location
  // would only be noise. Internal errors carry the statement and location for us.
  if (!input_error) {
    os << " [";
    if (statement && *statement) os << statement << " at ";
    os << file << ":" << line << "]";
    throw Error(os.str());
  }
  throw InputError(os.str());
}

void throw_system_error(const std::string& message) { throw Error(message); }

std::string cut_for_message(std::string_view text, std::size_t keep) {
  if (text.size() <= keep) return std::string(text);
  std::size_t end = keep;
  // Back to the start of a UTF-8 sequence: continuation bytes are 10xxxxxx.
  while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;
  std::size_t characters = 0;  // UTF-8 code points: every byte that does not continue one
  for (const char c : text) characters += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return std::string(text.substr(0, end)) + "... (" + std::to_string(characters) + " characters)";
}

}  // namespace tpb
