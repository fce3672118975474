// AutoCommunicator: the "auto" backend. Like serving engines, it runs the custom one-shot
// kernel for small messages, two-shot for medium ones and NCCL above, with the two size
// thresholds MEASURED on the machine: a calibration file written by
// scripts/allreduce_thresholds.py from tpb_bench results (baselines/<hw>/allreduce_thresholds.json).
// The file is used only when its GPU model and world size match this run; otherwise auto
// runs NCCL for everything and says so in fallback_reason(): no guessed thresholds.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "reference_engine/comm/bootstrap.h"
#include "reference_engine/comm/communicator.h"
#include "reference_engine/comm/custom/custom_communicator.h"
#include "reference_engine/comm/factory.h"

namespace tpb {

struct AllreduceThresholds {
  std::size_t oneshot_max_bytes = 0;  // messages <= this run one-shot, bytes (0: never)
  std::size_t twoshot_max_bytes = 0;  // messages <= this (and > oneshot) run two-shot, bytes
  std::string source;                 // file the numbers came from, or why there are none
};

// Reads and validates a calibration file for `gpu_name` x `world`; returns empty thresholds
// with `source` explaining why when the file is missing or for other hardware. Malformed
// files are an InputError naming the file and field.
AllreduceThresholds load_allreduce_thresholds(const std::string& path, const std::string& gpu_name, int world);
// TPB_ALLREDUCE_THRESHOLDS if set, else baselines/h200x2/allreduce_thresholds.json under the
// first data root holding it (reference_engine/config/data_home.h), else the source tree's.
std::string default_allreduce_thresholds_path();

class AutoCommunicator final : public Communicator {
 public:
  AutoCommunicator(Bootstrap& bootstrap, const CommOptions& options);

  void all_reduce(const void* in, void* out, std::size_t count, DType dtype, void* stream) override;
  void all_gather(const void* in, void* out, std::size_t count_per_rank, DType dtype, void* stream) override;
  void barrier() override { custom_.barrier(); }
  int rank() const override { return custom_.rank(); }
  int size() const override { return custom_.size(); }
  std::string name() const override { return "auto"; }
  std::size_t memory_bytes() const override { return custom_.memory_bytes(); }
  // Which thresholds auto uses and where they came from (and the custom path's fallback).
  std::string fallback_reason() const override;
  // Calls per path as choice_for() sent them: custom-oneshot, custom-twoshot and nccl, each
  // with its message-size range (the size classes), counted where each one ran.
  std::vector<AllreduceCalls> allreduce_calls() const override { return custom_.allreduce_calls(); }
  void reset_allreduce_calls() override { custom_.reset_allreduce_calls(); }
  void check_errors() const override { custom_.check_errors(); }
  // Collective (CustomAllreduceCommunicator::recover).
  void recover() { custom_.recover(); }
  CustomAllreduceCommunicator& custom() { return custom_; }

  // "custom-oneshot" | "custom-twoshot" | "nccl" for a message of `bytes`.
  std::string choice_for(std::size_t bytes) const;
  const AllreduceThresholds& thresholds() const { return thresholds_; }

 private:
  CustomAllreduceCommunicator custom_;
  AllreduceThresholds thresholds_;
};

}  // namespace tpb
