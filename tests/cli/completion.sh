#!/usr/bin/env bash
# Issue 18, point 8: bash completion generated from the parser's grammars. The script is
# sourced and its function called as bash calls it: subcommands, each subcommand's own
# options (from its grammar), file names after an option that takes a value, scenario names
# for run and profile names for qualify (as `tpbench list --json` finds them).
source "$(dirname "$0")/common.bash" "$@"
cd "$SOURCE_DIR"
export TPB_HOME=$SOURCE_DIR
"$TPBENCH" completion bash >"$SCRATCH/tpbench.bash"
bash -n "$SCRATCH/tpbench.bash" || fail "the generated script is not valid bash"
source "$SCRATCH/tpbench.bash"
complete -p tpbench | grep -q -- "-F _tpbench" || fail "no completion registered for tpbench"

# complete WORD...: COMPREPLY for the command line WORD... (the last word being completed).
complete_words() {
  COMP_WORDS=("$TPBENCH" "$@")
  COMP_CWORD=$#
  COMPREPLY=()
  _tpbench
  echo "${COMPREPLY[*]}"
}
[[ $(complete_words ru) == "run" ]] || fail "subcommand: got '$(complete_words ru)'"
[[ $(complete_words run --res) == "--results-dir --resume" ]] || fail "run options: got '$(complete_words run --res)'"
[[ $(complete_words plan --inter) == "--interconnect" ]] || fail "plan options: got '$(complete_words plan --inter)'"
[[ -z $(complete_words compare --res) ]] || fail "compare offered run's options: '$(complete_words compare --res)'"
[[ " $(complete_words run ci-sm) " == *" ci-smoke "* ]] || fail "scenario names: got '$(complete_words run ci-sm)'"
[[ " $(complete_words qualify cpu-s) " == *" cpu-smoke "* ]] || fail "profile names: got '$(complete_words qualify cpu-s)'"
mkdir -p "$SCRATCH/dir" && touch "$SCRATCH/dir/file.json"
[[ $(complete_words run --results-dir "$SCRATCH/dir/fi") == "$SCRATCH/dir/file.json" ]] || fail "file names after a valued option"
# Every option run's --help lists (a line starting with it) is offered.
for opt in $("$TPBENCH" run --help | grep -oE -- '^ +--[a-z][a-z-]*' | sort -u); do
  [[ " $(complete_words run --) " == *" $opt "* ]] || fail "run --help names $opt, completion does not offer it"
done
# Options with a fixed set of values complete the values (issue 34, point 11: --gpu, --quant and
# --placement completed file names).
[[ $(complete_words plan --quant i) == "int4" ]] || fail "--quant values: got '$(complete_words plan --quant i)'"
[[ $(complete_words plan --gpu RTX) == "RTX-PRO-6000" ]] || fail "--gpu values: got '$(complete_words plan --gpu RTX)'"
[[ $(complete_words run --placement s) == "shared" ]] || fail "--placement values: got '$(complete_words run --placement s)'"
[[ $(complete_words plan --allreduce custom) == "custom-oneshot custom-twoshot" ]] \
  || fail "--allreduce values: got '$(complete_words plan --allreduce custom)'"
# zsh: the same script through bashcompinit.
expect_rc 0 "$TPBENCH" completion zsh
head -1 "$SCRATCH/last.out" | grep -qx "#compdef tpbench" || fail "zsh script without #compdef"
grep -q "bashcompinit && bashcompinit" "$SCRATCH/last.out" || fail "zsh script without bashcompinit"
if command -v zsh >/dev/null 2>&1; then
  zsh -n "$SCRATCH/last.out" || fail "the zsh script does not parse"
fi
expect_rc 2 "$TPBENCH" completion fish
grep -q "tpbench completion: error: expected the shell" "$SCRATCH/last.out" || { cat "$SCRATCH/last.out"; fail "fish not refused"; }
echo ok
