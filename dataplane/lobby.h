// Lobby: where a listening server's accepted connections wait for their first
// byte, so that a peer that connects and closes, or connects and says nothing,
// costs a descriptor for a while and no thread.
//
// One thread waits on every connection in the lobby at once (epoll). A connection
// leaves it when its first byte arrives: it is handed to its `ready` callback
// (on the lobby's thread; the callback starts the connection's own thread). It is
// closed when the peer closes or fails first, when it has waited `deadline_s`
// (a peer that says nothing in time gets no handshake anyway), or to make room:
// when `max_waiting` wait, the oldest is closed (one whose byte has come meanwhile
// is handed on instead, on the thread that called Add). So a churn of connect-and-close
// or an idle flood holds no thread and at most max_waiting descriptors, and a
// real peer, whose first frame follows its connect at once, goes through unless
// max_waiting newer connections came before that frame; our clients and workers
// dial again then (DialHandshake in dataplane/auth.h).
// Thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <thread>
#include <unordered_map>

#include "core/os/unique_fd.h"
#include "core/status.h"
#include "core/thread_annotations.h"
#include "dataplane/socket.h"

namespace gm {

class Lobby {
 public:
  using Ready = std::function<void(Socket socket)>;

  // Unavailable when the system gives no epoll or eventfd descriptor.
  static Result<std::unique_ptr<Lobby>> Start(double deadline_s, size_t max_waiting);
  ~Lobby();  // stops the thread; what still waits is closed
  Lobby(const Lobby&) = delete;
  Lobby& operator=(const Lobby&) = delete;

  // Lets `socket` wait for its first byte, then calls `ready` with it.
  void Add(Socket socket, Ready ready);

  size_t waiting() const;         // in the lobby now
  uint64_t closed_early() const;  // closed before their first byte (any reason)

 private:
  struct Entry {
    Socket socket;
    Ready ready;
    double deadline = 0;
    std::list<int>::iterator order;  // in arrival_
  };
  enum class Peek { kReady, kGone, kWaiting };  // a byte came; closed or failed; neither
  static Peek Look(int fd);
  Lobby(UniqueFd epoll_fd, UniqueFd wake_fd, double deadline_s, size_t max_waiting);
  void Loop();
  // Takes `fd`'s entry out (and out of epoll); nullptr when it is gone.
  std::unique_ptr<Entry> Take(int fd) REQUIRES(mu_);
  void Wake() const;

  const UniqueFd epoll_fd_;
  const UniqueFd wake_fd_;
  const double deadline_s_;
  const size_t max_waiting_;
  mutable Mutex mu_;
  std::unordered_map<int, std::unique_ptr<Entry>> entries_ GUARDED_BY(mu_);  // by fd
  std::list<int> arrival_ GUARDED_BY(mu_);                                   // fds, oldest first
  uint64_t closed_early_ GUARDED_BY(mu_) = 0;
  bool stopping_ GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace gm
