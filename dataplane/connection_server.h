// ConnectionServer: the connection half of a listening server, shared by the
// coordinator and a worker's data port. For each listener it is given, one thread
// accepts, says HELLO first (dataplane/auth.h: the server speaks first) and lets
// the connection wait in a Lobby (dataplane/lobby.h) for the peer's answer, with
// no thread of its own. A connection that answered is admitted by a HandshakeGate
// (dataplane/handshake_gate.h) and served by a thread of its own, which runs the
// owner's `serve`; finished threads are joined by the accept threads as they go.
// When accept fails (out of descriptors or memory) it backs off and says so, at
// most once per kPeerWarningIntervalS.
//
// What a peer can make it hold: descriptors and no thread while in the lobby
// (DefaultLobbySize), one thread per admitted connection (the gate's
// max_connections), of them max_pending in their handshake.
//
// The owner's `serve` runs the handshake (ServerHandshake with the connection's
// hello_nonce), calls Authenticated() once it succeeded, and serves. It may keep
// the socket after it returns (a data port's sender still uses it): the socket
// closes when the last holder lets go, and the gate forgets the connection before
// this server lets go of it, so the gate never touches a descriptor reused by the
// kernel.
//
// Stop() (or the destructor) stops accepting, closes what waits in the lobby,
// shuts every admitted connection down (SHUT_RDWR: blocked receives and sends
// fail) and joins every thread. Thread-safe.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "core/log.h"
#include "core/status.h"
#include "core/thread_annotations.h"
#include "dataplane/handshake_gate.h"
#include "dataplane/lobby.h"
#include "dataplane/socket.h"

namespace gm {

class ConnectionServer {
 public:
  // One admitted connection, as `serve` gets it.
  class Connection {
   public:
    const std::shared_ptr<Socket>& socket() const { return socket_; }
    // The nonce of the HELLO sent at accept (ServerHandshake's `hello_nonce`).
    const std::string& hello_nonce() const { return hello_nonce_; }
    // The tag of the listener it came on (Listen's `tag`).
    int tag() const { return tag_; }
    // Its handshake succeeded: the gate stops counting it as pending.
    void Authenticated() const { gate_->Authenticated(gate_id_); }

   private:
    friend class ConnectionServer;
    std::shared_ptr<Socket> socket_;
    std::string hello_nonce_;
    int tag_ = 0;
    HandshakeGate* gate_ = nullptr;
    uint64_t gate_id_ = 0;
  };
  using Serve = std::function<void(const Connection& connection)>;

  struct Options {
    std::string name;        // how log lines name the server ("coordinator", "data port A")
    std::string hello_role;  // the role its HELLO names (SendServerHello)
    HandshakeLimits limits;
    size_t lobby_size = DefaultLobbySize();
  };

  // Unavailable when the lobby cannot start (no epoll or eventfd descriptor).
  // Accepts nothing until Listen.
  static Result<std::unique_ptr<ConnectionServer>> Start(Options options, Serve serve);
  ~ConnectionServer();  // Stop()
  ConnectionServer(const ConnectionServer&) = delete;
  ConnectionServer& operator=(const ConnectionServer&) = delete;

  // Accepts on `listener` (on a thread of its own) until Stop; its connections
  // carry `tag`. Cancelled once Stop was called.
  Status Listen(Listener listener, int tag = 0);

  // Connections closed at accept so far: over the gate's bounds (refused or
  // evicted in their handshake), no thread to serve them, or accept failing.
  uint64_t dropped() const;
  size_t open() const { return gate_.open(); }  // admitted and not finished

  void Stop();  // idempotent

 private:
  struct Served {
    std::thread thread;
    std::shared_ptr<Socket> socket;  // until its thread is done (guarded by mu_)
    bool done = false;               // guarded by mu_
  };
  struct Listening {
    Listener listener;
    int tag = 0;
    std::thread thread;
  };

  ConnectionServer(Options options, Serve serve, std::unique_ptr<Lobby> lobby);
  void AcceptLoop(Listening& listening);
  // From the lobby: a connection whose peer answered HELLO.
  void Admit(Socket socket, int tag, std::string hello_nonce);
  void ReapFinished();  // joins the threads of finished connections
  bool stopping() const;

  const Options options_;
  const Serve serve_;
  HandshakeGate gate_;
  std::atomic<uint64_t> accept_failures_{0};
  std::atomic<uint64_t> no_thread_{0};
  RateLimit accept_warnings_{kPeerWarningIntervalS};  // accept failing
  RateLimit drop_warnings_{kPeerWarningIntervalS};    // connections closed over a bound

  std::mutex stop_mu_;  // one Stop at a time
  mutable Mutex mu_;
  std::condition_variable cv_;  // stop
  bool stopping_ GUARDED_BY(mu_) = false;
  std::list<Listening> listening_ GUARDED_BY(mu_);
  std::list<Served> served_ GUARDED_BY(mu_);  // live and not yet reaped
  // Declared last: destroyed first, while what its callbacks use still exists.
  std::unique_ptr<Lobby> lobby_;
};

}  // namespace gm
