// The data port of a data worker: trainer clients connect here and receive the
// batches the worker makes for their rank (connection 3 of dataplane/messages_control.h).
//
// Its connections come through a ConnectionServer (dataplane/connection_server.h:
// HELLO at accept, a lobby until the client answers, a bounded thread per
// connection that answered); each connection's thread runs the rest of the
// handshake (the client proves a ticket for "client:RANK:SESSION", derived from
// the worker key this server holds: dataplane/auth.h), reads SUBSCRIBE {rank}
// and then adds each CREDIT {n} to the connection's credit. A connection that
// fails the handshake, sends garbage or stays silent is logged (rate-limited
// warnings naming the peer) and dropped; the others are served on. A rank has
// one connection: a newer session's replaces an older session's, an older
// session is refused, and a second one of the same session waits a little for
// the first to go, then is refused. SendToRank waits until the rank has a connection with
// credit, spends one credit and sends; when that connection breaks it waits for
// the client to reconnect and sends the batch again there.
//
// Thread-safety: SendToRank is called by one thread at a time (the worker's
// engine thread); Interrupt, Shutdown and the accessors are safe from any thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "core/log.h"
#include "core/sample.h"
#include "core/status.h"
#include "core/thread_annotations.h"
#include "dataplane/connection_server.h"
#include "dataplane/socket.h"

namespace gm {

// Seconds a BATCH send may take once the client granted credit for it.
inline constexpr double kBatchSendTimeoutS = 60.0;

// What one assignment has sent to its rank through SendToRank: the session it
// serves at least (the coordinator's newest session of the rank when it handed
// the split out), and the session its first batch went to.
struct SplitStream {
  uint64_t at_least = 0;
  uint64_t sent_to = 0;
};

class DataServer {
 public:
  // Listens on `host`:`port` (0: the kernel picks one) and starts accepting.
  // Unavailable naming the address when it cannot listen.
  // `worker_key`: the worker's key (dataplane/auth.h), which checks tickets.
  static Result<std::unique_ptr<DataServer>> Start(const std::string& host, int port,
                                                   std::string worker_key);
  ~DataServer();  // Shutdown()
  DataServer(const DataServer&) = delete;
  DataServer& operator=(const DataServer&) = delete;

  // The bound port, and "host:port" as listened on.
  int port() const { return port_; }
  const std::string& address() const { return address_; }

  // Also listens on the same-host socket of `advertised` (the "HOST:PORT" clients
  // are told; dataplane/shm.h): clients on this host connect there and get batch
  // data in shared memory. Unavailable when the name is taken (another process
  // holds it: the TCP port still serves). Call once, before clients connect.
  Status ListenSameHost(const std::string& advertised);

  // Sends `batch` as a BATCH frame (EncodeBatchMeta and BatchMeta: `rank`, `split_batches`, the
  // segment) on `rank`'s connection once it has credit, waiting as long as it takes for a client of
  // that rank to connect or grant credit. OK once the frame was handed to the
  // kernel; the status given to Interrupt() when interrupted while waiting (a
  // send under way is finished first); InvalidArgument for an unsendable batch.
  // With `stream`, only a connection of session stream->at_least or newer is
  // used (an older one is hung up and refused from then on: the coordinator
  // issued a newer session), and once a batch went to a session, a newer one
  // ends the stream with Aborted: a restarted trainer, for whom the coordinator
  // has the split made again from what was acknowledged.
  Status SendToRank(int64_t rank, const Batch& batch,
                    std::optional<uint64_t> split_batches = std::nullopt,
                    SplitStream* stream = nullptr);

  // A segment of `rank`'s current same-host connection to collate a batch of
  // `bytes` into (BatchSink::Reserve): SendToRank then sends that batch without
  // copying its data, when the connection is still the rank's. nullopt when the
  // rank has no connection that takes segments, or none is free. A batch
  // dropped unsent gives its segment back.
  std::optional<Batch::External> ReserveSegment(int64_t rank, size_t bytes);

  // Serves the connections that authenticate with an offload ticket (role
  // "offload:RANK:CHANNEL", dataplane/auth.h): `handler` gets the socket (sealed,
  // after the handshake), the rank and channel, on the connection's own thread,
  // and keeps it until it returns; the socket closes then. An error it returns is
  // logged as a dropped connection. Without a handler such connections are sent
  // ERROR. Set it before clients can hold an offload ticket (before REGISTER).
  using OffloadHandler = std::function<Status(Socket& socket, int64_t rank, uint64_t channel)>;
  void SetOffloadHandler(OffloadHandler handler);

  // Makes every current and later SendToRank wait return `why` (not OK). Final.
  void Interrupt(Status why);

  // Tells every rank's client that this worker leaves: BYE {} on each data
  // connection (within one second in all), so that a worker that drained or was
  // told to exit is not taken for one that broke. Call only while no SendToRank
  // is under way (the worker holds no split). Shutdown() still closes them.
  void SayBye();

  // Stops accepting, closes every connection and joins the threads. Idempotent.
  void Shutdown();

  // Batches handed to the kernel so far.
  uint64_t batches_sent() const { return batches_sent_.load(); }
  // Of them, batches whose data went in a shared-memory segment, and of those,
  // batches made in their segment (ReserveSegment: no copy here).
  uint64_t shm_batches_sent() const { return shm_batches_sent_.load(); }
  uint64_t in_place_batches_sent() const { return in_place_batches_sent_.load(); }

 private:
  struct Conn;
  struct Reservation;
  struct ReservationDeleter {
    void operator()(Reservation* r) const;
  };
  DataServer(std::string secret, int port, std::string address);
  // One connection, on its own thread (ConnectionServer): the handshake,
  // SUBSCRIBE, then its credit until it ends.
  void Serve(const ConnectionServer::Connection& connection);
  Status Subscribe(Conn& conn);
  Status Attach(const std::shared_ptr<Conn>& conn);
  std::string Admit(const std::shared_ptr<Conn>& conn, MutexLock& lock) REQUIRES(mu_);
  void ReadCredit(const std::shared_ptr<Conn>& conn);
  void Detach(const std::shared_ptr<Conn>& conn);
  Result<std::shared_ptr<Conn>> TakeCredit(int64_t rank, const SplitStream* stream);
  // Raises the rank's newest session to `session` (a newer client's, or the
  // coordinator's: `by` says which in the log), hanging up an older session's
  // connection.
  void LearnSession(int64_t rank, uint64_t session, const std::string& by, MutexLock& lock)
      REQUIRES(mu_);

  const std::string secret_;
  const int port_;
  const std::string address_;
  std::atomic<uint64_t> batches_sent_{0};
  std::atomic<uint64_t> shm_batches_sent_{0};
  std::atomic<uint64_t> in_place_batches_sent_{0};

  Mutex mu_;
  std::condition_variable cv_;
  bool stopping_ GUARDED_BY(mu_) = false;
  Status interrupt_ GUARDED_BY(mu_);
  RateLimit refused_warnings_{kPeerWarningIntervalS};  // "dropped connection"
  std::map<int64_t, std::shared_ptr<Conn>> ranks_ GUARDED_BY(mu_);
  std::map<int64_t, uint64_t> newest_session_ GUARDED_BY(mu_);  // per rank
  OffloadHandler offload_handler_ GUARDED_BY(mu_);
  // The TCP port and, once ListenSameHost ran, "@goldminer-data/HOST:PORT";
  // set once by Start. Declared last: stopped first.
  std::unique_ptr<ConnectionServer> connections_;
};

}  // namespace gm
