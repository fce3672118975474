# Issue 37, finding 3: `tpbench run - --dry-run < /dev/zero` grew 55 MB/s forever and
# `plan --model /dev/zero` read 2.1 GB, then bad_alloc. Every JSON text tpbench reads (a
# scenario from a file or stdin, a config.json, a checkpoint's index) is now read with a
# bound of 64 MiB (reference_engine/config/json_text.h): more is refused, exit 2, naming the
# source, within seconds.
source "$(dirname "$0")/common.bash" "$@"
cd "$SOURCE_DIR"
start=$SECONDS
expect_rc 2 timeout 30 "$TPBENCH" run - --dry-run </dev/zero
grep -q "<stdin>: larger than 64 MiB (tpbench's limit for a JSON text)" "$SCRATCH/last.out" ||
  { cat "$SCRATCH/last.out"; fail "stdin of /dev/zero not refused"; }
expect_rc 2 timeout 30 "$TPBENCH" plan --model /dev/zero --tp 1 --gpu H200
grep -q "/dev/zero: larger than 64 MiB" "$SCRATCH/last.out" || { cat "$SCRATCH/last.out"; fail "/dev/zero as a config not refused"; }
(( SECONDS - start < 60 )) || fail "refusing took $((SECONDS - start)) s"
# A scenario just under the bound still reads: the bound is on size, not on content.
python3 -c "
import json
s = json.load(open('scenarios/ci-smoke.json'))
s['description'] = 'x' * (60 << 20)
json.dump(s, open('$SCRATCH/big.json', 'w'))"
expect_rc 0 "$TPBENCH" run "$SCRATCH/big.json" --dry-run
rm -f "$SCRATCH/big.json"
echo ok
