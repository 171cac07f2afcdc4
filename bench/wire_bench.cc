// Wire speed: one data worker's DataServer serving ready batches to one client
// over loopback TCP, as in a run (handshake, SUBSCRIBE, CREDIT, BATCH frames with
// zero-copy sends; the client receives into a recycled buffer). Prints one JSON
// object with the median GB/s over --rounds rounds of --batches batches each.
// The peer (iperf3 on the same machine) is run by bench/dataplane_bench.py.
// Usage: wire_bench [--rounds N] [--batches N] [--mb MB_PER_BATCH]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "core/clock.h"
#include "core/os/memory.h"
#include "dataplane/auth.h"
#include "dataplane/data_server.h"
#include "dataplane/protocol.h"

namespace {

int Arg(int argc, char** argv, const char* name, int fallback) {
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], name) == 0) return std::max(1, std::atoi(argv[i + 1]));
  }
  return fallback;
}

int Fail(const gm::Status& s) {
  std::fprintf(stderr, "wire_bench: %s\n", s.message().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  gm::TuneAllocatorForTensors();
  const int rounds = Arg(argc, argv, "--rounds", 5);
  const int batches = Arg(argc, argv, "--batches", 50);
  const int64_t mb = Arg(argc, argv, "--mb", 38);
  auto secret = gm::NewSecret();  // the worker key
  if (!secret.ok()) return Fail(secret.status());
  auto server = gm::DataServer::Start("127.0.0.1", 0, *secret);
  if (!server.ok()) return Fail(server.status());

  // One ready batch: float32 [n, 3, 224, 224] of about `mb` MB, sent again and again.
  gm::Batch batch;
  const int64_t n = std::max<int64_t>(1, mb * 1000000 / (3 * 224 * 224 * 4));
  batch.data.Reset(gm::DType::kFloat32, {n, 3, 224, 224});
  std::memset(batch.data.bytes.data(), 1, batch.data.bytes.size());
  batch.labels.Reset(gm::DType::kInt64, {n});
  std::memset(batch.labels.bytes.data(), 0, batch.labels.bytes.size());
  for (int64_t i = 0; i < n; ++i) batch.keys.push_back("k" + std::to_string(i));
  batch.sample_indices.assign(static_cast<size_t>(n), 0);
  const double bytes_per_batch =
      static_cast<double>(batch.data.bytes.size() + batch.labels.bytes.size());

  auto sock = gm::Socket::ConnectTcp("127.0.0.1", (*server)->port(), 10);
  if (!sock.ok()) return Fail(sock.status());
  // A client of rank 0 in coordinator session 1, with the ticket for it.
  gm::Status st = gm::ClientHandshake(*sock, gm::TicketKey(*secret, 0, 1), gm::TicketRole(0, 1),
                                      gm::Deadline::After(10), nullptr);
  if (st.ok())
    st = gm::SendFrame(*sock, gm::MsgType::kSubscribe, {{"rank", 0}}, gm::Deadline::After(10));
  if (st.ok()) st = gm::SendFrame(*sock, gm::MsgType::kCredit, {{"n", 4}}, gm::Deadline::After(10));
  if (!st.ok()) return Fail(st);

  const int total = rounds * batches;
  std::thread sender([&] {
    for (int i = 0; i < total; ++i) {
      if (!(*server)->SendToRank(0, batch).ok()) return;
    }
  });
  std::vector<double> rates;
  gm::Frame frame;
  for (int r = 0; r < rounds && st.ok(); ++r) {
    const double t0 = gm::MonotonicSeconds();
    for (int i = 0; i < batches && st.ok(); ++i) {
      st = gm::RecvFrameInto(*sock, gm::FrameLimits{}, gm::Deadline::After(30), frame);
      if (st.ok())
        st = gm::SendFrame(*sock, gm::MsgType::kCredit, {{"n", 1}}, gm::Deadline::After(10));
    }
    rates.push_back(batches * bytes_per_batch / (gm::MonotonicSeconds() - t0) / 1e9);
  }
  sender.join();
  if (!st.ok()) return Fail(st);
  std::sort(rates.begin(), rates.end());
  std::printf(
      "{\"batch_mb\": %.1f, \"rounds\": %d, \"batches_per_round\": %d, \"median_gb_s\": %.3f}\n",
      bytes_per_batch / 1e6, rounds, batches, rates[rates.size() / 2]);
  (*server)->Shutdown();
  return 0;
}
