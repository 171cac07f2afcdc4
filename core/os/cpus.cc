#include "core/os/cpus.h"

#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>

namespace gm {

namespace {

constexpr int kMaxCpu = 4096;

}  // namespace

std::string FormatCpuList(const std::vector<int>& cpus) {
  std::string out;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    out += (out.empty() ? "" : ",") + std::to_string(cpus[i]) +
           (j > i ? "-" + std::to_string(cpus[j]) : "");
    i = j + 1;
  }
  return out;
}

Result<std::vector<int>> ParseCpuList(const std::string& text, const std::string& what) {
  auto bad = [&](const std::string& why) {
    return Status::InvalidArgument(what + ": \"" + text + "\" is not a CPU list (" + why +
                                   "); write it as taskset does, e.g. 0-3,8");
  };
  std::vector<int> cpus;
  size_t at = 0;
  while (at <= text.size()) {
    const size_t comma = std::min(text.find(',', at), text.size());
    const std::string part = text.substr(at, comma - at);
    const size_t dash = part.find('-');
    int lo = -1, hi = -1;
    auto num = [](const std::string& t, int& v) {
      auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
      return !t.empty() && ec == std::errc() && end == t.data() + t.size() && v >= 0;
    };
    if (dash == std::string::npos
            ? !num(part, lo)
            : !num(part.substr(0, dash), lo) || !num(part.substr(dash + 1), hi)) {
      return bad(part.empty() ? "an empty entry" : "\"" + part + "\" is not N or N-M");
    }
    if (hi < 0) hi = lo;
    if (hi < lo) return bad("\"" + part + "\" runs backwards");
    if (hi >= kMaxCpu) return bad("CPUs are numbered below " + std::to_string(kMaxCpu));
    for (int c = lo; c <= hi; ++c) cpus.push_back(c);
    at = comma + 1;
  }
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  return cpus;
}

Result<std::vector<int>> AllowedCpus() {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (::sched_getaffinity(0, sizeof allowed, &allowed) != 0) {
    return Status::IoError(std::string("sched_getaffinity: ") + std::strerror(errno));
  }
  std::vector<int> usable;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &allowed)) usable.push_back(c);
  }
  return usable;
}

Status CheckCpusAllowed(const std::vector<int>& cpus, const std::string& what) {
  Result<std::vector<int>> usable = AllowedCpus();
  if (!usable.ok()) return Status::IoError(what + ": " + usable.status().message());
  std::vector<int> missing;
  for (int c : cpus) {
    if (!std::binary_search(usable->begin(), usable->end(), c)) missing.push_back(c);
  }
  if (cpus.empty()) return Status::InvalidArgument(what + ": no CPU given");
  if (!missing.empty()) {
    return Status::InvalidArgument(what + ": CPU(s) " + FormatCpuList(missing) +
                                   " are not available to this process (it may use " +
                                   FormatCpuList(*usable) + ")");
  }
  return Status::Ok();
}

namespace {

// sched_setaffinity of the calling thread to `cpus` (each below CPU_SETSIZE).
bool SetAffinity(const std::vector<int>& cpus) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cpus) CPU_SET(c, &set);
  return ::sched_setaffinity(0, sizeof set, &set) == 0;
}

}  // namespace

Status PinToCpus(const std::vector<int>& cpus, const std::string& what) {
  GM_RETURN_IF_ERROR(CheckCpusAllowed(cpus, what));
  if (!SetAffinity(cpus)) {
    return Status::IoError(what + ": sched_setaffinity: " + std::strerror(errno));
  }
  return Status::Ok();
}

Result<std::unique_ptr<ScopedCpus>> ScopedCpus::Pin(const std::vector<int>& cpus,
                                                    const std::string& what) {
  GM_ASSIGN_OR_RETURN(std::vector<int> before, AllowedCpus());
  GM_RETURN_IF_ERROR(PinToCpus(cpus, what));
  return std::unique_ptr<ScopedCpus>(new ScopedCpus(std::move(before)));
}

ScopedCpus::~ScopedCpus() { (void)SetAffinity(before_); }

}  // namespace gm
