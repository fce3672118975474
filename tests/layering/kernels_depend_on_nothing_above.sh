#!/usr/bin/env bash
# Layering (issue 16): kernels/ is the bottom layer. No file under it includes the reference
# engine, the suite, the benchmarks or the tests; the top-level CMakeLists.txt checks the
# same of the kernel libraries' links. Run from the source root.
set -euo pipefail
if hits=$(grep -rnE '^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"](reference_engine|suite|bench|tests)/' kernels); then
  echo "kernels/ includes code above it:" >&2
  echo "$hits" >&2
  exit 1
fi
echo "kernels/ includes nothing from reference_engine/, suite/, bench/ or tests/"
