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
    TPB_INPUT_FAIL("checkpoint " << dir_ << ": tensor " << req.name << " " << shape_str(req.shape)
                                 << " not found (looked for: " << os.str() << ")");
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
