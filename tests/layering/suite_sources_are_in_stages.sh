#!/usr/bin/env bash
# Layering (issue 36): suite/ is one folder per stage (suite/CMakeLists.txt, docs/structure.md);
# a source directly in suite/ would belong to no stage library and escape the include check.
# Run from the source root.
set -euo pipefail
if loose=$(find suite -maxdepth 1 -type f \( -name '*.h' -o -name '*.cpp' -o -name '*.cu' -o -name '*.cuh' \) | sort) && [ -n "$loose" ]; then
  echo "sources in suite/ outside a stage folder:" >&2
  echo "$loose" >&2
  exit 1
fi
echo "every source of suite/ is in a stage folder"
