#!/usr/bin/env bash
# The multi-architecture build's check (CI runs it when nvcc is found: .ci/run). Configures a
# build folder of its own with the cuda preset (CMakePresets.json; its architectures, 80;90a;
# 100;120, are the build's default list), compiles every object that holds device code (each
# .cu of the build: kernels/cuda, kernels/allreduce, reference_engine/gpu, tests/gpu) and
# links nothing, then checks with `cuobjdump --list-elf` that each object has an ELF (SASS) for
# each listed architecture, and that the wgmma kernels' objects hold wgmma in their sm_90a
# code and in no other (kernels/cuda/wgmma.cuh: TPB_WGMMA_COMPILED).
#   scripts/check_fatbin.sh     exit 0: all there; 1: each object and architecture missing, named
# Environment: TPB_FATBIN_BUILD (the folder, default build-fat), TPB_FATBIN_ARCHS (another
# list, e.g. "90a;120"; default: the cuda preset's).
#
# Cost on the 2-core CI machine (nvcc 13.0, ccache 4.7), 19 .cu objects x 4 architectures,
# configure included: cold (an empty compiler cache) 197 s wall, 184 s of CPU, measured while
# other builds shared the two cores; warm (a fresh folder, every object from the cache) 9 s.
# Outside sm_90a the wgmma kernels compile to a trap (wgmma.cuh), so their objects cost little
# there. Only the .cu objects are built, no C++ source and no link: the C++ side does not
# depend on the architectures, and the ci preset (sm_90a only, for speed) builds and tests it.
set -euo pipefail
cd "$(dirname "$0")/.."

build=${TPB_FATBIN_BUILD:-build-fat}
for tool in nvcc cmake ninja; do
  command -v "$tool" >/dev/null || { echo "check_fatbin: $tool not found" >&2; exit 2; }
done
# cuobjdump: the toolkit's, else NVIDIA's PyPI package (the CI machine's toolkit has nvcc but
# not cuobjdump; the PyPI releases start at 13.2, which reads 13.0's objects), installed once
# into the user's cache folder.
cuobjdump=$(command -v cuobjdump || true)
if [[ -z $cuobjdump ]]; then
  tools=${XDG_CACHE_HOME:-$HOME/.cache}/tpbench/cuobjdump-13.2.51
  cuobjdump=$tools/nvidia/cu13/bin/cuobjdump
  if [[ ! -x $cuobjdump ]]; then
    echo "check_fatbin: no cuobjdump on PATH; installing nvidia-cuda-cuobjdump 13.2.51 from PyPI into $tools"
    python3 -m pip install --quiet --target "$tools" nvidia-cuda-cuobjdump==13.2.51 >&2
  fi
  [[ -x $cuobjdump ]] || { echo "check_fatbin: no cuobjdump (nor $cuobjdump)" >&2; exit 2; }
fi
# A clone in another folder still hits the compiler cache (as scripts/setup.sh).
export CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-true}
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD}

start=$SECONDS
configure=(cmake --preset cuda -B "$build")
[[ -n ${TPB_FATBIN_ARCHS:-} ]] && configure+=("-DCMAKE_CUDA_ARCHITECTURES=$TPB_FATBIN_ARCHS")
mkdir -p "$build"
"${configure[@]}" >"$build/check_fatbin.configure.log" 2>&1 || { cat "$build/check_fatbin.configure.log" >&2; exit 2; }
archs=$(sed -n 's/^CMAKE_CUDA_ARCHITECTURES:[A-Z]*=//p' "$build/CMakeCache.txt")
[[ -n $archs ]] || { echo "check_fatbin: no CMAKE_CUDA_ARCHITECTURES in $build/CMakeCache.txt" >&2; exit 2; }
# "90a-real" -> sm_90a: the ELF names cuobjdump lists.
mapfile -t want < <(tr ';' '\n' <<<"$archs" | sed -E 's/-(real|virtual)$//' | grep -v '^$' | sed 's/^/sm_/')

mapfile -t objects < <(ninja -C "$build" -t targets all | sed -n 's/^\(.*\.cu\.o\): .*/\1/p' | sort)
((${#objects[@]})) || { echo "check_fatbin: no .cu objects in $build" >&2; exit 2; }
echo "check_fatbin: ${#objects[@]} objects with device code, architectures ${want[*]}"
ninja -C "$build" -j "$(nproc)" "${objects[@]}"

missing=()
for obj in "${objects[@]}"; do
  elves=$("$cuobjdump" --list-elf "$build/$obj" 2>/dev/null || true)
  for sm in "${want[@]}"; do
    grep -qE "\.${sm}\.cubin$" <<<"$elves" || missing+=("$obj: no $sm ELF")
  done
  # The wgmma kernels: wgmma in the sm_90a code, a trap elsewhere. Read from the PTX each
  # architecture's SASS was assembled from (the -real architectures embed none: not checked).
  if [[ $obj == *wgmma* ]]; then
    ptxs=$("$cuobjdump" --list-ptx "$build/$obj" 2>/dev/null || true)
    for sm in "${want[@]}"; do
      grep -qE "\.${sm}\.ptx$" <<<"$ptxs" || continue
      wgmma=$("$cuobjdump" -ptx -arch "$sm" "$build/$obj" 2>/dev/null | grep -c 'wgmma\.mma_async' || true)
      if [[ $sm == sm_90a && $wgmma -eq 0 ]]; then missing+=("$obj: its sm_90a code holds no wgmma"); fi
      if [[ $sm != sm_90a && $wgmma -gt 0 ]]; then missing+=("$obj: its $sm code holds wgmma"); fi
    done
  fi
done
if ((${#missing[@]})); then
  printf 'check_fatbin: %s\n' "${missing[@]}" >&2
  echo "check_fatbin: FAILED: ${#missing[@]} problem(s) above (architectures ${want[*]}; see docs/kernel-paths.md)" >&2
  exit 1
fi
echo "check_fatbin: ok: ${#objects[@]} objects x ${#want[@]} architectures (${want[*]}) in $((SECONDS - start)) s"
