// This machine's identity on the network.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"

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

// Parses a CPU list as taskset and cpusets write it ("0-3,8,10-11") into sorted,
// distinct CPU numbers. InvalidArgument naming `what` and the text when it is not
// one (empty, a bad number or range, a CPU of 4096 or more).
Result<std::vector<int>> ParseCpuList(const std::string& text, const std::string& what);

// The CPU list as taskset writes it: sorted runs as ranges ("0-3,8").
std::string FormatCpuList(const std::vector<int>& cpus);

// The CPUs the calling thread may run on (sched_getaffinity), sorted.
Result<std::vector<int>> AllowedCpus();

// InvalidArgument naming `what`, the CPUs this process may not use and the ones it
// may, when some of `cpus` are outside its allowed set (or `cpus` is empty).
Status CheckCpusAllowed(const std::vector<int>& cpus, const std::string& what);

// Restricts this process (the threads it starts from now on, and its children) to
// `cpus`. InvalidArgument naming the CPUs this process may not use, and the ones
// it may, when some are outside its allowed set.
Status PinToCpus(const std::vector<int>& cpus, const std::string& what);

}  // namespace gm
