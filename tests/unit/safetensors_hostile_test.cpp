// Safetensors headers are user input (issue 17, part 7): every field is type- and
// range-checked, element counts are overflow-checked, and reads past a tensor cannot wrap.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "reference_engine/weights/safetensors.h"
#include "tpb/check.h"
#include "input_test_support.h"

namespace tpb {
namespace {

namespace fs = std::filesystem;
using test::input_error_of;
using test::TempFile;


std::string nested(int depth) { return std::string(depth, '[') + "1" + std::string(depth, ']'); }


// A safetensors file: the 8-byte little-endian header length, the header, `data` bytes.
std::string safetensors_bytes(const std::string& header, std::size_t data = 0) {
  std::string s(8, '\0');
  const std::uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return s + header + std::string(data, '\0');
}

TEST(SafetensorsHeader, HostileHeadersAreInputErrors) {
  const std::vector<std::string> headers = {
      R"([1, 2])",                                                                // not an object
      R"("x")",                                                                   //
      R"({"t": {"dtype": 5, "shape": [1], "data_offsets": [0, 4]}})",             // dtype not a string
      R"({"t": {"dtype": "F32", "shape": 1, "data_offsets": [0, 4]}})",           // shape not an array
      R"({"t": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}})",        // negative dimension
      R"({"t": {"dtype": "F32", "shape": [1.5], "data_offsets": [0, 4]}})",       // fractional dimension
      R"({"t": {"dtype": "F32", "shape": [4611686018427387904, 4], "data_offsets": [0, 0]}})",  // 2^62 x 4 wraps to 0
      R"({"t": {"dtype": "F32", "shape": [1], "data_offsets": {"a": 0}}})",       // offsets not an array
      R"({"t": {"dtype": "F32", "shape": [1], "data_offsets": [0]}})",            // one offset
      R"({"t": {"dtype": "F32", "shape": [1], "data_offsets": [-4, 0]}})",        // negative offset
      R"({"t": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}, "t": {}})",  // duplicate tensor
      nested(200),                                                      // deep
  };
  for (const std::string& h : headers) {
    const TempFile f("hostile.safetensors", safetensors_bytes(h, 16));
    EXPECT_NE(input_error_of([&] { SafetensorsFile file(f.path()); }), "") << h;
  }
}

TEST(SafetensorsHeader, ReadsPastTheEndAreRefusedWithoutOverflow) {
  const TempFile f("ok.safetensors", safetensors_bytes(R"({"t": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]}})", 16));
  const SafetensorsFile file(f.path());
  std::vector<float> out(4);
  file.read_f32("t", 0, 4, out.data());
  EXPECT_THROW(file.read_f32("t", 1, 4, out.data()), Error);
  EXPECT_THROW(file.read_f32("t", UINT64_MAX / 2, UINT64_MAX / 2 + 2, out.data()), Error);  // (first + count) * 4 wraps
}

}  // namespace
}  // namespace tpb
