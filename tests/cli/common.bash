# Shared by the tests/cli/*.sh scripts (not a test itself: the glob takes *.sh only).
# Usage in a script:  source "$(dirname "$0")/common.bash" "$@"
set -euo pipefail
TPBENCH=$(realpath "$1")
SCRATCH=$2
rm -rf "$SCRATCH"
mkdir -p "$SCRATCH"
SOURCE_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)

fail() { echo "FAIL: $*" >&2; exit 1; }

# expect_rc WANT CMD...: runs CMD, stdout+stderr to $SCRATCH/last.out, checks the exit status.
expect_rc() {
  local want=$1; shift
  set +e
  "$@" >"$SCRATCH/last.out" 2>&1
  local rc=$?
  set -e
  if [[ $rc -ne $want ]]; then
    cat "$SCRATCH/last.out" >&2
    fail "expected exit $want, got $rc from: $*"
  fi
}

# The single run folder under a results root.
run_dir_of() {
  local dirs=("$1"/*/)
  [[ ${#dirs[@]} -eq 1 && -d ${dirs[0]} ]] || fail "expected one run folder in $1, found ${#dirs[@]}"
  echo "${dirs[0]%/}"
}
