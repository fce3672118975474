// Safetensors reader (mmap) and fp32 writer (see safetensors.h).
#include "reference_engine/weights/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>

#include <nlohmann/json.hpp>

#include "reference_engine/config/json_text.h"
#include "tpb/check.h"
#include "tpb/dtype.h"

namespace tpb {
namespace {

std::uint64_t element_bytes(StDType t) {
  return t == StDType::i64 ? 8 : t == StDType::f32 || t == StDType::i32 ? 4 : 2;
}

const char* dtype_label(StDType t) {
  switch (t) {
    case StDType::f32: return "F32";
    case StDType::bf16: return "BF16";
    case StDType::f16: return "F16";
    case StDType::i32: return "I32";
    case StDType::i64: return "I64";
  }
  return "?";
}

}  // namespace

SafetensorsFile::SafetensorsFile(const std::string& path) : path_(path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  TPB_INPUT_CHECK(fd >= 0, "cannot open safetensors file " << path << ": " << std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || st.st_size < 8) {
    ::close(fd);
    TPB_INPUT_FAIL(path << ": not a safetensors file (shorter than its 8-byte header length)");
  }
  map_bytes_ = static_cast<std::size_t>(st.st_size);
  map_ = ::mmap(nullptr, map_bytes_, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  TPB_INPUT_CHECK(map_ != MAP_FAILED, "cannot mmap " << path << ": " << std::strerror(errno));
  const auto* bytes = static_cast<const unsigned char*>(map_);
  std::uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | bytes[i];
  if (header_len > map_bytes_ - 8) {
    ::munmap(map_, map_bytes_);
    map_ = nullptr;
    TPB_INPUT_FAIL(path << ": header length " << header_len << " exceeds the file size " << map_bytes_);
  }
  data_ = bytes + 8 + header_len;
  try {
    parse_header(std::string_view(reinterpret_cast<const char*>(bytes + 8), header_len), map_bytes_ - 8 - header_len);
  } catch (...) {  // the destructor does not run for a constructor that throws
    ::munmap(map_, map_bytes_);
    map_ = nullptr;
    throw;
  }
}

// Every field is checked for its type and range before use: a header is user input. A
// tensor's element count is the product of its dimensions, overflow-checked, and its bytes
// must be exactly its data_offsets range, inside the data section.
void SafetensorsFile::parse_header(std::string_view text, std::uint64_t data_bytes) {
  const JsonText parsed = parse_json_text(text);  // strict and bounded (json_text.h)
  TPB_INPUT_CHECK(parsed.problem.empty(), path_ << ": header is not valid JSON: " << parsed.problem);
  const nlohmann::json& header = parsed.value;
  TPB_INPUT_CHECK(header.is_object(), path_ << ": header: expected a JSON object of tensors, got " << header.type_name());
  for (const auto& [name, v] : header.items()) {
    if (name == "__metadata__") continue;
    const std::string where = path_ + ": tensor " + name;
    TPB_INPUT_CHECK(v.is_object() && v.contains("dtype") && v.contains("shape") && v.contains("data_offsets"),
                    where << ": expected {dtype, shape, data_offsets}");
    TPB_INPUT_CHECK(v["dtype"].is_string(), where << ": dtype: expected a string, got " << v["dtype"].type_name());
    const std::string dt = v["dtype"].get<std::string>();
    StTensorInfo info;
    if (dt == "F32") info.dtype = StDType::f32;
    else if (dt == "BF16") info.dtype = StDType::bf16;
    else if (dt == "F16") info.dtype = StDType::f16;
    else if (dt == "I32") info.dtype = StDType::i32;
    else if (dt == "I64") info.dtype = StDType::i64;
    else {
      unsupported_[name] = dt;
      continue;
    }
    const nlohmann::json& shape = v["shape"];
    TPB_INPUT_CHECK(shape.is_array(), where << ": shape: expected an array of dimensions, got " << shape.type_name());
    const std::uint64_t elem = element_bytes(info.dtype);
    std::uint64_t n = 1;
    for (const auto& d : shape) {
      TPB_INPUT_CHECK(d.is_number_unsigned() && d.get<std::uint64_t>() <= static_cast<std::uint64_t>(INT64_MAX),
                      where << ": shape: expected dimensions that are integers >= 0, got " << shape.dump());
      TPB_INPUT_CHECK(!__builtin_mul_overflow(n, d.get<std::uint64_t>(), &n) && n <= data_bytes / elem,
                      where << ": shape " << shape.dump() << " holds more elements than the file's "
                            << data_bytes << " bytes of data");
      info.shape.push_back(d.get<std::int64_t>());
    }
    const nlohmann::json& offsets = v["data_offsets"];
    TPB_INPUT_CHECK(offsets.is_array() && offsets.size() == 2 && offsets[0].is_number_unsigned() &&
                        offsets[1].is_number_unsigned(),
                    where << ": data_offsets: expected [begin, end], integers >= 0, got " << offsets.dump());
    info.begin = offsets[0].get<std::uint64_t>();
    info.end = offsets[1].get<std::uint64_t>();
    TPB_INPUT_CHECK(info.end >= info.begin && info.end <= data_bytes && info.end - info.begin == n * elem,
                    where << ": data_offsets [" << info.begin << ", " << info.end << ") do not match its shape and dtype "
                          << dt << " (or exceed the file)");
    tensors_[name] = info;
  }
}

SafetensorsFile::~SafetensorsFile() {
  if (map_ != nullptr) ::munmap(map_, map_bytes_);
}

const StTensorInfo& SafetensorsFile::info(const std::string& name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) {
    auto u = unsupported_.find(name);
    TPB_INPUT_CHECK(u == unsupported_.end(), path_ << ": tensor " << name << " has dtype " << u->second
                                                   << "; the reference engine reads F32, BF16, F16 (values) and I32 (packed INT4)");
    TPB_INPUT_FAIL(path_ << ": no tensor " << name);
  }
  return it->second;
}

std::vector<std::string> SafetensorsFile::names() const {
  std::vector<std::string> out;
  for (const auto& [k, v] : tensors_) out.push_back(k);
  for (const auto& [k, v] : unsupported_) out.push_back(k);
  return out;
}

const unsigned char* SafetensorsFile::elements(const StTensorInfo& t, const std::string& name, std::uint64_t first,
                                               std::uint64_t count) const {
  const std::uint64_t elem = element_bytes(t.dtype);
  const std::uint64_t n = (t.end - t.begin) / elem;
  TPB_CHECK(first <= n && count <= n - first,
            path_ << ": read of elements [" << first << ", +" << count << ") past the end of " << name << " (" << n
                  << " elements)");
  return data_ + t.begin + first * elem;
}

void SafetensorsFile::read_f32(const std::string& name, std::uint64_t first, std::uint64_t count, float* out) const {
  const StTensorInfo& t = info(name);
  TPB_INPUT_CHECK(t.dtype != StDType::i32 && t.dtype != StDType::i64,
                  path_ << ": tensor " << name << " has dtype " << dtype_label(t.dtype)
                        << "; expected F32, BF16 or F16 values (an integer tensor is packed INT4 or a shape, read "
                           "through the model's quantization_config)");
  const unsigned char* p = elements(t, name, first, count);
  switch (t.dtype) {
    case StDType::f32:
      std::memcpy(out, p, count * 4);
      break;
    case StDType::bf16:
      for (std::uint64_t i = 0; i < count; ++i) {
        std::uint16_t b;
        std::memcpy(&b, p + 2 * i, 2);
        out[i] = bf16_to_float(b);
      }
      break;
    case StDType::f16:
      for (std::uint64_t i = 0; i < count; ++i) {
        std::uint16_t b;
        std::memcpy(&b, p + 2 * i, 2);
        out[i] = f16_to_float(b);
      }
      break;
    case StDType::i32:
    case StDType::i64:
      break;
  }
}

void SafetensorsFile::read_u32(const std::string& name, std::uint64_t first, std::uint64_t count,
                               std::uint32_t* out) const {
  const StTensorInfo& t = info(name);
  TPB_INPUT_CHECK(t.dtype == StDType::i32, path_ << ": tensor " << name << " has dtype " << dtype_label(t.dtype)
                                                 << "; expected I32");
  std::memcpy(out, elements(t, name, first, count), count * 4);
}

void SafetensorsFile::read_integers(const std::string& name, std::uint64_t first, std::uint64_t count,
                                    std::int64_t* out) const {
  const StTensorInfo& t = info(name);
  TPB_INPUT_CHECK(t.dtype == StDType::i32 || t.dtype == StDType::i64,
                  path_ << ": tensor " << name << " has dtype " << dtype_label(t.dtype) << "; expected I32 or I64");
  const unsigned char* p = elements(t, name, first, count);
  for (std::uint64_t i = 0; i < count; ++i) {
    if (t.dtype == StDType::i64) {
      std::memcpy(&out[i], p + 8 * i, 8);
    } else {
      std::int32_t v;
      std::memcpy(&v, p + 4 * i, 4);
      out[i] = v;
    }
  }
}

void SafetensorsFile::read_bf16_bits(const std::string& name, std::uint64_t first, std::uint64_t count,
                                     std::uint16_t* out) const {
  const StTensorInfo& t = info(name);
  TPB_INPUT_CHECK(t.dtype == StDType::bf16, path_ << ": tensor " << name << " has dtype " << dtype_label(t.dtype)
                                                  << "; expected BF16");
  std::memcpy(out, elements(t, name, first, count), count * 2);
}

void write_safetensors_f32(const std::string& path, const std::vector<StTensorOut>& tensors) {
  nlohmann::json header = nlohmann::json::object();
  std::uint64_t offset = 0;
  for (const auto& t : tensors) {
    std::uint64_t n = 1;
    for (auto d : t.shape) n *= static_cast<std::uint64_t>(d);
    header[t.name] = {{"dtype", "F32"}, {"shape", t.shape}, {"data_offsets", {offset, offset + 4 * n}}};
    offset += 4 * n;
  }
  std::string h = header.dump();
  while ((h.size() + 8) % 8 != 0) h.push_back(' ');  // data section 8-byte aligned, as the format recommends
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    TPB_INPUT_CHECK(f.good(), "cannot write " << tmp);
    unsigned char len[8];
    std::uint64_t hl = h.size();
    for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(hl >> (8 * i));
    f.write(reinterpret_cast<const char*>(len), 8);
    f.write(h.data(), static_cast<std::streamsize>(h.size()));
    for (const auto& t : tensors) {
      std::uint64_t n = 1;
      for (auto d : t.shape) n *= static_cast<std::uint64_t>(d);
      f.write(reinterpret_cast<const char*>(t.data), static_cast<std::streamsize>(4 * n));
    }
    TPB_CHECK(f.good(), "write to " << tmp << " failed");
  }
  TPB_CHECK(std::rename(tmp.c_str(), path.c_str()) == 0, "cannot rename " << tmp << " to " << path);
}

}  // namespace tpb
