// Bootstrap: the out-of-band channel the rank processes of one case share before any
// communicator exists. The launcher provides it (a Unix-domain socket to the parent, which
// relays); communicators use it to exchange NCCL unique ids, CUDA IPC handles and
// shared-memory names. Every rank must make the same sequence of calls.
#pragma once

#include <string>
#include <vector>

namespace tpb {

class Bootstrap {
 public:
  virtual ~Bootstrap() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Every rank contributes `mine`; every rank receives all contributions in rank order.
  virtual std::vector<std::string> all_gather(const std::string& mine) = 0;
  virtual void barrier() = 0;
  // A name unique to this group of workers (for shm segment names, log files).
  virtual std::string group_id() const = 0;
};

}  // namespace tpb
