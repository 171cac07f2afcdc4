// Batch sinks used by `goldminer worker --local`: a SHA-256 digest over the
// batches in delivery order, a writer of .npy files, and a fan-out. Each sink is
// used from one thread (the engine's calling thread).
#pragma once

#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "core/digest.h"
#include "worker/engine.h"

namespace gm {

// Hashes each batch's data bytes then its int64 labels, in delivery order.
class DigestSink : public BatchSink {
 public:
  Status Consume(const Batch& batch) override;
  std::string FinishHex() { return sha_.FinishHex(); }

 private:
  Sha256 sha_;
};

// Encodes a tensor as a NumPy .npy (format 1.0) file image; the second form with
// the tensor's bytes elsewhere (t.dtype and t.shape describe them).
std::string EncodeNpy(const Tensor& t);
std::string EncodeNpy(const Tensor& t, const uint8_t* data, size_t size);

// Writes e<epoch>-b<batch>.npy (data), e<epoch>-b<batch>.labels.npy and appends
// "epoch<TAB>batch<TAB>key" lines to keys.tsv under `dir` (created if missing).
class NpyDirSink : public BatchSink {
 public:
  static Result<std::unique_ptr<NpyDirSink>> Open(const std::string& dir);
  Status Consume(const Batch& batch) override;

 private:
  explicit NpyDirSink(std::string dir) : dir_(std::move(dir)) {}
  std::string dir_;
  std::ofstream keys_;  // keys.tsv, flushed after every batch
};

// Passes each batch to every sink in order; stops at the first error. Its sinks
// must read the batch's data through data_ptr() and data_size(): the batches'
// memory is lent (Reserve), so the samples' last stage writes them in place.
class FanOutSink : public BatchSink {
 public:
  void Add(BatchSink* sink) { sinks_.push_back(sink); }
  Status Consume(const Batch& batch) override;
  std::optional<Batch::External> Reserve(size_t bytes) override;

 private:
  std::vector<BatchSink*> sinks_;  // not owned
};

}  // namespace gm
