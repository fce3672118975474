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

// The ops with more than one kernel family. expert_gemm_int4 (Kimi-K2.5's INT4 routed experts)
// has no variants registered yet: its kernels' author adds them to kernel_paths.cpp's table.
enum class KernelOp { mla_decode, mla_prefill, expert_gemm_int4 };
inline constexpr KernelOp kKernelOps[] = {KernelOp::mla_decode, KernelOp::mla_prefill, KernelOp::expert_gemm_int4};
const char* kernel_op_name(KernelOp op);  // "mla_decode", ...

// What a choice rests on.
struct KernelPathInputs {
  int cc_major = 0;               // the running device's compute capability; 0.0: no CUDA device
  int cc_minor = 0;
  bool built_with_sm90a = false;  // the binary holds sm_90a code (CMAKE_CUDA_ARCHITECTURES has 90a)
  KernelsSetting setting = KernelsSetting::automatic;
};

// One op's path on one device.
struct KernelPath {
  KernelOp op = KernelOp::mla_decode;
  std::string variant;         // "wgmma", "mma.sync"; "none": no registered variant runs here
  bool arch_specific = false;  // sm_90a-only code (the wgmma kernels)
  std::string reason;          // why, in words: "sm_90a, device 9.0", "device 12.0 has no wgmma"

  bool wgmma() const { return arch_specific; }
  // "wgmma (sm_90a, device 9.0)"
  std::string text() const { return variant + " (" + reason + ")"; }
};

// The path of `op` for these inputs: the first registered variant that runs on the device, is
// in the build and is not ruled out by the setting; its reason names why the ones before it
// were passed over. No device (0.0): "none". Pure; no CUDA.
KernelPath choose_kernel_path(KernelOp op, const KernelPathInputs& in);
// Whether `op` has any variant registered (expert_gemm_int4 not yet).
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
