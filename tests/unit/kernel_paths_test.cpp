// The kernel-path registry (tpb/kernels/kernel_paths.h) without a GPU: TPB_KERNELS's parsing,
// the choice per op as a pure function of the device's compute capability, the build's sm_90a
// code and the setting, at every architecture the build emits and a few it does not, and the
// portable kernels' shared-memory budget per block.
#include <gtest/gtest.h>

#include <algorithm>
#include <ostream>
#include <string>
#include <vector>

#include "tpb/check.h"
#include "tpb/kernels/device.h"
#include "tpb/kernels/kernel_paths.h"

namespace tpb::kernels {
namespace {

TEST(KernelsSetting, AutoWhenUnsetEmptyOrAuto) {
  EXPECT_EQ(parse_kernels_setting(nullptr), KernelsSetting::automatic);
  EXPECT_EQ(parse_kernels_setting(""), KernelsSetting::automatic);
  EXPECT_EQ(parse_kernels_setting("auto"), KernelsSetting::automatic);
  EXPECT_EQ(parse_kernels_setting("portable"), KernelsSetting::portable);
  EXPECT_STREQ(kernels_setting_name(KernelsSetting::automatic), "auto");
  EXPECT_STREQ(kernels_setting_name(KernelsSetting::portable), "portable");
}

// Anything else is bad input that names the variable and what it takes: a typo must not run
// the wgmma kernels while the user believes the portable ones ran.
TEST(KernelsSetting, AnythingElseIsAnInputError) {
  for (const char* bad : {"Portable", "PORTABLE", " portable", "portable ", "wgmma", "mma.sync", "0", "1", "none"}) {
    try {
      parse_kernels_setting(bad);
      ADD_FAILURE() << "'" << bad << "' was accepted";
    } catch (const InputError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("TPB_KERNELS='" + std::string(bad) + "'"), std::string::npos) << what;
      EXPECT_NE(what.find("auto"), std::string::npos) << what;
      EXPECT_NE(what.find("portable"), std::string::npos) << what;
    }
  }
}

// One row of the choice: the inputs and what mla_decode and mla_prefill (registered alike)
// take there.
struct ChoiceCase {
  std::string name;  // the test's name: device, build, setting
  KernelPathInputs in;
  const char* variant;
  const char* reason;
  const char* text;  // KernelPath::text(), with the portable kernels' budget
};

void PrintTo(const ChoiceCase& c, std::ostream* os) { *os << c.name; }

constexpr KernelsSetting kAuto = KernelsSetting::automatic, kPortable = KernelsSetting::portable;
constexpr int kKiB = 1024;

std::vector<ChoiceCase> choice_cases() {
  return {
      // H100 / H200: wgmma, as before the registry, unless the build lacks sm_90a or the
      // portable path is forced; forced, the portable kernels fit 99 KiB, as on an RTX PRO 6000.
      {"h100_90a_auto", {9, 0, true, kAuto, 227 * kKiB}, "wgmma", "sm_90a, device 9.0", "wgmma (sm_90a, device 9.0)"},
      {"h100_90a_portable", {9, 0, true, kPortable, 227 * kKiB}, "mma.sync", "portable: TPB_KERNELS=portable",
       "mma.sync, 99 KiB shared memory per block (portable: TPB_KERNELS=portable)"},
      {"h100_no90a_auto", {9, 0, false, kAuto, 227 * kKiB}, "mma.sync", "device 9.0, but built without sm_90a code",
       "mma.sync, 227 KiB shared memory per block (device 9.0, but built without sm_90a code)"},
      {"h100_no90a_portable", {9, 0, false, kPortable, 227 * kKiB}, "mma.sync", "portable: TPB_KERNELS=portable",
       "mma.sync, 99 KiB shared memory per block (portable: TPB_KERNELS=portable)"},
      // Every other architecture from 8.0 on: mma.sync, whatever the build holds, within the
      // device's own maximum (portable caps only what is above 99 KiB).
      {"rtx_pro_6000_120_auto", {12, 0, true, kAuto, 99 * kKiB}, "mma.sync", "device 12.0 has no wgmma",
       "mma.sync, 99 KiB shared memory per block (device 12.0 has no wgmma)"},
      {"rtx_pro_6000_120_portable", {12, 0, true, kPortable, 99 * kKiB}, "mma.sync", "portable: TPB_KERNELS=portable",
       "mma.sync, 99 KiB shared memory per block (portable: TPB_KERNELS=portable)"},
      {"dgx_spark_121", {12, 1, true, kAuto, 99 * kKiB}, "mma.sync", "device 12.1 has no wgmma",
       "mma.sync, 99 KiB shared memory per block (device 12.1 has no wgmma)"},
      {"b200_100", {10, 0, true, kAuto, 227 * kKiB}, "mma.sync", "device 10.0 has no wgmma",
       "mma.sync, 227 KiB shared memory per block (device 10.0 has no wgmma)"},
      {"b300_103", {10, 3, true, kAuto, 227 * kKiB}, "mma.sync", "device 10.3 has no wgmma",
       "mma.sync, 227 KiB shared memory per block (device 10.3 has no wgmma)"},
      {"a100_80", {8, 0, true, kAuto, 163 * kKiB}, "mma.sync", "device 8.0 has no wgmma",
       "mma.sync, 163 KiB shared memory per block (device 8.0 has no wgmma)"},
      {"a100_80_portable", {8, 0, true, kPortable, 163 * kKiB}, "mma.sync", "portable: TPB_KERNELS=portable",
       "mma.sync, 99 KiB shared memory per block (portable: TPB_KERNELS=portable)"},
      {"l40s_89_no90a", {8, 9, false, kAuto, 99 * kKiB}, "mma.sync", "device 8.9 has no wgmma",
       "mma.sync, 99 KiB shared memory per block (device 8.9 has no wgmma)"},
      // The budget not known (no maximum given): the path alone.
      {"b200_100_unknown_smem", {10, 0, true, kAuto}, "mma.sync", "device 10.0 has no wgmma",
       "mma.sync (device 10.0 has no wgmma)"},
      // Below sm_80 no kernel runs; without a device nothing does.
      {"t4_75", {7, 5, true, kAuto, 64 * kKiB}, "none", "device 7.5: mma.sync needs compute capability 8.0 or newer",
       "none (device 7.5: mma.sync needs compute capability 8.0 or newer)"},
      {"no_device", {0, 0, true, kAuto}, "none", "no CUDA device", "none (no CUDA device)"},
      {"no_device_portable", {0, 0, false, kPortable}, "none", "no CUDA device", "none (no CUDA device)"},
  };
}

class KernelPathChoice : public ::testing::TestWithParam<ChoiceCase> {};

TEST_P(KernelPathChoice, AttentionOps) {
  const ChoiceCase& c = GetParam();
  for (KernelOp op : {KernelOp::mla_decode, KernelOp::mla_prefill}) {
    SCOPED_TRACE(kernel_op_name(op));
    const KernelPath p = choose_kernel_path(op, c.in);
    EXPECT_EQ(p.op, op);
    EXPECT_EQ(p.variant, c.variant);
    EXPECT_EQ(p.reason, c.reason);
    EXPECT_EQ(p.wgmma(), p.variant == "wgmma");
    EXPECT_EQ(p.text(), c.text);
    // The budget belongs to the portable kernels, and is the pure rule's.
    EXPECT_EQ(p.smem_budget_bytes,
              p.variant == "mma.sync" ? smem_budget_bytes(c.in.smem_optin_bytes, c.in.setting) : 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, KernelPathChoice, ::testing::ValuesIn(choice_cases()),
                         [](const ::testing::TestParamInfo<ChoiceCase>& info) { return info.param.name; });

// The wgmma kernels run on compute capability 9.0 only: sm_90a code runs nowhere else (not on
// 9.x after it, nor JIT-compiled on a later architecture).
TEST(KernelPathChoice, WgmmaOnlyOnNinePointZero) {
  for (int major = 1; major <= 13; ++major)
    for (int minor = 0; minor <= 9; ++minor) {
      const KernelPath p = choose_kernel_path(KernelOp::mla_decode, {major, minor, true, kAuto});
      EXPECT_EQ(p.wgmma(), major == 9 && minor == 0) << major << "." << minor << ": " << p.text();
    }
}

// The budget: the device's maximum, capped at 99 KiB (compute capability 12.x's) under
// TPB_KERNELS=portable, so that a forced-portable run on an H100 / H200 (227 KiB) or an A100
// (163 KiB) takes the configurations an RTX PRO 6000 Blackwell takes; never above the device's.
TEST(SmemBudget, DeviceMaximumCappedAt99KiBWhenPortable) {
  EXPECT_EQ(kPortableSmemBudgetBytes, 101376);
  for (int optin : {48 * kKiB, 64 * kKiB, 99 * kKiB, 100 * kKiB, 163 * kKiB, 227 * kKiB}) {
    EXPECT_EQ(smem_budget_bytes(optin, kAuto), optin);
    EXPECT_EQ(smem_budget_bytes(optin, kPortable), std::min(optin, 99 * kKiB));
  }
}

// The maxima the registry's words use where it cannot ask the device (the CUDA programming
// guide's table; MlaDecode.SmemBudgetMatchesTheDevice checks it on a GPU).
TEST(SmemBudget, MaximumPerComputeCapability) {
  EXPECT_EQ(smem_optin_bytes_of_compute_capability(80), 163 * kKiB);
  EXPECT_EQ(smem_optin_bytes_of_compute_capability(86), 99 * kKiB);
  EXPECT_EQ(smem_optin_bytes_of_compute_capability(89), 99 * kKiB);
  EXPECT_EQ(smem_optin_bytes_of_compute_capability(90), 227 * kKiB);
  EXPECT_EQ(smem_optin_bytes_of_compute_capability(100), 227 * kKiB);
  EXPECT_EQ(smem_optin_bytes_of_compute_capability(120), 99 * kKiB);
  EXPECT_EQ(smem_optin_bytes_of_compute_capability(121), 99 * kKiB);
  EXPECT_EQ(smem_optin_bytes_of_compute_capability(0), 0);
  EXPECT_EQ(smem_optin_bytes_of_compute_capability(130), 0) << "not listed: not guessed";
}

// expert_gemm_int4 (the W4A16 routed experts) has one family, mma.sync, on every device from
// sm_80, within the budget like the other portable kernels; before sm_80 (and with no device) none.
TEST(KernelPathChoice, Int4ExpertsRunMmaSyncEverywhere) {
  EXPECT_TRUE(kernel_op_registered(KernelOp::mla_decode));
  EXPECT_TRUE(kernel_op_registered(KernelOp::mla_prefill));
  EXPECT_TRUE(kernel_op_registered(KernelOp::expert_gemm_int4));
  for (const auto& [major, minor] : {std::pair{9, 0}, {12, 0}, {8, 0}, {10, 0}}) {
    const KernelPath p = choose_kernel_path(KernelOp::expert_gemm_int4, {major, minor, true, kAuto});
    EXPECT_EQ(p.variant, "mma.sync") << major << "." << minor;
    EXPECT_FALSE(p.wgmma());
  }
  EXPECT_EQ(choose_kernel_path(KernelOp::expert_gemm_int4, {7, 5, true, kAuto}).variant, "none");
  const KernelPath sm120 = choose_kernel_path(KernelOp::expert_gemm_int4, {12, 0, false, kAuto, 99 * kKiB});
  EXPECT_EQ(sm120.smem_budget_bytes, 99 * kKiB);
}

// This process's paths are the pure choice at its current device (none on a CPU machine; on a
// GPU machine whatever it is), its build and TPB_KERNELS.
TEST(KernelPaths, ThisProcessTakesThePureChoice) {
  const int cc = current_device_compute_capability();
  const KernelPathInputs in{cc / 10, cc % 10, built_with_sm90a(), kernels_setting(),
                            smem_optin_bytes_of_compute_capability(cc)};
  const std::vector<KernelPath> paths = kernel_paths();
  ASSERT_EQ(paths.size(), 3u);
  for (const KernelPath& p : paths) {
    EXPECT_EQ(p.text(), choose_kernel_path(p.op, in).text()) << kernel_op_name(p.op);
    EXPECT_EQ(&kernel_path(p.op), &kernel_path(p.op)) << "decided once";
  }
  EXPECT_EQ(describe_kernel_paths(paths), "mla_decode " + paths[0].text() + "; mla_prefill " + paths[1].text() +
                                             "; expert_gemm_int4 " + paths[2].text());
}

}  // namespace
}  // namespace tpb::kernels
