#include "core/host.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>

namespace gm {

std::string HostName() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return "localhost";
  return name;
}

std::string JoinHostPort(const std::string& host, int port) {
  const bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

namespace {

std::string Unbracketed(std::string host) {
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  return host;
}

}  // namespace

Result<HostPort> ParseHostPort(std::string_view text, std::string_view what, int min_port) {
  auto bad = [&](std::string_view why) {
    return Status::InvalidArgument(std::string(what) + ": \"" + std::string(text) + "\" " +
                                   std::string(why) + " (expected HOST:PORT)");
  };
  const size_t colon = text.rfind(':');
  if (colon == std::string_view::npos || colon == 0) return bad("has no host and port");
  const std::string bracketed(text.substr(0, colon));
  std::string host = Unbracketed(bracketed);
  if (host == bracketed && host.find(':') != std::string::npos)
    return bad("needs brackets around its IPv6 address");
  const std::string_view digits = text.substr(colon + 1);
  int port = -1;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), port);
  if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size() ||
      port < min_port || port > 65535) {
    return bad("has no port number in " + std::to_string(min_port) + "..65535");
  }
  return HostPort{std::move(host), port};
}

std::string HostOfPeer(std::string_view peer) {
  const size_t colon = peer.rfind(':');
  return Unbracketed(std::string(colon == std::string_view::npos ? peer : peer.substr(0, colon)));
}

namespace {

bool IsLoopback(const sockaddr* a) {
  if (a->sa_family == AF_INET) {
    return (ntohl(reinterpret_cast<const sockaddr_in*>(a)->sin_addr.s_addr) >> 24) == 127;
  }
  if (a->sa_family == AF_INET6) {
    const in6_addr& v6 = reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr;
    return IN6_IS_ADDR_LOOPBACK(&v6) || (IN6_IS_ADDR_V4MAPPED(&v6) && v6.s6_addr[12] == 127);
  }
  return true;
}

}  // namespace

std::string ReachableHostName() {
  const std::string name = HostName();
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(name.c_str(), nullptr, &hints, &found) == 0) {
    bool reachable = false;
    for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
      if (a->ai_addr != nullptr && !IsLoopback(a->ai_addr)) reachable = true;
    }
    ::freeaddrinfo(found);
    if (reachable) return name;
  }
  ifaddrs* interfaces = nullptr;
  std::string address;
  if (::getifaddrs(&interfaces) == 0) {
    for (ifaddrs* i = interfaces; i != nullptr && address.empty(); i = i->ifa_next) {
      if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET) continue;
      if (!(i->ifa_flags & IFF_UP) || (i->ifa_flags & IFF_LOOPBACK) || IsLoopback(i->ifa_addr)) {
        continue;
      }
      char text[INET_ADDRSTRLEN] = {};
      const auto* v4 = reinterpret_cast<const sockaddr_in*>(i->ifa_addr);
      if (::inet_ntop(AF_INET, &v4->sin_addr, text, sizeof text) != nullptr) address = text;
    }
    ::freeifaddrs(interfaces);
  }
  return address.empty() ? name : address;
}

bool IsWildcardHost(const std::string& host) {
  return host == "0.0.0.0" || host == "::" || host == "[::]";
}

}  // namespace gm
