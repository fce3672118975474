// TEST-ONLY hooks: TPB_TEST_* environment variables (and TPB_PRETEND_DIRTY) that plant a
// fault so a test can prove a check fails (a fallback, a divergence, a drift, a moved
// allocation...). They exist only in builds configured with -DTPB_TEST_HOOKS=ON — the ci and
// cuda presets, the builds tests run in — so a tpbench built for measuring (the default and
// cpu presets) cannot be made to lie by a stray variable: there such a variable is refused,
// naming it, and the hook's code is dead (test_hook returns nullptr, a constant).
#pragma once

#include <cstdlib>

#include "tpb/check.h"

namespace tpb {

constexpr bool kTestHooks = TPB_TEST_HOOKS;

// getenv(name) for a test hook: its value (nullptr when unset) in a test build; in a
// measuring build nullptr, or an InputError when the variable is set.
inline const char* test_hook(const char* name) {
  const char* value = std::getenv(name);
  if constexpr (kTestHooks) {
    return value;
  } else {
    TPB_INPUT_CHECK(value == nullptr, name << " is a test-only hook, and this tpbench was built without them "
                                               "(configure with -DTPB_TEST_HOOKS=ON, as the ci and cuda presets do); unset it");
    return nullptr;
  }
}

}  // namespace tpb
