// An HF checkpoint folder as a WeightSource (see weight_source.h). Tensors are found through
// model.safetensors.index.json when it exists, else in every *.safetensors file of the folder.
// Routed experts are read from per-expert tensors or, when absent, from HF's fused
// `mlp.experts.gate_up_proj` [E, 2I, H] (gate rows first, then up) and `mlp.experts.down_proj`
// [E, H, I]. Every block is read row by row from the mmap, so a rank touches only its slice.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>

#include <nlohmann/json.hpp>

#include "reference_engine/config/json_text.h"
#include "reference_engine/weights/safetensors.h"
#include "reference_engine/weights/weight_source.h"
#include "tpb/check.h"
#include "tpb/kernels/int4_format.h"

namespace tpb {
namespace {

namespace fs = std::filesystem;

std::string shape_str(const std::vector<std::int64_t>& s) {
  std::ostringstream os;
  os << "[";
  for (std::size_t i = 0; i < s.size(); ++i) os << (i ? ", " : "") << s[i];
  os << "]";
  return os.str();
}

class SafetensorsWeights : public WeightSource {
 public:
  SafetensorsWeights(const std::string& dir, const std::string& prefix) : dir_(dir), prefix_(prefix) {
    TPB_INPUT_CHECK(fs::is_directory(dir), "checkpoint folder " << dir << " does not exist");
    const fs::path index = fs::path(dir) / "model.safetensors.index.json";
    if (fs::exists(index)) {
      const nlohmann::json j = read_json_text_file(index.string());  // strict and bounded (json_text.h)
      TPB_INPUT_CHECK(j.contains("weight_map") && j["weight_map"].is_object(),
                      index.string() << ": $.weight_map: expected an object of tensor name -> file");
      for (auto it = j["weight_map"].begin(); it != j["weight_map"].end(); ++it) {
        // A file name in this folder, as HF writes it: never a path that leaves the checkpoint.
        TPB_INPUT_CHECK(it.value().is_string() && !it.value().get<std::string>().empty() &&
                            it.value().get<std::string>().find('/') == std::string::npos &&
                            it.value().get<std::string>().front() != '.',
                        index.string() << ": $.weight_map." << it.key()
                                       << ": expected a .safetensors file name in the checkpoint folder, got "
                                       << it.value().dump());
        const std::string file = it.value().get<std::string>();
        auto [pos, inserted] = file_index_.emplace(file, files_.size());
        if (inserted) files_.push_back(std::make_unique<SafetensorsFile>((fs::path(dir) / file).string()));
        where_[it.key()] = pos->second;
      }
    } else {
      std::vector<fs::path> paths;
      for (const auto& e : fs::directory_iterator(dir))
        if (e.path().extension() == ".safetensors") paths.push_back(e.path());
      std::sort(paths.begin(), paths.end());
      TPB_INPUT_CHECK(!paths.empty(), "checkpoint folder " << dir << " holds no *.safetensors file");
      for (const auto& p : paths) {
        files_.push_back(std::make_unique<SafetensorsFile>(p.string()));
        for (const auto& n : files_.back()->names()) where_[n] = files_.size() - 1;
      }
    }
  }

