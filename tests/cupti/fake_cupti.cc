// A fake libcupti for tests/unit/cupti_injection_test.cc: the CUPTI calls that
// libgoldminer_cupti.so makes, with the installed headers' signatures, and no GPU.
// Every call succeeds unless the environment says otherwise:
//   FAKE_CUPTI_REFUSE_TIMESTAMP=1  cuptiActivityRegisterTimestampCallback fails
//   FAKE_CUPTI_REFUSE_ENABLE=1     every cuptiActivityEnable fails
//   FAKE_CUPTI_OTHER_VERSION=1     cuptiGetVersion gives CUPTI_API_VERSION + 1
// cuptiGetTimestamp gives the registered callback's time, else CLOCK_REALTIME (as
// CUPTI does on Linux). cuptiActivityFlushAll hands over one buffer holding a
// kernel, a memcpy, a memset (all timed "now", 1 us long) and an untimed kernel;
// cuptiActivityGetNumDroppedRecords reports 1 per call.
#include <cupti.h>
#include <time.h>

#include <cstdlib>
#include <cstring>

#include "profiler/cupti/record_format.h"

namespace {

CUpti_BuffersCallbackRequestFunc g_request = nullptr;
CUpti_BuffersCallbackCompleteFunc g_complete = nullptr;
CUpti_TimestampCallbackFunc g_timestamp = nullptr;

bool EnvSet(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && std::strcmp(v, "1") == 0;
}

uint64_t Now() {
  if (g_timestamp != nullptr) return g_timestamp();
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000u + static_cast<uint64_t>(ts.tv_nsec);
}

// Each record is preceded by its size, so that GetNextRecord can walk the buffer.
template <typename Record>
void Put(uint8_t*& at, const Record& r) {
  uint64_t size = sizeof(Record);
  std::memcpy(at, &size, sizeof(size));
  std::memcpy(at + sizeof(size), &r, sizeof(r));
  at += sizeof(size) + sizeof(r);
}

}  // namespace

extern "C" {

CUptiResult CUPTIAPI cuptiGetResultString(CUptiResult result, const char** str) {
  *str = result == CUPTI_ERROR_UNKNOWN ? "CUPTI_ERROR_UNKNOWN" : "FAKE_CUPTI_RESULT";
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiGetVersion(uint32_t* version) {
  *version = CUPTI_API_VERSION + (EnvSet("FAKE_CUPTI_OTHER_VERSION") ? 1 : 0);
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityRegisterTimestampCallback(CUpti_TimestampCallbackFunc f) {
  if (EnvSet("FAKE_CUPTI_REFUSE_TIMESTAMP")) return CUPTI_ERROR_UNKNOWN;
  g_timestamp = f;
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc request,
                                                    CUpti_BuffersCallbackCompleteFunc done) {
  g_request = request;
  g_complete = done;
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityEnable(CUpti_ActivityKind) {
  return EnvSet("FAKE_CUPTI_REFUSE_ENABLE") ? CUPTI_ERROR_UNKNOWN : CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityFlushPeriod(uint32_t) { return CUPTI_SUCCESS; }

CUptiResult CUPTIAPI cuptiGetTimestamp(uint64_t* timestamp) {
  *timestamp = Now();
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityGetNumDroppedRecords(CUcontext, uint32_t, size_t* dropped) {
  *dropped = 1;
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityGetNextRecord(uint8_t* buffer, size_t valid_bytes,
                                                CUpti_Activity** record) {
  uint8_t* at = buffer;
  if (*record != nullptr) {
    uint8_t* current = reinterpret_cast<uint8_t*>(*record);
    uint64_t size = 0;
    std::memcpy(&size, current - sizeof(size), sizeof(size));
    at = current + size;
  }
  if (at >= buffer + valid_bytes) return CUPTI_ERROR_MAX_LIMIT_REACHED;
  *record = reinterpret_cast<CUpti_Activity*>(at + sizeof(uint64_t));
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityFlushAll(uint32_t) {
  uint8_t* buffer = nullptr;
  size_t size = 0;
  size_t max_records = 0;
  g_request(&buffer, &size, &max_records);
  if (buffer == nullptr) return CUPTI_ERROR_UNKNOWN;
  uint64_t start = Now();
  gm::CuptiKernelRecord k{};
  k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  k.start = start;
  k.end = start + 1000;
  k.streamId = 7;
  k.name = "_Z4fakev";
  gm::CuptiMemcpyRecord m{};
  m.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
  m.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
  m.bytes = 4096;
  m.start = start;
  m.end = start + 1000;
  gm::CuptiMemsetRecord s{};
  s.kind = CUPTI_ACTIVITY_KIND_MEMSET;
  s.bytes = 64;
  s.start = start;
  s.end = start + 1000;
  gm::CuptiKernelRecord untimed = k;
  untimed.start = untimed.end = 0;
  uint8_t* at = buffer;
  Put(at, k);
  Put(at, m);
  Put(at, s);
  Put(at, untimed);
  g_complete(nullptr, 0, buffer, size, static_cast<size_t>(at - buffer));
  return CUPTI_SUCCESS;
}

}  // extern "C"
