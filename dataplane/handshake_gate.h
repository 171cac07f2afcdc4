// HandshakeGate: bounds the connections a listening server holds, so that peers
// that connect and send nothing cannot exhaust its threads or lock others out.
//
// A server asks Admit() for every accepted connection, tells Authenticated() when
// its handshake succeeded and Closed() when it is over. Admit refuses a
// connection when `max_connections` are open; when `max_pending` connections (or
// `max_pending_per_host` from the same address) are still in their handshake, it
// shuts the OLDEST such one down (SHUT_RDWR: its reader wakes with an error) to
// make room. So a flood of idle connections holds at most max_pending threads, and
// a real peer gets in as long as it finishes its handshake before
// max_pending_per_host newer connections from the flood's address arrive.
// Thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <mutex>
#include <optional>
#include <string>

#include "core/thread_annotations.h"

namespace gm {

// What a server lets its peers hold comes out of the process's soft descriptor
// limit (RLIMIT_NOFILE, read now; the CLI raises it to the hard limit at start)
// less kDescriptorReserve, so that a full server still has descriptors for its
// files, pipes and children: a fifth of that for the Lobby (dataplane/lobby.h:
// connections before their first byte; 4 to 256), and the rest for admitted
// connections (16 to kMaxServerConnections). So the lobby and the admitted
// connections together stay under the limit less the reserve (a limit below 148
// aside).
inline constexpr size_t kDescriptorReserve = 128;
// One thread and one descriptor each: a coordinator serves every worker and
// trainer rank of its run at once (bench/scale_bench.cc measured 1,024 workers and
// 64 ranks at about 25 KB of resident memory a connection).
inline constexpr size_t kMaxServerConnections = 4096;
size_t DefaultMaxConnections();
size_t DefaultLobbySize();

struct HandshakeLimits {
  size_t max_connections = DefaultMaxConnections();  // of any kind (one thread each)
  size_t max_pending = 64;                           // connections still in their handshake
  size_t max_pending_per_host = 16;
};

class HandshakeGate {
 public:
  explicit HandshakeGate(HandshakeLimits limits = {}) : limits_(limits) {}

  // A connection on descriptor `fd` from `peer` ("HOST:PORT") was accepted. Its id,
  // or nullopt when it must be closed (max_connections reached).
  std::optional<uint64_t> Admit(int fd, const std::string& peer);
  void Authenticated(uint64_t id);  // it left the handshake
  void Closed(uint64_t id);         // it is over (after Admit returned `id`)

  uint64_t dropped() const;  // connections refused or evicted so far
  size_t open() const;       // admitted and not closed

 private:
  struct Entry {
    uint64_t id = 0;
    int fd = -1;
    std::string host;
    bool pending = true;  // in the handshake, not evicted
  };

  const HandshakeLimits limits_;
  mutable Mutex mu_;
  std::list<Entry> entries_ GUARDED_BY(mu_);  // in accept order
  uint64_t next_id_ GUARDED_BY(mu_) = 1;
  uint64_t dropped_ GUARDED_BY(mu_) = 0;
};

}  // namespace gm
