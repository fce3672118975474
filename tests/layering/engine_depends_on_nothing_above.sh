#!/usr/bin/env bash
# Layering (issue 36): reference_engine/ sits below suite/. No file under it includes the suite,
# the benchmarks or the tests; the top-level CMakeLists.txt checks the same of tpb_engine's links.
# Run from the source root.
set -euo pipefail
if hits=$(grep -rnE '^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"](suite|bench|tests)/' reference_engine); then
  echo "reference_engine/ includes code above it:" >&2
  echo "$hits" >&2
  exit 1
fi
echo "reference_engine/ includes nothing from suite/, bench/ or tests/"
