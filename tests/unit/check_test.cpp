#include <gtest/gtest.h>

#include "tpb/check.h"
#include "tpb/dtype.h"
#include "tpb/message_text.h"
#include "tpb/system_check.h"

namespace tpb {
namespace {

TEST(Check, InputErrorCarriesMessageWithoutLocation) {
  try {
    TPB_INPUT_CHECK(1 + 1 == 3, "field $.sweep.tp: expected " << 2);
    FAIL() << "no throw";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "field $.sweep.tp: expected 2");
  }
}

TEST(Check, ErrorCarriesStatementAndLocation) {
  try {
    TPB_CHECK(2 < 1, "broken");
    FAIL() << "no throw";
  } catch (const InputError&) {
    FAIL() << "internal errors are not input errors";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("broken [2 < 1 at "), std::string::npos) << what;
    EXPECT_NE(what.find("check_test.cpp"), std::string::npos) << what;
  }
}

// A full disk is the user's machine, not a bug: the message alone, no "[statement at file:line]".
TEST(Check, SystemErrorCarriesTheMessageAlone) {
  try {
    TPB_SYSTEM_CHECK(1 > 2, "results/run.json: write failed: " << "No space left on device");
    FAIL() << "no throw";
  } catch (const InputError&) {
    FAIL() << "a system failure is not bad input (exit 1, not 2)";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "results/run.json: write failed: No space left on device");
  }
}

// A message quotes a value, not the whole of it (issue 37, finding 10).
TEST(MessageText, LongValuesAreCutWithTheirLengthSaid) {
  EXPECT_EQ(cut_for_message("short"), "short");
  EXPECT_EQ(cut_for_message(std::string(kMessageValueChars, 'x')), std::string(kMessageValueChars, 'x'));
  EXPECT_EQ(cut_for_message(std::string(5000, 'x')), std::string(kMessageValueChars, 'x') + "... (5000 characters)");
  EXPECT_EQ(cut_for_message("abcdef", 3), "abc... (6 characters)");
  // Never half a UTF-8 character, and the length in characters: "é" is two bytes.
  std::string accents;
  for (int i = 0; i < 10; ++i) accents += "\u00e9";
  EXPECT_EQ(cut_for_message(accents, 5), "\u00e9\u00e9... (10 characters)");
}

TEST(DType, Bf16RoundsToNearestEven) {
  EXPECT_EQ(float_to_bf16(1.0f), 0x3f80);
  // 1 + 2^-8 is exactly halfway between two bf16 values: ties go to the even one (1.0).
  EXPECT_EQ(float_to_bf16(1.00390625f), 0x3f80);
  // 1 + 3*2^-8 is halfway between 1+2^-7 (odd) and 1+2^-6 (even): rounds up to even.
  EXPECT_EQ(float_to_bf16(1.01171875f), 0x3f82);
  EXPECT_EQ(bf16_to_float(float_to_bf16(-2.5f)), -2.5f);
}

TEST(DType, F16RoundTripsExactValues) {
  for (float v : {0.0f, 1.0f, -2.0f, 0.5f, 65504.0f, 6.103515625e-05f, 5.960464477539063e-08f}) {
    EXPECT_EQ(f16_to_float(float_to_f16(v)), v) << v;
  }
  EXPECT_EQ(float_to_f16(1.0f), 0x3c00);
}

}  // namespace
}  // namespace tpb
