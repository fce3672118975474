// Which ranks of a group share a host, and what that allows. shm (one shared-memory
// segment) and the custom CUDA-IPC allreduces (peer pointers) only work between processes of
// one host: a group that spans hosts must not get them. The rule is the backend table's
// `across_hosts` column (backends.h); this file applies it.
//
// A rank's host is its host name, or TPB_HOST_ID when set: the launcher's "virtual hosts"
// (tpbench run --virtual-hosts N) give the ranks of one machine distinct ids, so that the
// rules can be exercised, and tested, on one machine.
#pragma once

#include <string>
#include <vector>

#include "reference_engine/comm/bootstrap.h"

namespace tpb {

// This machine's name (gethostname).
std::string this_host_name();

// This process's host: TPB_HOST_ID when set and non-empty, else this_host_name().
std::string this_host_id();

// The host of rank `rank` of `world_size` ranks spread over `hosts` virtual hosts: blocks of
// consecutive ranks, as mpirun fills the slots of its hosts in order ("vhost0", "vhost1", ...).
std::string virtual_host_id(int rank, int world_size, int hosts);

struct HostLayout {
  std::vector<std::string> host_of_rank;  // rank order

  int host_count() const;
  bool spans_hosts() const { return host_count() > 1; }
  // "ranks 0-1 on vhost0, ranks 2-3 on vhost1" (ranks listed as runs where consecutive).
  std::string describe() const;
};

// Every rank's this_host_id(), through the bootstrap (collective: every rank calls it).
HostLayout gather_host_layout(Bootstrap& bootstrap);

// What a group asking for `requested` runs on `layout`: the backend itself, another one with
// the reason (custom -> nccl when the group spans hosts), or a refusal (shm across hosts).
struct BackendAcrossHosts {
  std::string backend;          // the row to build; empty when refused
  std::string fallback_reason;  // non-empty when `backend` is not `requested`
  std::string refusal;          // non-empty when nothing may run: why, and what would
};
BackendAcrossHosts backend_across_hosts(const std::string& requested, const HostLayout& layout);

}  // namespace tpb
