#include "tpb/check.h"

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

}  // namespace tpb
