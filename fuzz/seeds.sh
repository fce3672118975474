# The seed files of each fuzz target: files of the repository, relative to its root, never
# copied into fuzz/. Sourced by scripts/fuzz.sh and fuzz/replay.sh; needs globstar/nullglob.
#   seed_files TARGET   prints one path per line
seed_files() {
  local files=()
  case $1 in
    scenario_fuzzer) files=(scenarios/**/*.json) ;;
    model_config_fuzzer) files=(scenarios/models/*.json tests/data/hf/*/config.json) ;;
    safetensors_fuzzer) files=(tests/data/hf/**/*.safetensors) ;;
    results_fuzzer | compare_fuzzer) files=(baselines/**/*.jsonl tests/data/results_fixture/results.jsonl) ;;
    *) echo "seed_files: unknown target $1" >&2; return 2 ;;
  esac
  printf '%s\n' "${files[@]}"
}
