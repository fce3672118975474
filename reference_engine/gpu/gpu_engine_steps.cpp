// GpuEngine, steps: prefill and decode (eager, or through one captured CUDA graph per batch
// size), their inputs, the communicator, and reading the logits back.
#include "reference_engine/gpu/gpu_engine_impl.h"

#include <cstring>

namespace tpb {

using gpu_engine_internal::kBf16;

std::vector<std::size_t> GpuEngine::step_all_reduce_counts(std::int64_t tokens) const {
  return std::vector<std::size_t>(static_cast<std::size_t>(2 * config_.num_hidden_layers + 1),
                                  static_cast<std::size_t>(tokens * config_.hidden_size));
}

void GpuEngine::check_tokens(const std::vector<std::int64_t>& tokens) const {
  for (std::size_t i = 0; i < tokens.size(); ++i)
    TPB_INPUT_CHECK(tokens[i] >= 0 && tokens[i] < config_.vocab_size,
                    "token " << tokens[i] << " at index " << i << " is outside the vocabulary [0, "
                             << config_.vocab_size << ")");
}

// Token ids, positions (past + i) and sequence lengths (past + n) into their fixed device
// buffers, queued on the stream ahead of the step. Pageable host memory: cudaMemcpyAsync
// has read it when it returns, so the host vectors may go out of scope.
void GpuEngine::upload_step_inputs(const std::vector<std::int64_t>& tokens, std::int64_t n) {
  const std::int64_t T = static_cast<std::int64_t>(tokens.size());
  std::vector<std::int32_t> ids(T), pos(T), lens(batch_, static_cast<std::int32_t>(length_ + n));
  for (std::int64_t t = 0; t < T; ++t) {
    ids[t] = static_cast<std::int32_t>(tokens[t]);
    pos[t] = static_cast<std::int32_t>(length_ + t % n);
  }
  Impl& m = *impl_;
  TPB_CUDA_CHECK(cudaMemcpyAsync(m.ids, ids.data(), sizeof(std::int32_t) * T, cudaMemcpyHostToDevice, stream_));
  TPB_CUDA_CHECK(cudaMemcpyAsync(m.positions, pos.data(), sizeof(std::int32_t) * T, cudaMemcpyHostToDevice, stream_));
  TPB_CUDA_CHECK(
      cudaMemcpyAsync(m.seq_lens, lens.data(), sizeof(std::int32_t) * batch_, cudaMemcpyHostToDevice, stream_));
}

void GpuEngine::prefill(const std::vector<std::int64_t>& tokens, std::int64_t batch) {
  TPB_INPUT_CHECK(batch > 0 && !tokens.empty() && tokens.size() % batch == 0,
                  "prefill: " << tokens.size() << " tokens do not split into " << batch << " equal sequences");
  const std::int64_t n = static_cast<std::int64_t>(tokens.size()) / batch;
  TPB_INPUT_CHECK(batch <= options_.max_batch, "prefill: batch " << batch << " above max_batch " << options_.max_batch);
  TPB_INPUT_CHECK(n <= options_.max_len, "prefill: " << n << " tokens per sequence above max_len " << options_.max_len);
  TPB_INPUT_CHECK(batch * n <= options_.max_prefill_tokens,
                  "prefill: " << batch * n << " tokens above max_prefill_tokens " << options_.max_prefill_tokens);
  check_tokens(tokens);
  batch_ = batch;
  length_ = 0;
  upload_step_inputs(tokens, n);
  forward(n, false);
  length_ = n;
}

void GpuEngine::decode(const std::vector<std::int64_t>& tokens) {
  TPB_INPUT_CHECK(batch_ > 0, "decode before prefill");
  TPB_INPUT_CHECK(static_cast<std::int64_t>(tokens.size()) == batch_,
                  "decode: " << tokens.size() << " tokens for " << batch_ << " sequences");
  TPB_INPUT_CHECK(length_ + 1 <= options_.max_len,
                  "decode: the KV cache holds " << options_.max_len << " tokens per sequence, all used");
  check_tokens(tokens);
  upload_step_inputs(tokens, 1);
  if (!options_.cuda_graph) {
    forward(1, true);
  } else if (auto it = graphs_.find(batch_); it != graphs_.end()) {
    TPB_CUDA_CHECK(cudaGraphLaunch(it->second, stream_));
    const std::int64_t L = config_.num_hidden_layers;
    stats_.all_reduces += 2 * L + 1;
    stats_.all_reduce_bytes += (2 * L + 1) * batch_ * config_.hidden_size * static_cast<std::int64_t>(kBf16);
    stats_.all_gathers += 1;
    stats_.tokens += batch_;
    ++stats_.graph_replays;
    last_tokens_ = batch_;    // a replay is a step: its logits replace the last ones
    logits_valid_ = false;
  } else if (decode_runs_[batch_] == 0) {
    // First step of this shape: eager, so cuBLASLt (and any lazily set-up kernel) has chosen
    // and cached what the capture will record.
    forward(1, true);
    ++decode_runs_[batch_];
  } else {
    cudaGraph_t graph = nullptr;
    TPB_CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
    try {
      forward(1, true);
    } catch (...) {
      cudaStreamEndCapture(stream_, &graph);
      if (graph != nullptr) cudaGraphDestroy(graph);
      throw;
    }
    TPB_CUDA_CHECK(cudaStreamEndCapture(stream_, &graph));
    cudaGraphExec_t exec = nullptr;
    const cudaError_t inst = cudaGraphInstantiate(&exec, graph, 0);
    cudaGraphDestroy(graph);
    TPB_CUDA_CHECK(inst);
    graphs_[batch_] = exec;
    ++stats_.graph_captures;
    // The capture recorded the step without running it (forward() counted its collectives).
    TPB_CUDA_CHECK(cudaGraphLaunch(exec, stream_));
    ++stats_.graph_replays;
    last_tokens_ = batch_;
    logits_valid_ = false;
  }
  length_ += 1;
}

void GpuEngine::drop_graphs() {
  if (!graphs_.empty()) synchronize();
  for (auto& [b, exec] : graphs_) cudaGraphExecDestroy(exec);
  graphs_.clear();
  decode_runs_.clear();
}

void GpuEngine::set_communicator(Communicator& comm) {
  TPB_CHECK(comm.size() == shard_.tp && comm.rank() == shard_.rank,
            "gpu engine: communicator rank " << comm.rank() << " of " << comm.size() << " for shard rank "
                                             << shard_.rank << " of " << shard_.tp);
  if (&comm == comm_) return;
  drop_graphs();
  comm_ = &comm;
}

void GpuEngine::forget_communicator() {
  drop_graphs();
  comm_ = nullptr;
}

void GpuEngine::rewind(std::int64_t tokens) {
  TPB_INPUT_CHECK(tokens >= 0 && tokens <= length_,
                  "rewind to " << tokens << " tokens, but " << length_ << " are cached");
  length_ = tokens;
}

void GpuEngine::synchronize() const {
  TPB_CUDA_CHECK(cudaStreamSynchronize(stream_));
  // A failed custom allreduce (in a replayed graph too) left NaN in its output: say so here.
  comm_->check_errors();
}

std::vector<std::int64_t> GpuEngine::routed_expert_reads_by_layer() const {
  std::vector<std::int64_t> out(static_cast<std::size_t>(config_.num_hidden_layers), 0);
  if (impl_->expert_reads == nullptr) return out;  // no MoE layer
  std::vector<unsigned long long> reads(out.size());
  TPB_CUDA_CHECK(cudaMemcpyAsync(reads.data(), impl_->expert_reads, sizeof(unsigned long long) * reads.size(),
                                 cudaMemcpyDeviceToHost, stream_));
  synchronize();
  for (std::size_t l = 0; l < out.size(); ++l) out[l] = static_cast<std::int64_t>(reads[l]);
  return out;
}

std::int64_t GpuEngine::routed_expert_reads() const {
  std::int64_t total = 0;
  for (std::int64_t r : routed_expert_reads_by_layer()) total += r;
  return total;
}

void GpuEngine::set_phase_timing(bool on) {
  if (on == !phase_events_.empty()) return;
  drop_graphs();  // their steps record the events, or do not
  synchronize();
  for (cudaEvent_t e : phase_events_) TPB_CUDA_CHECK(cudaEventDestroy(e));
  phase_events_.clear();
  if (!on) return;
  phase_events_.resize(static_cast<std::size_t>(config_.num_hidden_layers + 3), nullptr);
  for (cudaEvent_t& e : phase_events_) TPB_CUDA_CHECK(cudaEventCreate(&e));
}

void GpuEngine::phase_mark(std::size_t boundary) {
  if (phase_events_.empty()) return;
  // Under stream capture the External flag makes the record an event-record node of the graph
  // (without it, a capture dependency only); outside a capture the flag is refused.
  if (gpu_engine_internal::capture_status(stream_) == cudaStreamCaptureStatusActive)
    TPB_CUDA_CHECK(cudaEventRecordWithFlags(phase_events_[boundary], stream_, cudaEventRecordExternal));
  else
    TPB_CUDA_CHECK(cudaEventRecord(phase_events_[boundary], stream_));
}

GpuEngine::StepPhases GpuEngine::last_step_phases() const {
  TPB_CHECK(!phase_events_.empty(), "last_step_phases: phase timing is off");
  synchronize();
  auto us = [&](std::size_t a, std::size_t b) {
    float ms = 0;
    TPB_CUDA_CHECK(cudaEventElapsedTime(&ms, phase_events_[a], phase_events_[b]));
    return 1e3 * static_cast<double>(ms);
  };
  const std::size_t L = static_cast<std::size_t>(config_.num_hidden_layers);
  StepPhases p;
  p.embed_us = us(0, 1);
  for (std::size_t l = 0; l < L; ++l) p.layer_us.push_back(us(1 + l, 2 + l));
  p.head_us = us(L + 1, L + 2);
  p.step_us = us(0, L + 2);
  return p;
}

const std::vector<float>& GpuEngine::logits() const {
  if (logits_valid_) return logits_;
  const std::int64_t T = last_tokens_, vl = dims_.vocab, V = config_.vocab_size;
  std::vector<float> gathered(static_cast<std::size_t>(shard_.tp * T * vl));
  TPB_CUDA_CHECK(cudaMemcpyAsync(gathered.data(), impl_->gathered, sizeof(float) * gathered.size(),
                                 cudaMemcpyDeviceToHost, stream_));
  synchronize();
  // gathered is [rank][token][vocab_local]; logits are [token][rank * vocab_local + v].
  logits_.resize(static_cast<std::size_t>(T * V));
  for (int r = 0; r < shard_.tp; ++r)
    for (std::int64_t t = 0; t < T; ++t)
      std::memcpy(logits_.data() + t * V + r * vl, gathered.data() + (r * T + t) * vl, sizeof(float) * vl);
  logits_valid_ = true;
  return logits_;
}

std::vector<float> GpuEngine::last_position_logits() const {
  TPB_CHECK(batch_ > 0 && last_tokens_ > 0 && last_tokens_ % batch_ == 0, "last_position_logits: no step has run");
  const std::int64_t n = last_tokens_ / batch_, vl = dims_.vocab, V = config_.vocab_size;
  std::vector<float> out(static_cast<std::size_t>(batch_ * V));
  for (int r = 0; r < shard_.tp; ++r)
    for (std::int64_t b = 0; b < batch_; ++b)
      TPB_CUDA_CHECK(cudaMemcpyAsync(out.data() + b * V + r * vl,
                                     impl_->gathered + (r * last_tokens_ + b * n + n - 1) * vl, sizeof(float) * vl,
                                     cudaMemcpyDeviceToHost, stream_));
  synchronize();
  return out;
}

}  // namespace tpb
