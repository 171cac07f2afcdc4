#include "dataplane/handshake_gate.h"

#include <sys/resource.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstdint>

#include "core/host.h"
#include "core/thread_annotations.h"

namespace gm {

namespace {

// The descriptors a server's peers may make it hold: the soft limit less the reserve.
size_t PeerBudget() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return SIZE_MAX;
  const auto soft = static_cast<size_t>(limit.rlim_cur);
  return soft > kDescriptorReserve ? soft - kDescriptorReserve : 0;
}

}  // namespace

size_t DefaultLobbySize() { return std::clamp<size_t>(PeerBudget() / 5, 4, 256); }

size_t DefaultMaxConnections() {
  const size_t budget = PeerBudget();
  return std::clamp<size_t>(budget - std::min(budget, DefaultLobbySize()), 16,
                            kMaxServerConnections);
}

std::optional<uint64_t> HandshakeGate::Admit(int fd, const std::string& peer) {
  const std::string host = HostOfPeer(peer);
  MutexLock lock(mu_);
  if (entries_.size() >= limits_.max_connections) {
    ++dropped_;
    return std::nullopt;
  }
  size_t pending = 0, pending_here = 0;
  Entry* oldest = nullptr;
  Entry* oldest_here = nullptr;
  for (Entry& e : entries_) {
    if (!e.pending) continue;
    ++pending;
    if (oldest == nullptr) oldest = &e;
    if (e.host == host) {
      ++pending_here;
      if (oldest_here == nullptr) oldest_here = &e;
    }
  }
  Entry* evict = pending_here >= limits_.max_pending_per_host ? oldest_here
                 : pending >= limits_.max_pending             ? oldest
                                                              : nullptr;
  if (evict != nullptr) {
    ::shutdown(evict->fd, SHUT_RDWR);  // its reader sees the close; Closed() follows
    evict->pending = false;
    ++dropped_;
  }
  entries_.push_back(Entry{next_id_, fd, host, true});
  return next_id_++;
}

void HandshakeGate::Authenticated(uint64_t id) {
  MutexLock lock(mu_);
  for (Entry& e : entries_) {
    if (e.id == id) e.pending = false;
  }
}

void HandshakeGate::Closed(uint64_t id) {
  MutexLock lock(mu_);
  entries_.remove_if([id](const Entry& e) { return e.id == id; });
}

uint64_t HandshakeGate::dropped() const {
  MutexLock lock(mu_);
  return dropped_;
}

size_t HandshakeGate::open() const {
  MutexLock lock(mu_);
  return entries_.size();
}

}  // namespace gm
