// The report step, shared by `tpbench report` and the end of `tpbench run`: it runs the
// Python scripts in report/ (matplotlib) over a results folder. The scripts are found in
// <cwd>/report, then under the data roots (reference_engine/config/data_home.h: $TPB_HOME,
// the install prefix's share/tpbench, the source tree tpbench was built from); the
// interpreter is $TPB_PYTHON, else python3 on PATH.
#pragma once

#include <string>
#include <vector>

namespace tpb::cli {

// Absolute path of report/make_report.py, or "" when none of the places has it; `searched`
// (optional) receives the folders looked in, for the error message.
std::string find_report_script(std::vector<std::string>* searched = nullptr);

// Runs make_report.py with `args` (RESULTS_DIR [--out DIR]) and returns its exit status:
// 0 written, 2 bad input or a missing python3/matplotlib (with a message on stderr),
// 1 when the script died of a signal.
int run_report_script(const std::vector<std::string>& args);

}  // namespace tpb::cli