  void read(const WeightRequest& req, float* out) override {
    if (req.encoding == WeightEncoding::int4_group32) {
      const Int4Tensor t = find_int4(req);
      read_int4_block(t, req, [&](std::int64_t r, std::int64_t c, int q, std::uint16_t scale) {
        out[r * req.cols() + c] = int4::dequant(q, scale);
      });
      return;
    }
    std::vector<std::string> tried;
    if (const std::string* stored = find(req.name, tried)) {
      const SafetensorsFile& f = *files_[where_.at(*stored)];
      const StTensorInfo& t = f.info(*stored);
      TPB_INPUT_CHECK(t.shape == req.shape, f.path() << ": tensor " << *stored << " has shape " << shape_str(t.shape)
                                                     << ", the config needs " << shape_str(req.shape));
      read_block(f, *stored, 0, req.global_cols(), req, 0, out);
      return;
    }
    static const std::regex expert_re(R"(^(.*\.mlp\.experts)\.(\d+)\.(gate_proj|up_proj|down_proj)\.weight$)");
    std::smatch m;
    if (std::regex_match(req.name, m, expert_re)) {
      const std::string base = m[1].str();
      const std::int64_t e = std::stoll(m[2].str());
      const std::string proj = m[3].str();
      const bool down = proj == "down_proj";
      const std::string fused = base + (down ? ".down_proj" : ".gate_up_proj");
      if (const std::string* stored = find(fused, tried)) {
        const SafetensorsFile& f = *files_[where_.at(*stored)];
        const StTensorInfo& t = f.info(*stored);
        const std::int64_t rows_needed = down ? req.shape[0] : 2 * req.shape[0];
        TPB_INPUT_CHECK(t.shape.size() == 3 && t.shape[0] > e && t.shape[1] == rows_needed && t.shape[2] == req.shape[1],
                        f.path() << ": fused tensor " << *stored << " has shape " << shape_str(t.shape) << ", expected [>"
                                 << e << ", " << rows_needed << ", " << req.shape[1] << "] for " << req.name);
        const std::int64_t row_offset = proj == "up_proj" ? req.shape[0] : 0;
        const std::uint64_t expert_base = static_cast<std::uint64_t>(e * t.shape[1] * t.shape[2]);
        read_block(f, *stored, expert_base, t.shape[2], req, row_offset, out);
        return;
      }
    }
    std::ostringstream os;
    for (std::size_t i = 0; i < tried.size(); ++i) os << (i ? ", " : "") << tried[i];
    std::vector<std::string> packed_tried;
    const std::string base = req.name.substr(0, req.name.rfind(".weight"));
    TPB_INPUT_CHECK(find(base + ".weight_packed", packed_tried) == nullptr,
                    "checkpoint " << dir_ << ": tensor " << req.name << " is stored packed (" << packed_tried.back()
                                  << ") but the config has no INT4 quantization_config; expected a "
                                     "compressed-tensors pack-quantized quantization_config in config.json");
    TPB_INPUT_FAIL("checkpoint " << dir_ << ": tensor " << req.name << " " << shape_str(req.shape)
                                 << " not found (looked for: " << os.str() << ")");
  }

  void read_int4(const WeightRequest& req, std::uint32_t* packed, std::uint16_t* scales) override {
    check_int4_window(req);
    const Int4Tensor t = find_int4(req);
    const std::int64_t words = req.cols() / int4::kPerWord, groups = req.cols() / int4::kGroupSize;
    for (std::int64_t r = 0; r < req.rows(); ++r) {
      const std::int64_t row = req.row_begin + r;
      t.packed_file->read_u32(*t.packed, static_cast<std::uint64_t>(row * t.words + req.col_begin / int4::kPerWord),
                              static_cast<std::uint64_t>(words), packed + r * words);
      t.scale_file->read_bf16_bits(*t.scale, static_cast<std::uint64_t>(row * t.groups + req.col_begin / int4::kGroupSize),
                                   static_cast<std::uint64_t>(groups), scales + r * groups);
      for (std::int64_t g = 0; g < groups; ++g) check_scale(t, row, req.col_begin / int4::kGroupSize + g, scales[r * groups + g]);
    }
  }

  std::string describe() const override {
    std::ostringstream os;
    os << "safetensors(" << dir_ << ", " << files_.size() << " file" << (files_.size() == 1 ? "" : "s") << ")";
    return os.str();
  }

 private:
  // The stored name for `name`: prefix + name first, then the bare name.
  const std::string* find(const std::string& name, std::vector<std::string>& tried) {
    for (const std::string& candidate : {prefix_ + name, name}) {
      if (!tried.empty() && tried.back() == candidate) continue;
      tried.push_back(candidate);
      auto it = where_.find(candidate);
      if (it != where_.end()) return &it->first;
    }
    return nullptr;
  }

