// Record parsing tested on recorded activity buffers: a buffer of real CUPTI record
// structs (those of the installed headers, as libcupti lays them out: each record
// 8-byte aligned, one after another), formatted by the injection library's
// formatter and read back by the profiler's GPU log parser.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "profiler/cupti/record_format.h"
#include "profiler/gpu_log.h"

namespace gm {
namespace {

// An activity buffer: records appended back to back, as CUPTI fills one.
class ActivityBuffer {
 public:
  template <typename Record>
  void Append(const Record& record) {
    static_assert(sizeof(Record) % 8 == 0, "CUPTI records are padded to 8 bytes");
    size_t offset = bytes_.size();
    bytes_.resize(offset + sizeof(Record) / 8);
    std::memcpy(bytes_.data() + offset, &record, sizeof(Record));
    offsets_.push_back(offset);
  }
  // The i-th record as the iteration over a CUPTI buffer hands it out.
  const CUpti_Activity& At(size_t i) const {
    return *reinterpret_cast<const CUpti_Activity*>(bytes_.data() + offsets_.at(i));
  }
  size_t size() const { return offsets_.size(); }

 private:
  std::vector<uint64_t> bytes_;  // 8-byte words: the records' alignment
  std::vector<size_t> offsets_;  // in words
};

CuptiKernelRecord Kernel(uint64_t start, uint64_t end, const char* name) {
  CuptiKernelRecord k{};
  k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  k.start = start;
  k.end = end;
  k.deviceId = 1;
  k.contextId = 1;
  k.streamId = 13;
  k.correlationId = 77;
  k.gridX = 64;
  k.blockX = 256;
  k.name = name;
  return k;
}

CuptiMemcpyRecord Memcpy(uint64_t start, uint64_t end, uint8_t copy_kind, uint64_t bytes) {
  CuptiMemcpyRecord m{};
  m.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
  m.copyKind = copy_kind;
  m.srcKind = CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE;
  m.dstKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  m.bytes = bytes;
  m.start = start;
  m.end = end;
  m.deviceId = 0;
  m.streamId = 7;
  m.correlationId = 78;
  return m;
}

CuptiMemsetRecord Memset(uint64_t start, uint64_t end, uint64_t bytes) {
  CuptiMemsetRecord s{};
  s.kind = CUPTI_ACTIVITY_KIND_MEMSET;
  s.value = 0;
  s.bytes = bytes;
  s.start = start;
  s.end = end;
  s.deviceId = 2;
  s.streamId = 9;
  s.correlationId = 79;
  return s;
}

// Formats every record of `buffer` after a log header, as the library writes them.
std::string FormatLog(const ActivityBuffer& buffer, std::vector<RecordLine>* results) {
  std::string log = "# goldminer gpu log 1 pid=99\n# clock=monotonic\n";
  for (size_t i = 0; i < buffer.size(); ++i) {
    results->push_back(AppendRecordLine(buffer.At(i), log));
  }
  return log;
}

TEST(CuptiRecordTest, KernelMemcpyMemsetRecordsRoundTripThroughTheLog) {
  // Given a buffer with a kernel, a host-to-device copy and a memset.
  ActivityBuffer buffer;
  buffer.Append(Kernel(1'000'000'000'123, 1'000'000'020'456, "_Z4spinPyl"));
  buffer.Append(
      Memcpy(1'000'000'030'000, 1'000'000'031'000, CUPTI_ACTIVITY_MEMCPY_KIND_HTOD, 1 << 20));
  buffer.Append(Memset(1'000'000'032'000, 1'000'000'032'500, 4096));
  // When the records are formatted and the log parsed back.
  std::vector<RecordLine> results;
  std::string text = FormatLog(buffer, &results);
  Result<GpuLog> log = ParseGpuLog(text, "gpu.99.log");
  // Then each activity keeps its kind, times, device, stream, bytes and name.
  ASSERT_TRUE(log.ok()) << log.status().message() << "\n" << text;
  EXPECT_EQ(results, std::vector<RecordLine>(3, RecordLine::kWritten));
  ASSERT_EQ(log->activities.size(), 3u) << text;
  const GpuActivity& k = log->activities[0];
  EXPECT_EQ(k.kind, GpuActivityKind::kKernel);
  EXPECT_EQ(k.start_ns, 1'000'000'000'123u);
  EXPECT_EQ(k.end_ns, 1'000'000'020'456u);
  EXPECT_EQ(k.device, 1u);
  EXPECT_EQ(k.stream, 13u);
  EXPECT_EQ(k.name, "_Z4spinPyl");
  const GpuActivity& m = log->activities[1];
  EXPECT_EQ(m.kind, GpuActivityKind::kMemcpy);
  EXPECT_EQ(m.start_ns, 1'000'000'030'000u);
  EXPECT_EQ(m.end_ns, 1'000'000'031'000u);
  EXPECT_EQ(m.device, 0u);
  EXPECT_EQ(m.stream, 7u);
  EXPECT_EQ(m.bytes, 1u << 20);
  EXPECT_EQ(m.name, "HtoD");
  const GpuActivity& s = log->activities[2];
  EXPECT_EQ(s.kind, GpuActivityKind::kMemset);
  EXPECT_EQ(s.start_ns, 1'000'000'032'000u);
  EXPECT_EQ(s.end_ns, 1'000'000'032'500u);
  EXPECT_EQ(s.device, 2u);
  EXPECT_EQ(s.stream, 9u);
  EXPECT_EQ(s.bytes, 4096u);
}

TEST(CuptiRecordTest, KernelLineCarriesTheCorrelationId) {
  CuptiKernelRecord k = Kernel(5, 9, "k");
  std::string line;
  ASSERT_EQ(AppendRecordLine(reinterpret_cast<const CUpti_Activity&>(k), line),
            RecordLine::kWritten);
  EXPECT_EQ(line, "K 5 9 1 13 77 k\n");
}

TEST(CuptiRecordTest, SerialKernelKindIsAKernelToo) {
  CuptiKernelRecord k = Kernel(5, 9, "serial");
  k.kind = CUPTI_ACTIVITY_KIND_KERNEL;
  std::string line;
  EXPECT_EQ(AppendRecordLine(reinterpret_cast<const CUpti_Activity&>(k), line),
            RecordLine::kWritten);
  EXPECT_EQ(line, "K 5 9 1 13 77 serial\n");
}

TEST(CuptiRecordTest, EveryCopyKindHasAName) {
  struct Case {
    uint8_t kind;
    const char* name;
  };
  const Case cases[] = {
      {CUPTI_ACTIVITY_MEMCPY_KIND_HTOD, "HtoD"},       {CUPTI_ACTIVITY_MEMCPY_KIND_DTOH, "DtoH"},
      {CUPTI_ACTIVITY_MEMCPY_KIND_HTOA, "HtoA"},       {CUPTI_ACTIVITY_MEMCPY_KIND_ATOH, "AtoH"},
      {CUPTI_ACTIVITY_MEMCPY_KIND_ATOA, "AtoA"},       {CUPTI_ACTIVITY_MEMCPY_KIND_ATOD, "AtoD"},
      {CUPTI_ACTIVITY_MEMCPY_KIND_DTOA, "DtoA"},       {CUPTI_ACTIVITY_MEMCPY_KIND_DTOD, "DtoD"},
      {CUPTI_ACTIVITY_MEMCPY_KIND_HTOH, "HtoH"},       {CUPTI_ACTIVITY_MEMCPY_KIND_PTOP, "PtoP"},
      {CUPTI_ACTIVITY_MEMCPY_KIND_UNKNOWN, "unknown"}, {200, "unknown"},
  };
  for (const Case& c : cases) {
    std::string line;
    CuptiMemcpyRecord m = Memcpy(1, 2, c.kind, 8);
    ASSERT_EQ(AppendRecordLine(reinterpret_cast<const CUpti_Activity&>(m), line),
              RecordLine::kWritten);
    EXPECT_EQ(line, "M 1 2 0 7 8 " + std::string(c.name) + "\n");
  }
}

TEST(CuptiRecordTest, UntimedRecordsAndOtherKindsWriteNothing) {
  // Given records CUPTI could not time, and a record of a kind the log does not hold.
  ActivityBuffer buffer;
  buffer.Append(Kernel(0, 0, "untimed"));
  buffer.Append(Memcpy(0, 0, CUPTI_ACTIVITY_MEMCPY_KIND_DTOH, 4));
  buffer.Append(Memset(0, 0, 4));
  CUpti_ActivityAPI api{};
  api.kind = CUPTI_ACTIVITY_KIND_RUNTIME;
  api.start = 10;
  api.end = 20;
  buffer.Append(api);
  // When they are formatted.
  std::vector<RecordLine> results;
  std::string text = FormatLog(buffer, &results);
  // Then each says why it was skipped, and the log has no activity.
  EXPECT_EQ(results, (std::vector<RecordLine>{RecordLine::kUntimed, RecordLine::kUntimed,
                                              RecordLine::kUntimed, RecordLine::kOtherKind}));
  Result<GpuLog> log = ParseGpuLog(text, "g");
  ASSERT_TRUE(log.ok()) << log.status().message();
  EXPECT_TRUE(log->activities.empty());
}

TEST(CuptiRecordTest, KernelNamesStayOnOneLine) {
  // Given kernels without a name and with control characters in the name.
  ActivityBuffer buffer;
  buffer.Append(Kernel(1, 2, nullptr));
  buffer.Append(Kernel(3, 4, ""));
  buffer.Append(Kernel(5, 6, "evil\nS 1 2 0 0 5\r\tname with spaces"));
  std::vector<RecordLine> results;
  std::string text = FormatLog(buffer, &results);
  // Then the log still holds exactly three kernels.
  Result<GpuLog> log = ParseGpuLog(text, "g");
  ASSERT_TRUE(log.ok()) << log.status().message();
  ASSERT_EQ(log->activities.size(), 3u) << text;
  EXPECT_EQ(log->activities[0].name, "?");
  EXPECT_EQ(log->activities[1].name, "?");
  EXPECT_EQ(log->activities[2].name, "evil?S 1 2 0 0 5??name with spaces");
}

}  // namespace
}  // namespace gm
