// The trainer-side client of the data plane: one per trainer rank. It talks to the
// coordinator (connection 2 of dataplane/messages_control.h) for the epoch's plan and the
// worker list, and to every data worker (connection 3) for batches, which it hands
// to the trainer in the rank's batch sequence (RankSequence, dataplane/batch_order.h)
// whatever order they arrive in, each exactly once.
//
// Threads: one receiver thread per worker connection decodes BATCH frames into a
// shared re-order buffer (a mutex and a condition variable). Next(), StartEpoch(),
// Resume() and the destructor must be called from one thread at a time (the
// trainer's); stats() and state() may be called from any thread at any time.
// Every wait has a deadline: a client never blocks longer than
// ClientOptions::timeout_s without any batch arriving.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "client/buffer_pool.h"
#include "core/clock.h"
#include "core/sample.h"
#include "core/status.h"
#include "core/trainer_env.h"
#include "dataplane/messages_control.h"

namespace gm {

inline constexpr double kDefaultClientTimeoutS = 300.0;
// While Next() waits this long, the client asks the coordinator for the worker list
// (and, for unknown split counts, the plan) again.
inline constexpr double kClientRefreshS = 0.5;
inline constexpr uint64_t kDefaultBufferedBytes = uint64_t{1} << 30;
inline constexpr uint64_t kDefaultLookAheadBatches = 128;
inline constexpr double kDefaultStallS = 60.0;

struct ClientOptions {
  std::string coordinator;                    // "HOST:PORT" or "unix:PATH"; empty: $GOLDMINER_ADDR
  std::string secret;                         // the client key; empty: LoadSecret()
  int rank = -1;                              // -1: $RANK, else $SLURM_PROCID, else 0
  int world_size = -1;                        // -1: $WORLD_SIZE, else $SLURM_NTASKS, else 1
  int prefetch = kDefaultPrefetchBatches;     // initial credit per worker connection
  double timeout_s = kDefaultClientTimeoutS;  // seconds without progress before an error
  double connect_timeout_s = 5.0;             // per connection attempt, handshake included
  // A coordinator that goes away (a closed or failed connection) is dialled again
  // for this long, or for the coordinator's SUBSCRIBED reconnect_s when that is
  // less (`goldminer run`: 15 s): one started again from its journal takes the
  // client back in its session, and the client says again what it acknowledged
  // of the last two epochs (the old one may have died before reading it).
  // Batches keep coming from the workers meanwhile. 0: the first failure is an
  // error.
  double reconnect_s = 60;
  // HEARTBEAT to the coordinator after this long without a frame (it closes client
  // connections silent for kClientIdleS); tests shorten it.
  double heartbeat_s = kClientHeartbeatS;
  // The look-ahead bound: the progress rule (dataplane/messages_control.h) grants a
  // worker more credit only while fewer than max_lookahead_batches of its
  // batches that are not verified yet (sent by a worker not yet named as its
  // split's holder) wait in the re-order buffer and they hold less than an
  // equal part of max_buffered_bytes (divided among the live worker
  // connections); and while the whole buffer holds fewer than
  // max_lookahead_batches per live connection and less than max_buffered_bytes,
  // except for the awaited split's holder, which is held to that bound for what
  // it sent itself (a holder that fills it without sending the awaited batch is
  // reported as a stall). So no worker can grow the trainer's memory past twice
  // max_buffered_bytes + the credit granted (prefetch + 1 batches per
  // connection), nor stop the credit of the others.
  // 0: $GOLDMINER_CLIENT_BUFFER_MB MiB, else 1 GiB.
  uint64_t max_buffered_bytes = 0;
  uint64_t max_lookahead_batches = kDefaultLookAheadBatches;
  // The progress deadline: a worker that holds the batch this rank waits for
  // and, with credit to send it, sends nothing of it for this long while Next()
  // waits is reported to the coordinator (FAULT), which drops the worker; its
  // splits are made by others (and the launcher replaces it). So is a worker
  // that sends a batch no honest worker sends. 0: $GOLDMINER_STALL_TIMEOUT_S
  // seconds, else kDefaultStallS.
  double stall_s = 0;
  // The clock of the heartbeat, the progress deadline, timeout_s and the waits
  // for plans and batches (core/clock.h); null: SystemClock(). Tests pass a
  // FakeClock. Socket deadlines stay in real time.
  const Clock* clock = nullptr;
};

// Fills the empty/-1/0 fields of `options` from the environment as documented above.
// InvalidArgument when a variable is not a number (GOLDMINER_CLIENT_BUFFER_MB: not
// an integer from 1 to 1048576; GOLDMINER_STALL_TIMEOUT_S: not an integer from 1
// to 86400), rank is outside [0, world_size),
// or no coordinator address is given; NotFound when no secret is available.
Result<ClientOptions> ResolveClientOptions(ClientOptions options);

struct ClientStats {
  double data_wait_s = 0;           // seconds spent inside Next()
  uint64_t batches = 0;             // batches delivered to the trainer
  uint64_t samples = 0;             // samples in them
  uint64_t bytes = 0;               // data + label bytes delivered
  uint64_t duplicates_dropped = 0;  // copies of consumed batches and batches past the share
  uint64_t workers_connected = 0;   // worker connections open now
  uint64_t connections_lost = 0;    // worker connections that broke
  // The same-host path (dataplane/shm.h): worker connections open on it now, and
  // batches received whose data came in shared memory.
  uint64_t same_host_connections = 0;
  uint64_t same_host_batches = 0;
};

// Where a rank stands: batches of `epoch` consumed so far, and what that
// position belongs to. A state from state() can be resumed in the same run or in a
// new one (a requeued job) of the same pipeline, seed and world size, whatever its
// worker count: the rank then gets exactly the batches an uninterrupted run would
// have delivered next.
struct ResumeState {
  uint64_t epoch = 0;
  uint64_t position = 0;
  // Where the position lies in the rank's sequence (the split's index among the
  // rank's splits and its batches consumed); nullopt in a state that only has a
  // position (it resumes within the run that knows the earlier splits' counts).
  std::optional<SequenceKey> at;
  // What the batch order belongs to (SUBSCRIBED): empty/-1 when not known; a
  // state whose fields differ from the run's is refused.
  std::string order;  // 64 hex: the pipeline document and split size
  int64_t seed = -1;  // the pipeline's seed
  int world_size = -1;
  int rank = -1;
};

class Client {
 public:
  // Resolves `options`, connects to the coordinator (handshake as "client"),
  // subscribes as options.rank. Unavailable when the coordinator cannot be reached;
  // InvalidArgument "authentication failed" for a wrong secret, or when the
  // coordinator's world size differs from options.world_size.
  static Result<std::unique_ptr<Client>> Connect(const ClientOptions& options);

