// Which kernels each GPU op runs, chosen from the running device rather than the build: a
// small registry of variants per op, each with the compute capabilities it runs on and
// whether it is architecture-specific code (sm_90a's warpgroup MMA, wgmma). The first
// variant of an op that fits the device, the build and TPB_KERNELS is the op's path:
//   wgmma     on compute capability 9.0 (H100, H200) when the binary holds sm_90a code;
//   mma.sync  the portable kernels, everywhere else from 8.0 on (A100, L40S, B200, RTX PRO
//             6000 Blackwell), and on any GPU under TPB_KERNELS=portable.
// An op still checks its shape: the wgmma attention kernels take Kimi-K2.5's widths only, and
// other widths run mma.sync on an H100 too (mla_decode_tuning.h, mla_prefill_tuning.h).
//
// The mma.sync kernels fit a shared-memory budget per block: the device's opt-in maximum
// (227 KiB on 9.0 and 10.x, 163 KiB on 8.0, 99 KiB on 8.6, 8.9 and 12.x), and at most 99 KiB
// under TPB_KERNELS=portable, so that an H100 / H200 then runs the very configurations an RTX
// PRO 6000 Blackwell runs (smem_budget_bytes; the launchers ask the device's attribute).
//
// The choice is a pure function (choose_kernel_path) of the device's compute capability, the
// build and the setting, so the unit tests judge it without a GPU; kernel_path() applies it
// to the calling thread's current device, once per compute capability, and every op's
// launcher asks it. CPU-visible: compiled in every build (kernels/cpu/kernel_paths.cpp).
// docs/kernel-paths.md has the table per architecture.
#pragma once

#include <string>
#include <vector>

namespace tpb::kernels {

// TPB_KERNELS: "auto" (the default; unset or empty reads as it) lets the device choose;
// "portable" forces the portable kernels on any GPU, so that the path sm_120 takes is tested
// on an H100 / H200.
enum class KernelsSetting { automatic, portable };

// A TPB_KERNELS value (nullptr: unset). Anything but "", "auto" or "portable" throws
// tpb::InputError naming the variable and the accepted values.
KernelsSetting parse_kernels_setting(const char* value);
const char* kernels_setting_name(KernelsSetting setting);  // "auto", "portable"

// The budget of shared memory per block (static and dynamic) the portable kernels fit under
// TPB_KERNELS=portable: compute capability 12.x's (and 8.6's, 8.9's) opt-in maximum, 99 KiB.
inline constexpr int kPortableSmemBudgetBytes = 99 * 1024;
// The budget on a device whose cudaDevAttrMaxSharedMemoryPerBlockOptin is device_optin_bytes:
// that maximum, capped at kPortableSmemBudgetBytes under TPB_KERNELS=portable. Pure.
int smem_budget_bytes(int device_optin_bytes, KernelsSetting setting);
// cudaDevAttrMaxSharedMemoryPerBlockOptin of a compute capability (major * 10 + minor) as the
// CUDA programming guide lists it (8.0 and 8.7: 163 KiB; 8.6, 8.9, 12.x: 99 KiB; 9.0, 10.x,
// 11.0 (10.1 before CUDA 13): 227 KiB; 7.x: 96 or 64 KiB); 0 for one it does not list. For the registry's words
// only: the launchers ask the device (a GPU test checks the two agree where it runs).
int smem_optin_bytes_of_compute_capability(int cc);

// The ops whose kernels depend on the device: the MLA attention (wgmma or mma.sync) and
// expert_gemm_int4 (Kimi-K2.5's INT4 routed experts: mma.sync from sm_80, within the budget).
enum class KernelOp { mla_decode, mla_prefill, expert_gemm_int4 };
inline constexpr KernelOp kKernelOps[] = {KernelOp::mla_decode, KernelOp::mla_prefill, KernelOp::expert_gemm_int4};
const char* kernel_op_name(KernelOp op);  // "mla_decode", ...

// What a choice rests on.
struct KernelPathInputs {
  int cc_major = 0;               // the running device's compute capability; 0.0: no CUDA device
  int cc_minor = 0;
  bool built_with_sm90a = false;  // the binary holds sm_90a code (CMAKE_CUDA_ARCHITECTURES has 90a)
  KernelsSetting setting = KernelsSetting::automatic;
  int smem_optin_bytes = 0;       // the device's shared memory per block (opt-in), bytes; 0: not known
};

// One op's path on one device.
struct KernelPath {
  KernelOp op = KernelOp::mla_decode;
  std::string variant;         // "wgmma", "mma.sync"; "none": no registered variant runs here
  bool arch_specific = false;  // sm_90a-only code (the wgmma kernels)
  std::string reason;          // why, in words: "sm_90a, device 9.0", "device 12.0 has no wgmma"
  int smem_budget_bytes = 0;   // the portable kernels' shared memory per block; 0: not theirs, or not known

  bool wgmma() const { return arch_specific; }
  // "wgmma (sm_90a, device 9.0)",
  // "mma.sync, 99 KiB shared memory per block (portable: TPB_KERNELS=portable)"
  std::string text() const;
};

// The path of `op` for these inputs: the first registered variant that runs on the device, is
// in the build and is not ruled out by the setting; its reason names why the ones before it
// were passed over. No device (0.0): "none". Pure; no CUDA.
KernelPath choose_kernel_path(KernelOp op, const KernelPathInputs& in);
// Whether `op` has any variant registered.
bool kernel_op_registered(KernelOp op);

// This process: TPB_KERNELS as parsed, read once (a malformed value throws each time it is
// asked, so the first caller, the CLI at start-up, reports it).
KernelsSetting kernels_setting();
// Whether this binary holds sm_90a code (TPB_HAVE_SM90A, kernels/CMakeLists.txt).
bool built_with_sm90a();
// The path of `op` on the calling thread's current device, decided once per compute
// capability. Without CUDA or a device: "none".
const KernelPath& kernel_path(KernelOp op);
// The paths of every registered op on the current device, in kKernelOps order.
std::vector<KernelPath> kernel_paths();
// "mla_decode wgmma (sm_90a, device 9.0); mla_prefill wgmma (sm_90a, device 9.0)"
std::string describe_kernel_paths(const std::vector<KernelPath>& paths);

}  // namespace tpb::kernels
