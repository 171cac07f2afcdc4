// Connections 4 and 5: the trainer's DataLoader offload (dataplane/messages.h has
// the shared part).
//
// 4. client -> coordinator (offload control): the trainer's DataLoader offload
//    (python/goldminer/offload.py), beside or instead of connection 2.
//      K->C OFFLOAD     {rank[, channel]}  (channel: the one the client had at a
//                       coordinator it lost, given back by one started again)
//      C->K OFFLOADING  {run_id, channel, ticket, workers: ["HOST:PORT", ...],
//                       reconnect_s}
//                       channel: this offload session's number (each OFFLOAD
//                       gets a higher one); ticket: its key at data ports as
//                       role "offload:RANK:CHANNEL" (dataplane/auth.h)
//      K->C GET_WORKERS, HEARTBEAT, BYE as on connection 2 (WORKERS without
//                       holders)
//      K->C OFFLOAD_NOTE {served, dataset, workers, blob_bytes | why} (no
//                       reply): what became of a DataLoader, for the record
//
// 5. client -> worker (a virtual DataLoader worker: worker/virtual_workers.h).
//    The client authenticates with its offload ticket. One connection is one
//    virtual worker: a Python process on the worker's host that speaks
//    goldminer._vwire frames on a byte stream; this connection carries that
//    stream both ways.
//      K->W OFFLOAD_OPEN   {python, modules}  (the trainer's interpreter path, the
//                          modules its blob names, for the host to import first)
//      W->K OFFLOAD_OPENED {pid, host}  or ERROR {message} and close
//      either way OFFLOAD_DATA {sha256} ; payload: the stream's next bytes, at
//                          most kMaxOffloadChunkBytes; sha256 (64 hex) of the
//                          payload, which the seal covers through the meta
//      W->K OFFLOAD_EXIT   {status[, why]}: the process ended (status as
//                          Python's returncode: negative for a signal); the
//                          worker closes after it
//    The client closing its end ends the process (SIGKILL).
//
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"
#include "dataplane/messages.h"

namespace gm {

inline constexpr uint64_t kMaxOffloadChunkBytes = uint64_t{16} << 20;  // one OFFLOAD_DATA
inline constexpr size_t kMaxOffloadModules = 4096;                     // OFFLOAD_OPEN modules
inline constexpr size_t kMaxModuleNameBytes = 256;
inline constexpr size_t kMaxPythonPathBytes = 4096;

// K->C OFFLOAD {rank}.
struct OffloadMsg {
  int64_t rank = 0;  // 0 .. 65535
  // Optional: the channel this client had at a coordinator it lost (0: none);
  // one started again gives it back when it issued it (its proofs and tickets
  // stay good), else a new one.
  uint64_t channel = 0;
  nlohmann::json Encode() const;
  static Result<OffloadMsg> Decode(const nlohmann::json& meta);
};

// K->C OFFLOAD_NOTE {served, dataset, workers, blob_bytes, why} (no reply), on
// an offload connection: what became of one of the trainer's DataLoaders, for
// the run's record. served: its workers run as virtual workers (workers: how
// many, 1..65536; blob_bytes: the pickled dataset, collate_fn and worker_init_fn,
// 0..2^40); else it runs on stock local workers, `why` saying why (1..1024
// bytes). dataset: the dataset's class name, 1..256 printable bytes.
struct OffloadNoteMsg {
  bool served = false;
  std::string dataset;
  uint64_t workers = 0;
  uint64_t blob_bytes = 0;
  std::string why;
  // served: "exact" (also when absent), "elastic" or "native" (goldminer run --offload)
  std::string mode = "exact";
  // Not served: "place" "in-process" (num_workers=0: it runs in the trainer's
  // process) or "stock" (absent: stock local workers).
  bool in_process = false;
  nlohmann::json Encode() const;
  static Result<OffloadNoteMsg> Decode(const nlohmann::json& meta);
};
inline constexpr size_t kMaxOffloadNoteWhyBytes = 1024;

// C->K OFFLOADING {run_id, channel, ticket, proof, workers}.
struct OffloadingMsg {
  std::string run_id;
  uint64_t channel = 0;  // >= 1
  std::string ticket;    // 64 hex
  std::string proof;     // 128 hex: the channel's proof (dataplane/offload_proof.h)
  std::vector<std::string> workers;
  double reconnect_s = 0;  // optional, as SUBSCRIBED's (0 when absent)
  nlohmann::json Encode() const;
  static Result<OffloadingMsg> Decode(const nlohmann::json& meta);
};

// K->W OFFLOAD_OPEN {python, modules, proof}: python an absolute path, printable,
// at most kMaxPythonPathBytes; modules dotted Python names ([A-Za-z0-9_.]), each at
// most kMaxModuleNameBytes, at most kMaxOffloadModules of them; proof the
// channel's, from OFFLOADING (128 hex).
struct OffloadOpenMsg {
  std::string python;
  std::vector<std::string> modules;
  std::string proof;
  nlohmann::json Encode() const;
  static Result<OffloadOpenMsg> Decode(const nlohmann::json& meta);
};

// W->K OFFLOAD_OPENED {pid, host}.
struct OffloadOpenedMsg {
  int64_t pid = 0;   // 1 .. 2^22
  std::string host;  // printable, at most 256 bytes
  nlohmann::json Encode() const;
  static Result<OffloadOpenedMsg> Decode(const nlohmann::json& meta);
};

// Either way OFFLOAD_DATA {sha256[, fd]}: `payload` is the frame's payload.
// CheckOffloadData: Corrupt unless sha256 is the payload's. fd (W->K only,
// optional, a bool): a descriptor came with the frame (SCM_RIGHTS, on the data
// port's Unix socket): a sealed memfd of a result's buffers; OffloadDataFd reads
// it (Corrupt for a value that is not a bool).
nlohmann::json EncodeOffloadData(std::string_view payload, bool fd = false);
Status CheckOffloadData(const nlohmann::json& meta, std::string_view payload);
Result<bool> OffloadDataFd(const nlohmann::json& meta);

// W->K OFFLOAD_EXIT {status[, why]}.
struct OffloadExitMsg {
  int64_t status = 0;  // -64 .. 255
  std::string why;     // optional, printable text, at most 1024 bytes
  nlohmann::json Encode() const;
  static Result<OffloadExitMsg> Decode(const nlohmann::json& meta);
};

}  // namespace gm