  // Says BYE to the coordinator, closes every connection and joins the threads.
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // Fetches the plan of `epoch`, lays out this rank's sequence from its start, and
  // connects to the plan's workers. Batches of the epoch already buffered are kept.
  Status StartEpoch(uint64_t epoch);

  // The next batch of the rank's sequence, blocking until it arrives; nullopt once
  // the epoch's share has been delivered (call StartEpoch for the next one). Starts
  // epoch 0 when no epoch was started. Unavailable, naming what it waited for, when
  // timeout_s pass without a batch arriving or the coordinator goes away.
  // When $GOLDMINER_PROFILE_DIR was set at Connect, each batch returned is also
  // recorded as a step (wait begin/end, samples) for `goldminer profile`
  // (core/step_log.h, source "goldminer").
  Result<std::optional<Batch>> Next();

  // Hands a consumed batch's data buffer back for the next received batch (saves
  // the page faults of a fresh 40 MB buffer). Optional.
  void Recycle(Batch&& batch);
  // The pool Recycle feeds; it outlives the client (batches may outlive it too).
  std::shared_ptr<BufferPool> buffer_pool() const;

  // Tells the coordinator (RESUME) and restarts the sequence of state.epoch with its
  // first state.position batches consumed. InvalidArgument, saying which, when the
  // state's order, seed, world size or rank differ from this run's. Without
  // state.at: also when the position lies past a split whose count the
  // coordinator's plan does not know yet (a position inside the first such split is
  // fine). Unavailable with the coordinator's reason when it refuses the state.
  Status Resume(const ResumeState& state);

  ClientStats stats() const;
  ResumeState state() const;
  // The pipeline's stages "on": "device" as a JSON array ("[]" for none): the
  // trainer applies them to each batch (the Python package does).
  const std::string& device_stages() const;
  int rank() const;
  int world_size() const;

 private:
  struct Impl;
  explicit Client(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace gm
