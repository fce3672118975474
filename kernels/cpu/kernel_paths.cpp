// The kernel-path registry (tpb/kernels/kernel_paths.h): the variants per op, the pure choice,
// and this process's paths from TPB_KERNELS and the current device.
#include "tpb/kernels/kernel_paths.h"

#include <algorithm>
#include <cstdlib>
#include <iterator>
#include <map>
#include <mutex>
#include <string_view>

#include "tpb/check.h"
#include "tpb/kernels/device.h"

namespace tpb::kernels {

namespace {

// Compute capabilities as major * 10 + minor (90: an H100 / H200), inclusive bounds.
constexpr int kAnyNewer = 1000;

// One kernel family of one op. An op's rows are tried in order: the architecture-specific
// ones first, the portable one last.
struct KernelVariant {
  KernelOp op;
  const char* name;
  int min_cc, max_cc;      // the devices it runs on
  bool needs_sm90a;        // architecture-specific sm_90a code: a 90a build, and not under TPB_KERNELS=portable
};

static_assert(static_cast<int>(KernelOp::mla_decode) == 0 && static_cast<int>(KernelOp::mla_prefill) == 1 &&
                  static_cast<int>(KernelOp::expert_gemm_int4) == 2 && std::size(kKernelOps) == 3,
              "kKernelOps lists the ops in enum order: kernel_path indexes it by op");

// The mma.sync kernels use bf16 m16n8k16 and cp.async: sm_80 on. sm_90a code runs on 9.0 only
// (no later architecture runs it, nor JITs it).
constexpr KernelVariant kVariants[] = {
    {KernelOp::mla_decode, "wgmma", 90, 90, true},
    {KernelOp::mla_decode, "mma.sync", 80, kAnyNewer, false},
    {KernelOp::mla_prefill, "wgmma", 90, 90, true},
    {KernelOp::mla_prefill, "mma.sync", 80, kAnyNewer, false},
    {KernelOp::expert_gemm_int4, "mma.sync", 80, kAnyNewer, false},  // W4A16: no sm_90 path measured faster yet
    // expert_gemm_int4: its variants go here, each family's row as above.
};

std::string cc_text(int cc_major, int cc_minor) { return std::to_string(cc_major) + "." + std::to_string(cc_minor); }

// Why `v` cannot be this op's path for these inputs ("" when it can).
std::string passed_over(const KernelVariant& v, const KernelPathInputs& in) {
  const int cc = in.cc_major * 10 + in.cc_minor;
  if (v.needs_sm90a && in.setting == KernelsSetting::portable) return "portable: TPB_KERNELS=portable";
  if (cc < v.min_cc || cc > v.max_cc) {
    if (v.needs_sm90a) return "device " + cc_text(in.cc_major, in.cc_minor) + " has no " + v.name;
    return "device " + cc_text(in.cc_major, in.cc_minor) + ": " + v.name + " needs compute capability " +
           cc_text(v.min_cc / 10, v.min_cc % 10) + (v.max_cc == kAnyNewer ? " or newer" : "");
  }
  if (v.needs_sm90a && !in.built_with_sm90a)
    return "device " + cc_text(in.cc_major, in.cc_minor) + ", but built without sm_90a code";
  return "";
}

}  // namespace

int smem_budget_bytes(int device_optin_bytes, KernelsSetting setting) {
  if (setting == KernelsSetting::portable) return std::min(device_optin_bytes, kPortableSmemBudgetBytes);
  return device_optin_bytes;
}

int smem_optin_bytes_of_compute_capability(int cc) {
  constexpr int kKiB = 1024;
  switch (cc) {
    case 70: case 72: return 96 * kKiB;
    case 75: return 64 * kKiB;
    case 80: case 87: return 163 * kKiB;
    case 86: case 89: case 120: case 121: return 99 * kKiB;
    case 90: case 100: case 101: case 103: case 110: return 227 * kKiB;
    default: return 0;
  }
}

std::string KernelPath::text() const {
  if (smem_budget_bytes <= 0) return variant + " (" + reason + ")";
  const int kib = smem_budget_bytes / 1024;
  const std::string amount = kib * 1024 == smem_budget_bytes ? std::to_string(kib) + " KiB"
                                                              : std::to_string(smem_budget_bytes) + " bytes";
  return variant + ", " + amount + " shared memory per block (" + reason + ")";
}

KernelsSetting parse_kernels_setting(const char* value) {
  const std::string_view v = value == nullptr ? std::string_view() : std::string_view(value);
  if (v.empty() || v == "auto") return KernelsSetting::automatic;
  if (v == "portable") return KernelsSetting::portable;
  TPB_INPUT_FAIL("TPB_KERNELS='" << v << "': expected auto (the device chooses; the default) or portable (the "
                                    "portable mma.sync kernels on any GPU)");
}

const char* kernels_setting_name(KernelsSetting setting) {
  return setting == KernelsSetting::portable ? "portable" : "auto";
}

const char* kernel_op_name(KernelOp op) {
  switch (op) {
    case KernelOp::mla_decode: return "mla_decode";
    case KernelOp::mla_prefill: return "mla_prefill";
    case KernelOp::expert_gemm_int4: return "expert_gemm_int4";
  }
  return "?";
}

bool kernel_op_registered(KernelOp op) {
  for (const KernelVariant& v : kVariants)
    if (v.op == op) return true;
  return false;
}

KernelPath choose_kernel_path(KernelOp op, const KernelPathInputs& in) {
  KernelPath path;
  path.op = op;
  path.variant = "none";
  if (in.cc_major <= 0) {
    path.reason = "no CUDA device";
    return path;
  }
  std::string first_passed_over, last_passed_over;
  for (const KernelVariant& v : kVariants) {
    if (v.op != op) continue;
    const std::string why_not = passed_over(v, in);
    if (!why_not.empty()) {
      if (first_passed_over.empty()) first_passed_over = why_not;
      last_passed_over = why_not;
      continue;
    }
    path.variant = v.name;
    path.arch_specific = v.needs_sm90a;
    // The portable kernels pick their configuration by the budget; the sm_90a ones have one.
    if (!v.needs_sm90a && in.smem_optin_bytes > 0) path.smem_budget_bytes = smem_budget_bytes(in.smem_optin_bytes, in.setting);
    if (!first_passed_over.empty())
      path.reason = first_passed_over;
    else
      path.reason = std::string(v.needs_sm90a ? "sm_90a, " : "") + "device " + cc_text(in.cc_major, in.cc_minor);
    return path;
  }
  // None runs here: why the last one, the most portable, does not.
  path.reason = last_passed_over.empty() ? "no kernel registered for this op" : last_passed_over;
  return path;
}

KernelsSetting kernels_setting() {
  static const KernelsSetting setting = parse_kernels_setting(std::getenv("TPB_KERNELS"));
  return setting;
}

bool built_with_sm90a() { return TPB_HAVE_SM90A != 0; }

const KernelPath& kernel_path(KernelOp op) {
  // Keyed by compute capability: the choice depends on nothing else that varies within a
  // process. std::map's nodes stay where they are, so the references handed out stay valid.
  static std::mutex mu;
  static std::map<int, std::vector<KernelPath>> by_cc;
  const KernelsSetting setting = kernels_setting();
  const int cc = current_device_compute_capability();
  std::lock_guard<std::mutex> lock(mu);
  auto it = by_cc.find(cc);
  if (it == by_cc.end()) {
    const KernelPathInputs in{cc / 10, cc % 10, built_with_sm90a(), setting, smem_optin_bytes_of_compute_capability(cc)};
    std::vector<KernelPath> paths;
    for (KernelOp o : kKernelOps) paths.push_back(choose_kernel_path(o, in));
    it = by_cc.emplace(cc, std::move(paths)).first;
  }
  return it->second[static_cast<std::size_t>(op)];
}

std::vector<KernelPath> kernel_paths() {
  std::vector<KernelPath> paths;
  for (KernelOp op : kKernelOps)
    if (kernel_op_registered(op)) paths.push_back(kernel_path(op));
  return paths;
}

std::string describe_kernel_paths(const std::vector<KernelPath>& paths) {
  std::string out;
  for (const KernelPath& p : paths) out += (out.empty() ? "" : "; ") + std::string(kernel_op_name(p.op)) + " " + p.text();
  return out;
}

}  // namespace tpb::kernels
