#include "dataplane/shm.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "core/os/unique_fd.h"
#include "core/thread_annotations.h"

namespace gm {
namespace {

constexpr int kSeals = F_SEAL_SHRINK | F_SEAL_GROW;

std::string Errno(int err) { return std::strerror(err); }

}  // namespace

bool SameHostEnabled() {
  const char* v = std::getenv(std::string(kSameHostEnv).c_str());
  return v == nullptr || std::string_view(v) != "off";
}

std::string SameHostName(const std::string& address) { return "@goldminer-data/" + address; }

Result<std::shared_ptr<Segment>> Segment::Create(size_t bytes) {
  if (bytes == 0) return Status::InvalidArgument("a segment needs at least one byte");
  UniqueFd fd(::memfd_create("goldminer-batch", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (!fd.valid()) return Status::Unavailable("memfd_create: " + Errno(errno));
  if (::ftruncate(fd.get(), static_cast<off_t>(bytes)) != 0 ||
      ::fcntl(fd.get(), F_ADD_SEALS, kSeals | F_SEAL_SEAL) != 0) {
    return Status::Unavailable("sizing a " + std::to_string(bytes) +
                               "-byte segment: " + Errno(errno));
  }
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
  if (p == MAP_FAILED) {
    return Status::Unavailable("mapping a " + std::to_string(bytes) +
                               "-byte segment: " + Errno(errno));
  }
  return std::shared_ptr<Segment>(new Segment(std::move(fd), static_cast<uint8_t*>(p), bytes));
}

Result<std::shared_ptr<Segment>> Segment::Map(int fd, size_t need, size_t max) {
  const UniqueFd closer(fd);  // the mapping, if made, outlives it
  // Sealed against shrinking and growing, and its seals sealed too (F_SEAL_SEAL),
  // as Create makes it: the sender cannot change them under the mapping.
  const int seals = ::fcntl(fd, F_GET_SEALS);
  if (seals < 0 || (seals & (kSeals | F_SEAL_SEAL)) != (kSeals | F_SEAL_SEAL)) {
    return Status::Corrupt(
        "the segment passed is not a memfd sealed against shrinking and "
        "growing, with its seals sealed (a mapping of it could fault)");
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) return Status::Corrupt("fstat of the segment passed: " + Errno(errno));
  const auto size = static_cast<uint64_t>(st.st_size);
  if (size < need || size > max || size == 0) {
    return Status::Corrupt("the segment passed has " + std::to_string(size) +
                           " bytes; the frame "
                           "needs " +
                           std::to_string(need) + " and at most " + std::to_string(max) +
                           " are allowed");
  }
  void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) return Status::Corrupt("mapping the segment passed: " + Errno(errno));
  return std::shared_ptr<Segment>(new Segment(UniqueFd(), static_cast<uint8_t*>(p), size));
}

Segment::~Segment() {
  ::munmap(data_, size_);  // fd_ closes after
}

std::optional<SegmentPool::Lease> SegmentPool::Acquire(size_t bytes) {
  MutexLock lock(mu_);
  // The smallest free segment that fits; else a free one to replace; else a new id.
  std::optional<size_t> fit, replace;
  for (size_t i = 0; i < slots_.size(); ++i) {
    const Slot& s = slots_[i];
    if (s.lent) continue;
    if (s.segment->size() >= bytes) {
      if (!fit || s.segment->size() < slots_[*fit].segment->size()) fit = i;
    } else if (!replace) {
      replace = i;
    }
  }
  size_t id;
  if (fit) {
    id = *fit;
  } else {
    if (!replace && slots_.size() >= max_) return std::nullopt;
    Result<std::shared_ptr<Segment>> made = Segment::Create(bytes);
    if (!made.ok()) return std::nullopt;
    id = replace ? *replace : slots_.size();
    if (!replace) slots_.emplace_back();
    slots_[id] = Slot{std::move(*made), false, false};
  }
  Slot& s = slots_[id];
  s.lent = true;
  Lease lease{id, s.segment, !s.seen};
  s.seen = true;
  return lease;
}

Status SegmentPool::Release(uint64_t id) {
  MutexLock lock(mu_);
  if (id >= slots_.size() || !slots_[id].lent) {
    return Status::Corrupt("released segment " + std::to_string(id) + ", which is not lent");
  }
  slots_[id].lent = false;
  return Status::Ok();
}

void SegmentPool::Abandon(const Lease& lease) {
  MutexLock lock(mu_);
  if (lease.id >= slots_.size() || slots_[lease.id].segment != lease.segment) return;
  slots_[lease.id].lent = false;
  if (lease.fresh) slots_[lease.id].seen = false;
}

size_t SegmentPool::lent() const {
  MutexLock lock(mu_);
  size_t n = 0;
  for (const Slot& s : slots_) n += s.lent ? 1 : 0;
  return n;
}

}  // namespace gm
