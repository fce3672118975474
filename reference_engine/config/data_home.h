// Where tpbench finds the data that ships beside the binary: scenarios/ (with the model
// presets in scenarios/models/ and the qualification profiles in scenarios/qualify/),
// baselines/, report/ and schemas/. Each lookup tries the working directory first (its own
// rule, at the call site), then these roots in order:
//   1. $TPB_HOME, when set and not empty;
//   2. the install prefix the binary runs from: <folder of the executable>/../share/tpbench,
//      when that folder exists (`cmake --install` puts the data there, README "Install");
//   3. the source tree the binary was built from (TPB_SOURCE_DIR), compiled in.
// A build-tree binary (build-ci/suite/tpbench) has no share/tpbench beside it and so falls
// through to its source tree; an installed one finds its prefix before any source tree.
#pragma once

#include <string>
#include <vector>

namespace tpb {

// The roots above, in order, those that exist as folders (absolute paths, no duplicates).
std::vector<std::string> data_roots();

// <folder of the executable>/../share/tpbench, normalised, when it is a folder; else "".
std::string installed_data_dir();

}  // namespace tpb
