#include "worker/sinks.h"

#include <cstdio>

#include "core/os/file_util.h"

namespace gm {

Status DigestSink::Consume(const Batch& batch) {
  sha_.Update(batch.data_ptr(), batch.data_size());
  sha_.Update(batch.labels.bytes.data(), batch.labels.bytes.size());
  return Status::Ok();
}

std::string EncodeNpy(const Tensor& t) { return EncodeNpy(t, t.bytes.data(), t.bytes.size()); }

std::string EncodeNpy(const Tensor& t, const uint8_t* data, size_t size) {
  std::string shape = "(";
  for (size_t i = 0; i < t.shape.size(); ++i) {
    shape += std::to_string(t.shape[i]);
    shape += (t.shape.size() == 1 || i + 1 < t.shape.size()) ? "," : "";
    if (i + 1 < t.shape.size()) shape += " ";
  }
  shape += ")";
  std::string header = "{'descr': '" + std::string(NumpyDescr(t.dtype)) +
                       "', 'fortran_order': False, 'shape': " + shape + ", }";
  // Magic (6) + version (2) + length (2) + header + '\n', padded to 64 bytes.
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::string out("\x93NUMPY\x01\x00", 8);
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>(header.size() >> 8);
  out += header;
  out.append(reinterpret_cast<const char*>(data), size);
  return out;
}

Result<std::unique_ptr<NpyDirSink>> NpyDirSink::Open(const std::string& dir) {
  GM_RETURN_IF_ERROR(MakeDirs(dir).WithContext("--out"));
  std::unique_ptr<NpyDirSink> sink(new NpyDirSink(dir));
  sink->keys_.open(dir + "/keys.tsv", std::ios::trunc);
  if (!sink->keys_) return Status::IoError(dir + "/keys.tsv: cannot create");
  return sink;
}

Status NpyDirSink::Consume(const Batch& batch) {
  char name[64];
  std::snprintf(name, sizeof name, "e%llu-b%06llu", static_cast<unsigned long long>(batch.epoch),
                static_cast<unsigned long long>(batch.index));
  GM_RETURN_IF_ERROR(WriteFileAtomic(dir_ + "/" + name + ".npy",
                                     EncodeNpy(batch.data, batch.data_ptr(), batch.data_size())));
  GM_RETURN_IF_ERROR(WriteFileAtomic(dir_ + "/" + name + ".labels.npy", EncodeNpy(batch.labels)));
  for (const auto& key : batch.keys) {
    keys_ << batch.epoch << '\t' << batch.index << '\t' << key << '\t' << batch.split << '\n';
  }
  keys_.flush();
  if (!keys_) return Status::IoError(dir_ + "/keys.tsv: write failed");
  return Status::Ok();
}

std::optional<Batch::External> FanOutSink::Reserve(size_t bytes) { return HeapMemory(bytes); }

Status FanOutSink::Consume(const Batch& batch) {
  for (BatchSink* s : sinks_) GM_RETURN_IF_ERROR(s->Consume(batch));
  return Status::Ok();
}

}  // namespace gm
