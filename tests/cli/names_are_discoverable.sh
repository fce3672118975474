#!/usr/bin/env bash
# Issue 34, point 8: names a new user can find. A mistyped subcommand, option, scenario, model
# preset or GPU gets "did you mean"; --tp that the model cannot split lists the sizes it can; a
# path is printed as given; a qualification profile given to `run` says to use `qualify`; `list`
# gives each scenario a line of description and lists the profiles apart, within 100 columns.
source "$(dirname "$0")/common.bash" "$@"
says() { grep -qF -- "$1" "$SCRATCH/last.out" || { cat "$SCRATCH/last.out" >&2; fail "expected: $1"; }; }
expect_rc 2 "$TPBENCH" rn
says "unknown subcommand 'rn'; did you mean 'run'?"
expect_rc 2 "$TPBENCH" run ci-smoke --result-dir x --dry-run
says "unknown option '--result-dir'; did you mean '--results-dir'?"
expect_rc 2 "$TPBENCH" run ci-smok --dry-run
says "did you mean 'ci-smoke'?"
expect_rc 2 "$TPBENCH" run conformance/cpu-shm-allredce --dry-run
says "did you mean 'conformance/cpu-shm-allreduce'"
expect_rc 2 "$TPBENCH" plan --model kimi-k25 --tp 8 --gpu-mem-gib 80
says "did you mean 'kimi-k2.5'?"
expect_rc 2 "$TPBENCH" plan --model kimi-k2.5 --tp 8 --gpu rtx6000
says "unknown GPU 'rtx6000'; did you mean 'RTX-PRO-6000'"
expect_rc 2 "$TPBENCH" plan --model kimi-k2.5 --tp 3 --gpu H200
says "tp 3 does not divide num_attention_heads 64; tp sizes this model splits into: 1, 2, 4, 8, 16, 32, 64"
expect_rc 2 "$TPBENCH" run /data/nope.json --dry-run
says "scenario '/data/nope.json': no such file"
grep -qF "scenarios//data" "$SCRATCH/last.out" && fail "an absolute path was looked for under scenarios/"
expect_rc 2 "$TPBENCH" run qualify/cpu-smoke --dry-run
says "a qualification profile (it has probes), not a scenario: run it with \`tpbench qualify "
[[ $(grep -c . "$SCRATCH/last.out") -le 2 ]] || { cat "$SCRATCH/last.out" >&2; fail "a profile given to run gave more than its one problem"; }
expect_rc 0 "$TPBENCH" list
says "qualification profiles, tpbench qualify NAME"
grep -Eq "^  ci-smoke +The whole path on the CPU" "$SCRATCH/last.out" || fail "ci-smoke has no description line"
grep -Eq "^  qualify/cpu-smoke +Qualification smoke test" "$SCRATCH/last.out" || fail "the profile has no description line"
awk 'length($0) > 100 { print; bad = 1 } END { exit bad }' "$SCRATCH/last.out" || fail "list lines wider than 100 columns"
expect_rc 0 "$TPBENCH" list --json
python3 - "$SCRATCH/last.out" <<'PY' || fail "list --json: descriptions and profiles"
import json, sys
s = json.load(open(sys.argv[1]))["scenarios"]
top = next(e for e in s if "ci-smoke" in e["names"])
assert top["descriptions"]["ci-smoke"].startswith("The whole path"), top["descriptions"]["ci-smoke"]
assert "qualify/cpu-smoke" in top["profiles"] and "ci-smoke" not in top["profiles"]
assert "qualify/cpu-smoke" in top["names"], "names keep every file (completion reads them)"
PY
echo ok