  // Copies rows [row_begin, row_end) (shifted by row_offset) and columns [col_begin, col_end)
  // of a row-major matrix with `stored_cols` columns starting at element `base`.
  static void read_block(const SafetensorsFile& f, const std::string& name, std::uint64_t base,
                         std::int64_t stored_cols, const WeightRequest& req, std::int64_t row_offset, float* out) {
    for (std::int64_t r = 0; r < req.rows(); ++r) {
      const std::uint64_t first =
          base + static_cast<std::uint64_t>((req.row_begin + row_offset + r) * stored_cols + req.col_begin);
      float* row = out + r * req.cols();
      f.read_f32(name, first, static_cast<std::uint64_t>(req.cols()), row);
      // A NaN or Inf weight makes every logit NaN: refused at load, naming where it is.
      for (std::int64_t c = 0; c < req.cols(); ++c)
        TPB_INPUT_CHECK(std::isfinite(row[c]), f.path() << ": tensor " << name << ": non-finite value " << row[c]
                                                        << " at element " << first + static_cast<std::uint64_t>(c)
                                                        << " (a checkpoint with NaN or Inf weights computes nothing)");
    }
  }

  // A routed expert's projection in the checkpoint's INT4 form: its three tensors, checked
  // against the config's [out, in] (int4_format.h).
  struct Int4Tensor {
    const SafetensorsFile* packed_file = nullptr;
    const SafetensorsFile* scale_file = nullptr;
    const std::string* packed = nullptr;  // stored names
    const std::string* scale = nullptr;
    std::int64_t words = 0;   // int32 words per row
    std::int64_t groups = 0;  // scales per row
  };

  Int4Tensor find_int4(const WeightRequest& req) {
    TPB_CHECK(req.shape.size() == 2, req.name << ": an INT4 tensor is 2-D");
    const std::int64_t out = req.shape[0], in = req.shape[1];
    const std::string base = req.name.substr(0, req.name.rfind(".weight"));
    std::vector<std::string> tried;
    auto need = [&](const std::string& suffix, const char* what) -> const std::string* {
      const std::size_t first = tried.size();
      const std::string* stored = find(base + suffix, tried);
      if (stored != nullptr) return stored;
      const std::string looked_for = tried[first];  // the prefixed name, as the checkpoint would hold it
      std::vector<std::string> dense_tried;
      const bool dense = find(req.name, dense_tried) != nullptr;
      TPB_INPUT_FAIL("checkpoint " << dir_ << ": tensor " << looked_for << " (" << what << ") not found"
                                   << (dense ? ", the expert is stored unquantized (" + dense_tried.back() + ")" : "")
                                   << "; expected INT4 pack-quantized weight_packed, weight_scale and weight_shape for "
                                   << base << ", as the config's quantization_config says");
    };
    Int4Tensor t;
    t.packed = need(".weight_packed", "INT4 packed weights");
    t.scale = need(".weight_scale", "the group scales");
    const std::string* shape = need(".weight_shape", "the unpacked shape");
    t.packed_file = files_[where_.at(*t.packed)].get();
    t.scale_file = files_[where_.at(*t.scale)].get();
    const SafetensorsFile& shape_file = *files_[where_.at(*shape)];
    t.words = int4::packed_words(in);
    t.groups = int4::scale_groups(in);
    const StTensorInfo& p = t.packed_file->info(*t.packed);
    TPB_INPUT_CHECK(p.dtype == StDType::i32 && p.shape == std::vector<std::int64_t>({out, t.words}),
                    t.packed_file->path() << ": tensor " << *t.packed << ": expected I32 " << shape_str({out, t.words})
                                          << " (" << in << " inputs, 8 per int32) for the config's [" << out << ", " << in
                                          << "], got " << (p.dtype == StDType::i32 ? "I32 " : "another dtype, ")
                                          << shape_str(p.shape));
    const StTensorInfo& sc = t.scale_file->info(*t.scale);
    TPB_INPUT_CHECK(sc.dtype == StDType::bf16 && sc.shape == std::vector<std::int64_t>({out, t.groups}),
                    t.scale_file->path() << ": tensor " << *t.scale << ": expected BF16 " << shape_str({out, t.groups})
                                         << " (one scale per " << int4::kGroupSize << " inputs), got "
                                         << (sc.dtype == StDType::bf16 ? "BF16 " : "another dtype, ") << shape_str(sc.shape));
    const StTensorInfo& sh = shape_file.info(*shape);
    // I32 as the released checkpoints hold it; I64 as compressed-tensors 0.20 writes it.
    TPB_INPUT_CHECK((sh.dtype == StDType::i32 || sh.dtype == StDType::i64) && sh.shape == std::vector<std::int64_t>({2}),
                    shape_file.path() << ": tensor " << *shape << ": expected I32 or I64 [2], got " << shape_str(sh.shape));
    std::int64_t dims[2];
    shape_file.read_integers(*shape, 0, 2, dims);
    TPB_INPUT_CHECK(dims[0] == out && dims[1] == in, shape_file.path() << ": tensor " << *shape << " says [" << dims[0]
                                                                       << ", " << dims[1] << "], the config needs ["
                                                                       << out << ", " << in << "]");
    return t;
  }

