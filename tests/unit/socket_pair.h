// A connected pair of sockets for protocol tests (header-only).
#pragma once

#include <gtest/gtest.h>

#include <utility>

#include "dataplane/socket.h"

namespace gm::testing {

struct Connection {
  Socket client;  // the connecting side
  Socket server;  // the accepted side
};

// A connected pair over loopback TCP. connect() completes against the listen
// backlog, so no thread is needed to accept. `wait_s` only bounds a broken test.
inline Connection TcpPair(double wait_s = 30) {
  auto listener = Listener::ListenTcp("127.0.0.1", 0);
  EXPECT_TRUE(listener.ok()) << listener.status().message();
  auto client = Socket::ConnectTcp("127.0.0.1", listener->port(), wait_s);
  EXPECT_TRUE(client.ok()) << client.status().message();
  auto server = listener->Accept(wait_s);
  EXPECT_TRUE(server.ok()) << server.status().message();
  return {std::move(*client), std::move(*server)};
}

}  // namespace gm::testing
