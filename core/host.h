// This machine's identity on the network.
#pragma once

#include <string>

namespace gm {

// The host name (gethostname); "localhost" when it cannot be read.
std::string HostName();

// "HOST:PORT", with an IPv6 host in brackets ("[::1]:80").
std::string JoinHostPort(const std::string& host, int port);

// The name (or address) other machines should use to reach this one when a
// service listens on every interface: the host name when it resolves to an address
// that is not loopback, else the first IPv4 address of an interface that is up and
// not loopback (Debian maps the host name to 127.0.1.1; a node in a private UTS
// namespace has a name nothing resolves), else the host name.
std::string ReachableHostName();
// True for the wildcard addresses "0.0.0.0" and "::" (listen on every interface).
bool IsWildcardHost(const std::string& host);

}  // namespace gm
