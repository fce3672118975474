// The control channel between the launcher (controller) and its rank workers: one
// stream socket per rank (Unix-domain; TCP for job launchers), carrying newline-delimited JSON messages.
//
// Ranks an MPI or Slurm job starts reach the controller over TCP instead, with the same messages.
//
// Messages (every one is a JSON object with a "type"):
//   worker -> controller  {"type":"hello","rank":r,"pid":p}            once, on connect (Unix socket)
//   worker -> controller  {"type":"hello","rank":r,"pid":p,"token":"<hex>","host":"<name>","host_id":"<id>"}
//                                                                       once, on connect (TCP: the
//                                                                       token admits it, launcher.h)
//   worker -> controller  {"type":"host_facts","pid":p,"facts":{...}}   after the hello, from the first
//                                                                       rank of each host only (host_facts.h)
//   controller -> worker  {"type":"case","spec":{...}}                  run one case (workload.h)
//   worker -> controller  {"type":"allgather","seq":k,"data":"<hex>"}   bootstrap all_gather #k
//   controller -> worker  {"type":"allgather","seq":k,"data":["<hex>",...]}  all ranks' data, rank order
//   worker -> controller  {"type":"result","result":{...}}              the rank's result of the case
//   worker -> controller  {"type":"error","message":"...","input_error":b}  the case failed on this rank
//   controller -> worker  {"type":"exit"}                               leave the worker loop
// Bootstrap payloads are hex so that binary ids (NCCL unique ids, CUDA IPC handles) survive JSON.
// A barrier is an all_gather of empty strings.
//
// Addresses: a name starting with '@' is in Linux's abstract socket namespace (nothing to
// clean up on disk); anything else is a filesystem path.
#pragma once

#include <cstddef>
#include <string>

#include <nlohmann/json.hpp>

namespace tpb::control {

std::string to_hex(const std::string& bytes);
std::string from_hex(const std::string& hex);  // throws tpb::Error on a malformed string

// A listening socket (close-on-exec, non-blocking). Throws tpb::Error.
int listen_unix(const std::string& address, int backlog);
// As listen_unix, but -1 when another socket holds the address (EADDRINUSE): the caller
// picks another name. Other failures throw as listen_unix does.
int try_listen_unix(const std::string& address, int backlog);
// A connected socket (close-on-exec, blocking). Throws tpb::Error.
int connect_unix(const std::string& address);

// TCP, for ranks an MPI or Slurm job starts (on this host or others): a listening socket
// (close-on-exec, non-blocking) on `bind_address` (IPv4, "0.0.0.0" for every interface) at a
// port the kernel picks, returned in `port`; and a connected one (blocking, TCP_NODELAY) to
// "host:port". Whoever can reach the port can connect: the launcher admits a connection only
// with the run's token in its hello. Throw tpb::Error.
int listen_tcp(const std::string& bind_address, int backlog, int& port);
int connect_tcp(const std::string& host_port);

// Splits a byte stream into lines.
class LineReader {
 public:
  void append(const char* data, std::size_t n) { buffer_.append(data, n); }
  // Moves the next complete line (without its '\n') into `line`; false when none is complete.
  bool next_line(std::string& line);
  std::size_t buffered_bytes() const { return buffer_.size(); }

 private:
  std::string buffer_;
};

// Writes all of `data` to a blocking socket, without SIGPIPE. Throws tpb::Error.
void write_all(int fd, const std::string& data);
// One message as its wire form: compact JSON and '\n'.
std::string encode(const nlohmann::json& message);

// Blocking read of the next message from `fd`. Returns false on a clean EOF; throws
// tpb::Error on a read error or malformed JSON.
bool read_message(int fd, LineReader& reader, nlohmann::json& message);

}  // namespace tpb::control
