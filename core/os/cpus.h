// CPU lists (as taskset and cpusets write them) and this process's CPU affinity.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"

namespace gm {

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

// Confines the calling thread (and the threads and processes it starts) to
// `cpus` while it lives, and gives the thread back the CPUs it had before.
class ScopedCpus {
 public:
  // InvalidArgument as PinToCpus when some of `cpus` are outside the allowed set
  // (or none is given); IoError when the kernel says no.
  static Result<std::unique_ptr<ScopedCpus>> Pin(const std::vector<int>& cpus,
                                                 const std::string& what);
  ~ScopedCpus();
  ScopedCpus(const ScopedCpus&) = delete;
  ScopedCpus& operator=(const ScopedCpus&) = delete;

 private:
  explicit ScopedCpus(std::vector<int> before) : before_(std::move(before)) {}
  std::vector<int> before_;
};

}  // namespace gm
