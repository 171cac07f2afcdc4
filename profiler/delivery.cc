#include "profiler/delivery.h"

#include <algorithm>
#include <string>
#include <thread>
#include <utility>

#include "core/clock.h"
#include "dataplane/protocol.h"
#include "dataplane/session.h"
#include "dataplane/socket.h"

namespace gm {
namespace {

// Batches of at least 1 MiB for the per-byte figure: the frames' own cost is then
// a few percent of theirs, so taking it out (measured apart) leaves a steady figure.
constexpr size_t kMinBatchBytes = size_t{1} << 20;
constexpr size_t kMaxBatchBytes = size_t{8} << 20;
constexpr int kSamplesPerBatch = 64;                 // keys and indices in each frame's meta
constexpr int kFrames = 400;                         // small frames: the per-frame cost
constexpr size_t kPayloadBytes = size_t{256} << 20;  // sent in large frames
constexpr double kTimeoutS = 60;

// A batch as a worker sends it: `bytes` of data over kSamplesPerBatch samples
// (at least one byte each), their keys, indices and labels.
Batch MakeBatch(size_t bytes) {
  Batch b;
  const int64_t per_sample = std::max<int64_t>(1, static_cast<int64_t>(bytes) / kSamplesPerBatch);
  b.data.Reset(DType::kUInt8, {kSamplesPerBatch, per_sample});
  std::fill(b.data.bytes.begin(), b.data.bytes.end(), uint8_t{7});
  b.labels.Reset(DType::kInt64, {kSamplesPerBatch});
  std::fill(b.labels.bytes.begin(), b.labels.bytes.end(), uint8_t{0});
  for (int i = 0; i < kSamplesPerBatch; ++i) {
    b.keys.push_back("train/n0144" + std::to_string(i) + "/image_" + std::to_string(100000 + i) +
                     ".jpg");
    b.sample_indices.push_back(static_cast<uint64_t>(1000000 + i));
  }
  return b;
}

// Sends `count` copies of `batch`; the calling thread's CPU seconds for it.
Result<double> SendBatches(Socket& socket, const Batch& batch, int count) {
  const double c0 = ThreadCpuSeconds();
  for (int i = 0; i < count; ++i) {
    GM_RETURN_IF_ERROR(SendBatch(socket, batch, Deadline::After(kTimeoutS)));
  }
  return ThreadCpuSeconds() - c0;
}

}  // namespace

Result<DeliveryCost> MeasureDelivery(size_t batch_bytes) {
  GM_ASSIGN_OR_RETURN(Listener listener, Listener::ListenTcp("127.0.0.1", 0));
  GM_ASSIGN_OR_RETURN(Socket sender, Socket::ConnectTcp("127.0.0.1", listener.port(), kTimeoutS));
  // Our sender's connection only: another local process may race to the port.
  GM_ASSIGN_OR_RETURN(Socket receiver, listener.AcceptFrom(sender, kTimeoutS));
  const std::string key(32, 'k'), nonce(16, 'n'), client_nonce(16, 'c');
  sender.SetSession(std::make_unique<FrameSession>(key, nonce, client_nonce, /*is_server=*/true));
  receiver.SetSession(
      std::make_unique<FrameSession>(key, nonce, client_nonce, /*is_server=*/false));
  // The trainer's side: reads every frame into one recycled buffer until the end.
  Status read_status = Status::Ok();
  std::thread reader([&receiver, &read_status] {
    Frame frame;
    while (true) {
      Status st = RecvFrameInto(receiver, FrameLimits{}, Deadline::After(kTimeoutS), frame);
      if (!st.ok()) {
        if (st.code() != Code::kUnavailable) read_status = st;  // Unavailable: the end
        return;
      }
    }
  });
  const size_t big = std::clamp(batch_bytes, kMinBatchBytes, kMaxBatchBytes);
  const Batch small_batch = MakeBatch(kSamplesPerBatch);
  const Batch big_batch = MakeBatch(big);
  const int big_count = static_cast<int>(std::max<size_t>(16, kPayloadBytes / big));
  Result<double> frames = SendBatches(sender, small_batch, kFrames);
  Result<double> payload =
      frames.ok() ? SendBatches(sender, big_batch, big_count) : Result<double>(frames.status());
  sender.ShutdownWrite();
  reader.join();
  GM_RETURN_IF_ERROR(frames.status().WithContext("delivery: small frames over loopback TCP"));
  GM_RETURN_IF_ERROR(payload.status().WithContext("delivery: batches over loopback TCP"));
  GM_RETURN_IF_ERROR(read_status.WithContext("delivery: the reading side"));
  DeliveryCost cost;
  cost.frame_cpu_s = *frames / kFrames;
  const double payload_bytes = double(big_count) * double(big_batch.data_size());
  // The frames' share comes off, at most half (two noisy figures on a busy
  // machine must not make a byte free).
  cost.tcp_cpu_s_per_byte =
      std::max(*payload - big_count * cost.frame_cpu_s, *payload / 2) / payload_bytes;
  return cost;
}

}  // namespace gm
