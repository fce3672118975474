#include "suite/worker.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <exception>

#include "suite/case_spec.h"
#include "suite/workload.h"
#include "suite/workloads/workloads.h"
#include "tpb/check.h"
#include "tpb/test_hooks.h"

namespace tpb {
namespace {

using nlohmann::json;

bool env_int(const char* name, int& value) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return false;
  char* end = nullptr;
  const long v = std::strtol(text, &end, 10);
  if (*end != '\0' || v < 0 || v > 1 << 20) return false;
  value = static_cast<int>(v);
  return true;
}

// TEST-ONLY planted failure: with TPB_TEST_FAIL_CASE=<case id>[,<case id>...] every rank
// fails those cases before their workload runs, as a crash of the case would; the next
// invocation without the variable runs them (tests/cli/reproduce_any_record.sh retries one
// with --resume --retry-failed). run.json records the variable with the environment.
void planted_case_failure_for_tests(const std::string& case_id) {
  const char* v = test_hook("TPB_TEST_FAIL_CASE");
  if (v == nullptr || *v == '\0' || case_id.empty()) return;
  const std::string list = std::string(",") + v + ",";
  if (list.find("," + case_id + ",") != std::string::npos)
    TPB_FAIL("planted failure of case " << case_id << " (TPB_TEST_FAIL_CASE)");
}

}  // namespace

std::vector<std::string> SocketBootstrap::all_gather(const std::string& mine) {
  const std::uint64_t seq = next_seq_++;
  control::write_all(fd_, control::encode({{"type", "allgather"}, {"seq", seq}, {"data", control::to_hex(mine)}}));
  json reply;
  // The controller sends nothing else to a rank that is inside a case, so the next message
  // is the answer; anything else means the two sides disagree about the protocol.
  TPB_CHECK(control::read_message(fd_, reader_, reply),
            "rank " << rank_ << ": the controller closed the control socket during all_gather #" << seq);
  TPB_CHECK(reply["type"] == "allgather" && reply.value("seq", std::uint64_t(-1)) == seq &&
                reply["data"].is_array() && reply["data"].size() == static_cast<std::size_t>(size_),
            "rank " << rank_ << ": expected the answer to all_gather #" << seq << ", got "
                    << reply.dump().substr(0, 200));
  std::vector<std::string> all;
  for (const auto& hex : reply["data"]) all.push_back(control::from_hex(hex.get<std::string>()));
  return all;
}

int run_worker() {
  int rank = -1, world_size = -1, local_rank = -1;
  const char* address = std::getenv("TPB_CONTROL_SOCKET");
  const char* group_id = std::getenv("TPB_GROUP_ID");
  if (!env_int("RANK", rank) || !env_int("WORLD_SIZE", world_size) || !env_int("LOCAL_RANK", local_rank) ||
      address == nullptr || group_id == nullptr || world_size < 1 || rank >= world_size) {
    std::fprintf(stderr,
                 "tpbench __worker: internal role of a rank process; it needs RANK, WORLD_SIZE, LOCAL_RANK, "
                 "TPB_CONTROL_SOCKET and TPB_GROUP_ID from the launcher\n");
    return 2;
  }

  const int fd = control::connect_unix(address);
  control::LineReader reader;
  control::write_all(fd, control::encode({{"type", "hello"}, {"rank", rank}, {"pid", static_cast<int>(getpid())}}));
  SocketBootstrap bootstrap(fd, reader, rank, world_size, group_id);
  WorkerState state(bootstrap);

  json message;
  while (control::read_message(fd, reader, message)) {
    const std::string type = message["type"];
    if (type == "exit") break;
    TPB_CHECK(type == "case", "rank " << rank << ": unexpected control message '" << type << "'");
    json reply;
    try {
      // Parsed once: the workload reads typed fields (suite/case_spec.h).
      const CaseSpec spec = CaseSpec::from_json(message["spec"]);
      const WorkloadFn fn = find_workload(spec.workload);
      if (fn == nullptr) {
        std::string known;
        for (const auto& n : workload_names()) known += (known.empty() ? "" : ", ") + n;
        TPB_INPUT_FAIL("case_spec: unknown workload '" << spec.workload << "' (known: " << known << ")");
      }
      planted_case_failure_for_tests(spec.case_id);
      RankResult result = fn(spec, state);
      result.rank = rank;
      reply = {{"type", "result"}, {"result", result.to_json()}};
    } catch (const InputError& e) {
      reply = {{"type", "error"}, {"message", e.what()}, {"input_error", true}};
    } catch (const std::exception& e) {
      reply = {{"type", "error"}, {"message", e.what()}, {"input_error", false}};
    }
    if (reply["type"] == "error") std::fprintf(stderr, "rank %d: %s\n", rank, reply["message"].get<std::string>().c_str());
    control::write_all(fd, control::encode(reply));
  }
  close(fd);
  return 0;
}

}  // namespace tpb
