// This machine's identity on the network.
#pragma once

#include <string>
#include <string_view>

#include "core/status.h"

namespace gm {

struct HostPort {
  std::string host;  // an IPv6 address without its brackets
  int port = 0;
  bool operator==(const HostPort&) const = default;
};

// The host name (gethostname); "localhost" when it cannot be read.
std::string HostName();

// "HOST:PORT", with an IPv6 host in brackets ("[::1]:80").
std::string JoinHostPort(const std::string& host, int port);
// The one reader of "HOST:PORT" and "[V6]:PORT", every port from min_port to
// 65535. InvalidArgument naming `what` (a flag, a message field) and the text.
Result<HostPort> ParseHostPort(std::string_view text, std::string_view what, int min_port = 0);
// The host of a peer's "HOST:PORT" or "[V6]:PORT" (brackets removed), or the
// text itself when it has no port: which machine a connection came from.
std::string HostOfPeer(std::string_view peer);

// The name (or address) other machines should use to reach this one when a
// service listens on every interface: the host name when it resolves to an address
// that is not loopback, else the first IPv4 address of an interface that is up and
// not loopback (Debian maps the host name to 127.0.1.1; a node in a private UTS
// namespace has a name nothing resolves), else the host name.
std::string ReachableHostName();
// True for the wildcard addresses "0.0.0.0" and "::" (listen on every interface).
bool IsWildcardHost(const std::string& host);

}  // namespace gm
