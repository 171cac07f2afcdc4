// This machine's identity on the network.
#pragma once

#include <string>

namespace gm {

// The host name (gethostname); "localhost" when it cannot be read.
std::string HostName();

// "HOST:PORT", with an IPv6 host in brackets ("[::1]:80").
std::string JoinHostPort(const std::string& host, int port);

// True for the wildcard addresses "0.0.0.0" and "::" (listen on every interface).
bool IsWildcardHost(const std::string& host);

}  // namespace gm
