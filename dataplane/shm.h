// The same-host transport: batches in shared memory instead of through the kernel.
//
// When a trainer's client and a data worker share a host, the worker's data port
// also listens on a Unix socket in the abstract namespace, named after its TCP
// address (SameHostName). The client tries it first: it exists only on the same
// host and network namespace, needs no file (nothing to leave behind) and is
// private to the namespace, so a worker in another one (another host, or a
// container) is reached over TCP as before. The connection is authenticated with
// the same handshake and ticket as TCP, and the client's SUBSCRIBE asks for
// segments ({"shm": true}).
//
// On such a connection a BATCH's data travels in a segment: a memfd the worker
// created, sized, and sealed against shrinking and growing (F_SEAL_SHRINK |
// F_SEAL_GROW | F_SEAL_SEAL), so a mapping of it can never fault. The worker
// reserves a segment of the rank's connection for each batch it makes
// (DataServer::ReserveSegment), and each sample's last stage writes its tensor
// straight into its slot there (BatchArena, core/sample.h): the batch's data is
// written once, where the trainer reads it. (A batch made before the client
// connected, or for a connection since replaced, is copied into a segment when
// sent.) The BATCH frame has meta "shm": {"id", "fd"}; the payload holds only
// the labels. The first time a
// segment is used (fd: true) its descriptor travels with the frame (SCM_RIGHTS);
// later batches name its id only. The client maps the segment once, hands the
// batch to the trainer without copying (numpy and torch view the mapping), and
// when the trainer drops the batch, returns the id with its next CREDIT
// {"release": [ids]}; only then may the worker write into that segment again.
//
// Bounds, whoever misbehaves: a worker holds at most kLentSegments segments of at
// most FrameLimits::max_payload_bytes each per connection; with none free (a
// trainer that keeps its batches) a batch goes inline in the frame as over TCP,
// so nothing waits on the trainer. A client accepts only sealed memfds of the size
// the frame says, at most kMaxSegments ids, and releases only ids it was lent
// (anything else is Corrupt and the connection is dropped). The exactly-once
// accounting is the frame's, unchanged. memfds live in no file system: a worker or
// trainer killed with SIGKILL leaves nothing in /dev/shm; the memory goes with the
// last mapping.
//
// Thread-safety: a Segment is immutable after creation (its bytes are the
// users'); SegmentPool is thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/os/unique_fd.h"
#include "core/same_host.h"
#include "core/status.h"
#include "core/thread_annotations.h"
#include "dataplane/protocol.h"

namespace gm {

// Segments a worker lends per connection: the client's credit (4 batches by
// default) plus the batches a trainer holds while it computes. Each is the size
// of a batch, so this bounds the memory a client can make a worker hold.
inline constexpr size_t kLentSegments = kSameHostSegmentsPerWorker;
// The environment variable that turns the same-host path off ("off"; anything
// else or unset: on), in a worker (it offers none) and in a client (it asks for
// none): for a host whose processes should not share memory, and for tests that
// make a worker look remote.
inline constexpr std::string_view kSameHostEnv = "GOLDMINER_SAME_HOST";
bool SameHostEnabled();

// The abstract Unix socket name ("@goldminer-data/HOST:PORT") of the worker
// whose data port is `address` ("HOST:PORT" as advertised).
std::string SameHostName(const std::string& address);

// A shared-memory segment, mapped read-write.
class Segment {
 public:
  // A new sealed memfd of `bytes` bytes (> 0), mapped. Unavailable when the
  // kernel refuses (no memory, too many descriptors).
  static Result<std::shared_ptr<Segment>> Create(size_t bytes);
  // Maps a segment received from a peer and takes ownership of `fd` (closed here
  // whatever the outcome: the mapping keeps the memory). Corrupt unless `fd` is
  // a memfd sealed against shrinking and growing, its seals sealed, whose size
  // is in [need, max] (larger than the batch is fine: segments are reused).
  static Result<std::shared_ptr<Segment>> Map(int fd, size_t need, size_t max);
  ~Segment();
  Segment(const Segment&) = delete;
  Segment& operator=(const Segment&) = delete;

  uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  // The memfd (worker side: kept to pass to the client); -1 once mapped on the
  // client side.
  int fd() const { return fd_.get(); }

 private:
  Segment(UniqueFd fd, uint8_t* data, size_t size) : fd_(std::move(fd)), data_(data), size_(size) {}
  UniqueFd fd_;
  uint8_t* data_;
  size_t size_;
};

// A worker connection's segments: each is lent to the client with a batch and
// free again once the client releases its id.
class SegmentPool {
 public:
  explicit SegmentPool(size_t max_segments = kLentSegments) : max_(max_segments) {}

  struct Lease {
    uint64_t id = 0;
    std::shared_ptr<Segment> segment;
    bool fresh = false;  // the client has not seen this segment yet: pass its fd
  };
  // A free segment of at least `bytes` (a larger one is kept, a smaller free one
  // is replaced under the same id), lent until Release(id). nullopt when every
  // segment is lent and the pool is full, or the kernel refused a new one (the
  // caller sends the batch inline).
  std::optional<Lease> Acquire(size_t bytes);
  // Gives back a lent segment. Corrupt, naming the id, when it is not lent.
  Status Release(uint64_t id);
  // Gives back a lease whose batch was never sent (dropped before its send):
  // the segment is free again and, when the lease was fresh, its descriptor is
  // passed with the next batch that uses it.
  void Abandon(const Lease& lease);
  size_t lent() const;

 private:
  struct Slot {
    std::shared_ptr<Segment> segment;
    bool lent = false;
    bool seen = false;  // its fd went to the client
  };
  const size_t max_;
  mutable Mutex mu_;
  std::vector<Slot> slots_ GUARDED_BY(mu_);  // index = id
};

}  // namespace gm
