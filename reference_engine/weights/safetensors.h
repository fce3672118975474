// Safetensors files: a read-only mmap view (8-byte little-endian header length, a JSON
// header of name -> {dtype, shape, data_offsets}, then the data) and a small fp32 writer.
// Reading a slice touches only the pages of that slice, so each rank reads only its shard.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace tpb {

// i32: INT4 weight_packed and weight_shape (int4_format.h); i64: a weight_shape as recent
// compressed-tensors writes it.
enum class StDType { f32, bf16, f16, i32, i64 };

struct StTensorInfo {
  StDType dtype = StDType::f32;       // element type in the file
  std::vector<std::int64_t> shape;    // as stored
  std::uint64_t begin = 0;            // byte offset of the first element from the data start
  std::uint64_t end = 0;              // byte offset past the last element
};

class SafetensorsFile {
 public:
  // Maps `path` read-only and parses its header. InputError naming the file when it is not
  // a valid safetensors file or holds a dtype other than F32/BF16/F16 (those tensors are
  // listed as unsupported and fail only when read).
  explicit SafetensorsFile(const std::string& path);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  bool has(const std::string& name) const { return tensors_.count(name) != 0; }
  const StTensorInfo& info(const std::string& name) const;
  std::vector<std::string> names() const;

  // Converts `count` consecutive elements of tensor `name`, starting at element `first`,
  // to fp32 into out (an I32 tensor is refused: it holds packed INT4 or shapes, not values).
  void read_f32(const std::string& name, std::uint64_t first, std::uint64_t count, float* out) const;
  // The stored bits of `count` elements of an I32 tensor (read_u32) or a BF16 one
  // (read_bf16_bits); InputError naming the tensor when it has another dtype.
  void read_u32(const std::string& name, std::uint64_t first, std::uint64_t count, std::uint32_t* out) const;
  void read_bf16_bits(const std::string& name, std::uint64_t first, std::uint64_t count, std::uint16_t* out) const;
  // `count` integers of an I32 or I64 tensor, widened to int64.
  void read_integers(const std::string& name, std::uint64_t first, std::uint64_t count, std::int64_t* out) const;

 private:
  void parse_header(std::string_view text, std::uint64_t data_bytes);  // fills tensors_, unsupported_
  // The first byte of elements [first, first + count) of `name`, checked to be in the tensor.
  const unsigned char* elements(const StTensorInfo& t, const std::string& name, std::uint64_t first,
                                std::uint64_t count) const;

  std::string path_;
  void* map_ = nullptr;
  std::size_t map_bytes_ = 0;
  const unsigned char* data_ = nullptr;  // start of the data section
  std::map<std::string, StTensorInfo> tensors_;
  std::map<std::string, std::string> unsupported_;  // name -> dtype string
};

struct StTensorOut {
  std::string name;                   // tensor name
  std::vector<std::int64_t> shape;    // shape, elements
  const float* data = nullptr;        // product(shape) fp32 values
};

// Writes F32 tensors to `path` (atomically: a temporary file renamed into place).
void write_safetensors_f32(const std::string& path, const std::vector<StTensorOut>& tensors);

}  // namespace tpb
