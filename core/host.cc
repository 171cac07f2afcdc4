#include "core/host.h"

#include <unistd.h>

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

bool IsWildcardHost(const std::string& host) {
  return host == "0.0.0.0" || host == "::" || host == "[::]";
}

}  // namespace gm
