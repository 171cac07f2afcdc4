#include "dataplane/connection_server.h"

#include <sys/socket.h>

#include <system_error>
#include <utility>

#include "dataplane/auth.h"
#include "dataplane/protocol.h"

namespace gm {
namespace {

// Seconds an accept thread waits for a connection before it looks for Stop.
constexpr double kAcceptSliceS = 0.2;
// Seconds it waits after accept failed (EMFILE, ENFILE, ENOMEM): accept fails
// at once until something is closed, so wait rather than spin.
constexpr double kAcceptBackoffS = 0.1;

}  // namespace

Result<std::unique_ptr<ConnectionServer>> ConnectionServer::Start(Options options, Serve serve) {
  GM_ASSIGN_OR_RETURN(std::unique_ptr<Lobby> lobby,
                      Lobby::Start(kHandshakeTimeoutS, options.lobby_size));
  return std::unique_ptr<ConnectionServer>(
      new ConnectionServer(std::move(options), std::move(serve), std::move(lobby)));
}

ConnectionServer::ConnectionServer(Options options, Serve serve, std::unique_ptr<Lobby> lobby)
    : options_(std::move(options)),
      serve_(std::move(serve)),
      gate_(options_.limits),
      lobby_(std::move(lobby)) {}

ConnectionServer::~ConnectionServer() { Stop(); }

Status ConnectionServer::Listen(Listener listener, int tag) {
  MutexLock lock(mu_);
  if (stopping_) return Status::Cancelled(options_.name + " is stopping");
  Listening& l = listening_.emplace_back();
  l.listener = std::move(listener);
  l.tag = tag;
  l.thread = std::thread([this, &l] { AcceptLoop(l); });
  return Status::Ok();
}

uint64_t ConnectionServer::dropped() const {
  return gate_.dropped() + accept_failures_.load() + no_thread_.load();
}

bool ConnectionServer::stopping() const {
  MutexLock lock(mu_);
  return stopping_;
}

void ConnectionServer::Stop() {
  std::lock_guard<std::mutex> stop(stop_mu_);  // a second Stop waits for the first
  std::list<Listening> listening;
  {
    MutexLock lock(mu_);
    stopping_ = true;
    listening.swap(listening_);
    cv_.notify_all();
  }
  for (Listening& l : listening) {
    l.thread.join();
    l.listener.Close();
  }
  lobby_.reset();  // what waits there is closed (Admit refuses now); only accept threads used it
  std::list<Served> served;
  {
    MutexLock lock(mu_);
    for (Served& s : served_) {
      if (s.socket) ::shutdown(s.socket->fd(), SHUT_RDWR);  // wakes blocked receives and sends
    }
    served.splice(served.end(), served_);
  }
  for (Served& s : served) s.thread.join();
}

void ConnectionServer::AcceptLoop(Listening& listening) {
  while (!stopping()) {
    ReapFinished();
    Result<Socket> socket = listening.listener.Accept(kAcceptSliceS);
    if (socket.ok()) {
      // HELLO first, then the peer's answer is awaited in the lobby: a peer that
      // closes or says nothing costs no thread.
      Result<std::string> nonce = SendServerHello(*socket, options_.hello_role, Deadline::After(1));
      if (!nonce.ok()) continue;  // gone already
      lobby_->Add(std::move(*socket), [this, tag = listening.tag, n = std::move(*nonce)](Socket s) {
        Admit(std::move(s), tag, n);
      });
      continue;
    }
    if (socket.status().code() == Code::kUnavailable) continue;  // no one came: look again
    ++accept_failures_;
    if (uint64_t held = 0; accept_warnings_.Allow(&held)) {
      LogWarning(options_.name + ": " + socket.status().message() + " (retrying; " +
                 std::to_string(gate_.open()) + " connections open; " + std::to_string(held) +
                 " such warnings held back)");
    }
    MutexLock lock(mu_);
    lock.WaitFor(cv_, kAcceptBackoffS, [&]() REQUIRES(mu_) { return stopping_; });
  }
}

void ConnectionServer::Admit(Socket socket, int tag, std::string hello_nonce) {
  MutexLock lock(mu_);
  if (stopping_) return;
  const std::optional<uint64_t> gate_id = gate_.Admit(socket.fd(), socket.peer());
  if (!gate_id) {
    if (uint64_t held = 0; drop_warnings_.Allow(&held)) {
      LogWarning(options_.name + ": closed a connection from " + socket.peer() + ": " +
                 std::to_string(gate_.open()) + " connections are open (" + std::to_string(held) +
                 " such warnings held back)");
    }
    return;
  }
  Served& s = served_.emplace_back();
  s.socket = std::make_shared<Socket>(std::move(socket));
  Connection c;
  c.socket_ = s.socket;
  c.hello_nonce_ = std::move(hello_nonce);
  c.tag_ = tag;
  c.gate_ = &gate_;
  c.gate_id_ = *gate_id;
  try {
    s.thread = std::thread([this, &s, c = std::move(c)]() mutable {
      serve_(c);
      gate_.Closed(c.gate_id_);  // before this server lets go of the descriptor
      c.socket_.reset();
      MutexLock inner(mu_);
      s.socket.reset();  // closes it unless `serve` kept it
      s.done = true;
    });
  } catch (const std::system_error& e) {  // no thread to serve it: drop this one only
    gate_.Closed(*gate_id);
    served_.pop_back();
    ++no_thread_;
    LogWarning(options_.name + ": cannot start a thread for a connection: " + e.what());
  }
}

void ConnectionServer::ReapFinished() {
  std::list<Served> finished;
  {
    MutexLock lock(mu_);
    for (auto it = served_.begin(); it != served_.end();) {
      auto next = std::next(it);
      if (it->done) finished.splice(finished.end(), served_, it);
      it = next;
    }
  }
  for (Served& s : finished) s.thread.join();
}

}  // namespace gm