  // A scale that is NaN or Inf makes its whole group non-finite: refused at load.
  static void check_scale(const Int4Tensor& t, std::int64_t row, std::int64_t group, std::uint16_t bits) {
    TPB_INPUT_CHECK((bits & 0x7f80u) != 0x7f80u, t.scale_file->path() << ": tensor " << *t.scale << ": non-finite scale at ["
                                                                     << row << ", " << group
                                                                     << "] (a checkpoint with NaN or Inf weights computes nothing)");
  }

  // Calls visit(r, c, q, scale) for every element of the request's block.
  template <class Visit>
  static void read_int4_block(const Int4Tensor& t, const WeightRequest& req, Visit&& visit) {
    const std::int64_t w0 = req.col_begin / int4::kPerWord, w1 = int4::packed_words(req.col_end);
    const std::int64_t g0 = req.col_begin / int4::kGroupSize, g1 = int4::scale_groups(req.col_end);
    std::vector<std::uint32_t> words(static_cast<std::size_t>(w1 - w0));
    std::vector<std::uint16_t> scales(static_cast<std::size_t>(g1 - g0));
    for (std::int64_t r = 0; r < req.rows(); ++r) {
      const std::int64_t row = req.row_begin + r;
      t.packed_file->read_u32(*t.packed, static_cast<std::uint64_t>(row * t.words + w0), words.size(), words.data());
      t.scale_file->read_bf16_bits(*t.scale, static_cast<std::uint64_t>(row * t.groups + g0), scales.size(), scales.data());
      for (std::int64_t g = g0; g < g1; ++g) check_scale(t, row, g, scales[static_cast<std::size_t>(g - g0)]);
      for (std::int64_t c = 0; c < req.cols(); ++c) {
        const std::int64_t gc = req.col_begin + c;
        visit(r, c, int4::unpack(words[static_cast<std::size_t>(gc / int4::kPerWord - w0)], static_cast<int>(gc % int4::kPerWord)),
              scales[static_cast<std::size_t>(gc / int4::kGroupSize - g0)]);
      }
    }
  }

  std::string dir_;
  std::string prefix_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, std::size_t> file_index_;
  std::map<std::string, std::size_t> where_;  // tensor name -> files_ index
};

}  // namespace

std::unique_ptr<WeightSource> open_safetensors_weights(const std::string& dir, const std::string& prefix) {
  return std::make_unique<SafetensorsWeights>(dir, prefix);
}

}  // namespace tpb
