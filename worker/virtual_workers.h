// Virtual DataLoader workers on a data worker: the worker's half of the
// DataLoader offload (python/goldminer/offload.py; connection 5 of
// dataplane/messages_offload.h).
//
// A trainer that holds an offload ticket opens one connection per virtual
// worker at the data port (DataServer::SetOffloadHandler). Serve() then asks a
// host process, `PYTHON -m goldminer._vhost` (one per interpreter path, started
// at the first request and kept: it has imported torch once, and forks each
// virtual worker in milliseconds), for a child that runs goldminer._vworker on a
// stream socket, answers OFFLOAD_OPENED {pid, host}, and relays that socket's
// bytes both ways as OFFLOAD_DATA frames (each with the SHA-256 of its payload
// in the sealed meta) until one end finishes. A descriptor the process passes
// with its bytes (a result's buffers in a sealed memfd, when the trainer is on
// this host and its connection the data port's Unix socket) travels with the
// frame of those bytes (meta "fd": true); the process may pass one per write,
// and none to a trainer on another host (it is killed). The process ending sends
// OFFLOAD_EXIT {status} (and the connection closes); the trainer closing, or a
// frame that is not OFFLOAD_DATA or whose digest is wrong, kills it (SIGKILL).
//
// The interpreter is $GOLDMINER_PYTHON on the worker when set (nodes whose
// Python lives elsewhere), else the one OFFLOAD_OPEN names (the trainer's own
// sys.executable: clusters share their software paths), which must be a file
// named python, python3 or python3.N: any other program (/bin/sh) is refused
// before anything starts. It runs as this
// worker's user, with the worker's environment less the run's secret and with
// goldminer's Python package first on PYTHONPATH. The blob it runs is code: only
// a holder of the client key gets an offload ticket (goldminer-protocol(7)), and
// a ticket alone opens nothing: OFFLOAD_OPEN must carry the coordinator's proof
// for the ticket's rank and channel (dataplane/offload_proof.h), checked against
// the public key the coordinator gave in REGISTERED (SetIssuer). A holder of the
// worker key can mint tickets, not proofs.
//
// What a trainer can make it hold: at most Options::max_channels virtual
// workers at once (a process and two threads each: more are refused with
// ERROR), at most kMaxHosts hosts, one frame of kMaxOffloadChunkBytes per
// direction per channel in memory.
//
// Thread-safety: Serve() is called from any number of threads at once (one per
// connection); the destructor ends the hosts and with them every virtual worker:
// call it once no Serve() runs (after the data port shut down).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "core/os/unique_fd.h"
#include "core/status.h"
#include "core/thread_annotations.h"
#include "dataplane/socket.h"

namespace gm {

inline constexpr std::string_view kPythonEnv = "GOLDMINER_PYTHON";

// Whether `path`'s file name is a Python interpreter's: python, python3,
// python3.11 (OFFLOAD_OPEN may name no other program).
bool IsPythonName(std::string_view path);

class VirtualWorkers {
 public:
  static constexpr size_t kMaxHosts = 4;  // distinct interpreter paths

  struct Options {
    size_t max_channels = 64;      // virtual workers at once
    std::string python;            // the interpreter for every host; empty: OFFLOAD_OPEN's
    std::string package_dir;       // put first on the hosts' PYTHONPATH
    std::string host_name;         // sent in OFFLOAD_OPENED (for the trainer's messages)
    double spawn_timeout_s = 120;  // a host's answer (it may be importing the blob's modules)
  };

  explicit VirtualWorkers(Options options);
  ~VirtualWorkers();
  VirtualWorkers(const VirtualWorkers&) = delete;
  VirtualWorkers& operator=(const VirtualWorkers&) = delete;

  // One virtual worker on `socket` (a DataServer::OffloadHandler): reads
  // OFFLOAD_OPEN, starts the process and relays until it ends or the trainer
  // goes. OK when either ended cleanly; the error (after ERROR was sent, when
  // the trainer can still read it) for a refused request or a broken frame.
  Status Serve(Socket& socket, int64_t rank, uint64_t channel);

  // Starts the host of `python` now ($GOLDMINER_PYTHON's when set), so that it
  // imports torch while the run starts and the first DataLoader finds it ready
  // (the run passes the trainer's interpreter: `goldminer worker --warm-python`).
  // Why none was started otherwise (not an interpreter, not here): the first
  // OFFLOAD_OPEN then starts one, as without.
  Status Warm(const std::string& python);

  // The coordinator's public key for offload proofs (REGISTERED's offload_key).
  // Until it is set, or when it is empty, every OFFLOAD_OPEN is refused.
  void SetIssuer(std::string public_key);

  size_t open() const;      // virtual workers now
  uint64_t served() const;  // virtual workers started so far (OFFLOAD_OPENED sent)
  uint64_t shared() const;  // descriptors relayed to trainers on this host so far

 private:
  class Host;
  struct Started {  // a virtual worker whose OFFLOAD_OPENED was sent
    std::shared_ptr<Host> host;
    UniqueFd chan;  // our end of its stream
    int64_t pid = 0;
  };
  Result<std::shared_ptr<Host>> HostFor(const std::string& python);
  Result<Started> StartOne(Socket& socket, int64_t rank, uint64_t channel);
  Status Relay(Socket& socket, Started& started);
  // Sends ERROR {why} (best effort) and returns `why`.
  static Status Refuse(Socket& socket, Status why);

  const Options options_;
  mutable Mutex mu_;
  std::map<std::string, std::shared_ptr<Host>> hosts_ GUARDED_BY(mu_);
  size_t open_ GUARDED_BY(mu_) = 0;
  std::string issuer_ GUARDED_BY(mu_);  // SetIssuer's key
  uint64_t served_ GUARDED_BY(mu_) = 0;
  std::atomic<uint64_t> shared_{0};
};

}  // namespace gm
