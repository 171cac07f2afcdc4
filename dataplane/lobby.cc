#include "dataplane/lobby.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <utility>
#include <vector>

#include "core/clock.h"

namespace gm {

Result<std::unique_ptr<Lobby>> Lobby::Start(double deadline_s, size_t max_waiting) {
  UniqueFd epoll_fd(::epoll_create1(EPOLL_CLOEXEC));
  if (!epoll_fd.valid()) return Status::FromErrno(errno, "lobby: epoll_create1");
  UniqueFd wake_fd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!wake_fd.valid()) return Status::FromErrno(errno, "lobby: eventfd");
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = wake_fd.get();
  if (::epoll_ctl(epoll_fd.get(), EPOLL_CTL_ADD, wake_fd.get(), &ev) != 0) {
    return Status::FromErrno(errno, "lobby: epoll_ctl");
  }
  auto lobby = std::unique_ptr<Lobby>(new Lobby(std::move(epoll_fd), std::move(wake_fd), deadline_s,
                                                std::max<size_t>(max_waiting, 1)));
  try {
    lobby->thread_ = std::thread([raw = lobby.get()] { raw->Loop(); });
  } catch (const std::system_error& e) {
    return Status::ResourceExhausted(std::string("lobby: cannot start its thread: ") + e.what());
  }
  return lobby;
}

Lobby::Lobby(UniqueFd epoll_fd, UniqueFd wake_fd, double deadline_s, size_t max_waiting)
    : epoll_fd_(std::move(epoll_fd)),
      wake_fd_(std::move(wake_fd)),
      deadline_s_(deadline_s),
      max_waiting_(max_waiting) {}

Lobby::~Lobby() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
  }
  Wake();
  if (thread_.joinable()) thread_.join();
  {
    MutexLock lock(mu_);
    entries_.clear();  // closes what still waits
    arrival_.clear();
  }
}  // epoll_fd_ and wake_fd_ close after this

void Lobby::Wake() const {
  const uint64_t one = 1;
  (void)!::write(wake_fd_.get(), &one, sizeof one);
}

Lobby::Peek Lobby::Look(int fd) {
  char byte = 0;
  const ssize_t got = ::recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  if (got > 0) return Peek::kReady;
  if (got == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) return Peek::kGone;
  return Peek::kWaiting;
}

void Lobby::Add(Socket socket, Ready ready) {
  // Closed outside the lock, and handed on outside it.
  std::vector<std::unique_ptr<Entry>> ready_now, closed;
  {
    MutexLock lock(mu_);
    if (stopping_) {
      ++closed_early_;
      return;
    }
    // To make room, the oldest that still waits goes. The loop's thread may not
    // have seen yet that the oldest spoke or closed (a churn outruns it on a busy
    // machine): those are handed on or closed first, so a real peer whose answer
    // has arrived is never the one evicted. Each look removes an entry or ends the
    // loop, so the cost is one look per arrival and per departure.
    while (entries_.size() >= max_waiting_) {
      const int oldest = arrival_.front();
      const Peek peek = Look(oldest);
      if (peek == Peek::kReady) {
        ready_now.push_back(Take(oldest));
        continue;
      }
      closed.push_back(Take(oldest));
      ++closed_early_;
    }
    const int fd = socket.fd();
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP;
    ev.data.fd = fd;
    if (::epoll_ctl(epoll_fd_.get(), EPOLL_CTL_ADD, fd, &ev) != 0) {
      ++closed_early_;  // the socket closes here
      return;
    }
    auto entry = std::make_unique<Entry>();
    entry->socket = std::move(socket);
    entry->ready = std::move(ready);
    entry->deadline = MonotonicSeconds() + deadline_s_;
    arrival_.push_back(fd);
    entry->order = std::prev(arrival_.end());
    entries_[fd] = std::move(entry);
  }
  Wake();  // the loop may be waiting with no deadline
  for (std::unique_ptr<Entry>& entry : ready_now) entry->ready(std::move(entry->socket));
}

std::unique_ptr<Lobby::Entry> Lobby::Take(int fd) {
  auto it = entries_.find(fd);
  if (it == entries_.end()) return nullptr;
  (void)::epoll_ctl(epoll_fd_.get(), EPOLL_CTL_DEL, fd, nullptr);
  std::unique_ptr<Entry> entry = std::move(it->second);
  arrival_.erase(entry->order);
  entries_.erase(it);
  return entry;
}

void Lobby::Loop() {
  std::vector<epoll_event> events(64);
  for (;;) {
    int timeout_ms = -1;
    {
      MutexLock lock(mu_);
      if (stopping_) return;
      if (!arrival_.empty()) {
        const double left = entries_.at(arrival_.front())->deadline - MonotonicSeconds();
        timeout_ms = static_cast<int>(std::clamp(std::ceil(left * 1000), 0.0, 1000.0));
      }
    }
    const int n =
        ::epoll_wait(epoll_fd_.get(), events.data(), static_cast<int>(events.size()), timeout_ms);
    std::vector<std::unique_ptr<Entry>> ready, closed;
    {
      MutexLock lock(mu_);
      if (stopping_) return;
      for (int i = 0; i < n; ++i) {
        const int fd = events[static_cast<size_t>(i)].data.fd;
        if (fd == wake_fd_.get()) {
          uint64_t count = 0;
          (void)!::read(wake_fd_.get(), &count, sizeof count);
          continue;
        }
        if (!entries_.contains(fd)) continue;  // taken meanwhile
        // The event may be stale (the fd closed and reused): ask the socket.
        const Peek peek = Look(fd);
        if (peek == Peek::kReady) {
          ready.push_back(Take(fd));
        } else if (peek == Peek::kGone) {
          closed.push_back(Take(fd));  // closed or failed before a byte
          ++closed_early_;
        }
      }
      const double now = MonotonicSeconds();
      while (!arrival_.empty() && entries_.at(arrival_.front())->deadline <= now) {
        closed.push_back(Take(arrival_.front()));
        ++closed_early_;
      }
    }
    for (std::unique_ptr<Entry>& entry : ready) entry->ready(std::move(entry->socket));
  }
}

size_t Lobby::waiting() const {
  MutexLock lock(mu_);
  return entries_.size();
}

uint64_t Lobby::closed_early() const {
  MutexLock lock(mu_);
  return closed_early_;
}

}  // namespace gm
