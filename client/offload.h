// The trainer's half of the DataLoader offload at the C++ level (the C ABI's
// gm_offload and gm_vchannel: include/goldminer/client.h; used by
// python/goldminer/offload.py). Connections 4 and 5 of dataplane/messages_offload.h.
//
// An Offload is a rank's offload session at the coordinator: a channel number, a
// ticket for the data ports and the list of workers, kept alive by a heartbeat
// thread. It takes no rank session, so a goldminer.Loader of the same rank runs
// beside it. A VirtualChannel is one virtual DataLoader worker on one data
// worker: bytes written go to the process's stdin side of its stream, bytes read
// are what it wrote, and the end of the stream carries its exit status.
//
// Thread-safety: Offload's methods are safe from any thread. A VirtualChannel
// has one writer thread and one reader thread at a time; Shutdown() from any
// thread wakes both.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "client/client.h"
#include "core/os/unique_fd.h"
#include "core/status.h"
#include "core/thread_annotations.h"
#include "dataplane/messages_offload.h"
#include "dataplane/protocol.h"
#include "dataplane/socket.h"

namespace gm {

class VirtualChannel;

class Offload {
 public:
  // Connects to the coordinator (options.coordinator, secret, rank as for
  // Client::Connect; world_size and the rest are not used) and asks OFFLOAD.
  static Result<std::unique_ptr<Offload>> Open(const ClientOptions& options);
  ~Offload();  // BYE, stops the heartbeat
  Offload(const Offload&) = delete;
  Offload& operator=(const Offload&) = delete;

  uint64_t channel() const { return channel_; }
  // The run's live data workers ("HOST:PORT"), asked of the coordinator.
  Result<std::vector<std::string>> Workers();
  // The data worker the coordinator names for this client's next virtual worker
  // (the one hosting the fewest: GET_WORKERS {place: true}); Unavailable when
  // the run has none live.
  Result<std::string> Place();
  // OFFLOAD_NOTE: what became of one DataLoader, for the run's record.
  Status Note(const OffloadNoteMsg& note);
  // Opens a virtual worker on the data worker at `worker` running `python`
  // (the trainer's interpreter path) after importing `modules`.
  Result<std::unique_ptr<VirtualChannel>> OpenChannel(const std::string& worker,
                                                      const std::string& python,
                                                      const std::vector<std::string>& modules);

 private:
  Offload() = default;
  void HeartbeatLoop();
  Result<std::vector<std::string>> AskWorkers(bool place);
  // The coordinator went away (`why`): dials it again for options_.reconnect_s and
  // asks for this channel back. Unavailable when none comes back with it.
  Status Reconnect(const Status& why) REQUIRES(mu_);

  ClientOptions options_;
  std::string coordinator_name_;
  uint64_t channel_ = 0;
  std::string ticket_;
  std::string proof_;  // the channel's proof for OFFLOAD_OPEN (dataplane/offload_proof.h)
  Mutex mu_;           // one request or heartbeat on the coordinator socket at a time
  Socket coordinator_ GUARDED_BY(mu_);
  bool reconnected_ GUARDED_BY(mu_) = false;   // Reconnect succeeded, last at:
  double reconnected_at_ GUARDED_BY(mu_) = 0;  // MonotonicSeconds()
  std::condition_variable cv_;
  bool stop_ GUARDED_BY(mu_) = false;
  std::thread heartbeat_;
};

class VirtualChannel {
 public:
  ~VirtualChannel();
  VirtualChannel(const VirtualChannel&) = delete;
  VirtualChannel& operator=(const VirtualChannel&) = delete;

  int64_t pid() const { return pid_; }               // on its worker's host
  const std::string& host() const { return host_; }  // the worker's name for itself
  const std::string& worker() const { return worker_; }
  // Whether the data worker shares this host (the connection is its data port's
  // Unix socket: a result's buffers may come as a memfd, see TakeFd).
  bool same_host() const { return socket_.transport() == "unix"; }

  // Sends `bytes` (in frames of at most kMaxOffloadChunkBytes). Unavailable once
  // the channel is gone.
  Status Write(std::string_view bytes);
  // The next bytes the process wrote: a view valid until the next Read. Empty at
  // the end of its stream, with `*exit_status` how it ended (Python's
  // returncode; nullopt when the worker gave none). Unavailable when the
  // connection broke (the data worker went away), Corrupt for a frame that is
  // not OFFLOAD_DATA / OFFLOAD_EXIT or whose digest is wrong.
  Result<std::string_view> Read(std::optional<int>* exit_status);
  // The descriptor the last Read's bytes came with (a sealed memfd of a result's
  // buffers, goldminer._vwire; the caller owns it), or -1. Read refuses (Corrupt)
  // a frame that says a descriptor came and brought none, and one that brought
  // one unsaid.
  int TakeFd() { return fd_.Release(); }
  // Wakes a blocked Read and Write (both fail); the data worker then ends the process.
  void Shutdown();

 private:
  friend class Offload;
  VirtualChannel(Socket socket, std::string worker, int64_t pid, std::string host);

  Socket socket_;
  const std::string worker_;
  const int64_t pid_;
  const std::string host_;
  Frame frame_;  // the reader's
  UniqueFd fd_;  // the reader's: what the last frame brought
};

}  // namespace gm
