// Fuzz target: a .safetensors file (8-byte header length, JSON header, data), opened as
// the weight loader opens one; every supported tensor's first and last elements are read.
// Seeds: tests/data/hf/*/*.safetensors.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "fuzz/fuzz_support.h"
#include "fuzz/json_mutator.h"
#include "reference_engine/weights/safetensors.h"
#include "tpb/check.h"

TPB_FUZZ_CUSTOM_MUTATOR(tpb::fuzz::InputFormat::safetensors)

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = tpb::fuzz::write_scratch_file("model.safetensors", tpb::fuzz::as_text(data, size));
  tpb::fuzz::expect_only_input_errors([&] {
    const tpb::SafetensorsFile file(path);
    std::vector<float> out(64);
    for (const std::string& name : file.names()) {
      const tpb::StTensorInfo& info = file.info(name);
      std::uint64_t elements = 1;
      for (std::int64_t d : info.shape) elements *= static_cast<std::uint64_t>(d);
      if (elements == 0) continue;
      try {
        const std::uint64_t head = std::min<std::uint64_t>(elements, out.size());
        file.read_f32(name, 0, head, out.data());
        file.read_f32(name, elements - 1, 1, out.data());
      } catch (const tpb::InputError&) {
        // an unsupported dtype fails when read, by design; the other tensors are still read
      }
    }
  });
  return 0;
}
