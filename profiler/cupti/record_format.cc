#include "profiler/cupti/record_format.h"

#include <charconv>

namespace gm {
namespace {

void AppendNumber(std::string& out, uint64_t value) {
  char digits[24];
  auto [end, ec] = std::to_chars(digits, digits + sizeof(digits), value);
  (void)ec;  // 24 characters hold any uint64_t
  out.push_back(' ');
  out.append(digits, end);
}

// "T start end device stream", the beginning every activity line shares.
void AppendTimes(std::string& out, char tag, uint64_t start, uint64_t end, uint32_t device,
                 uint32_t stream) {
  out.push_back(tag);
  AppendNumber(out, start);
  AppendNumber(out, end);
  AppendNumber(out, device);
  AppendNumber(out, stream);
}

void AppendName(std::string& out, const char* name) {
  out.push_back(' ');
  if (name == nullptr || *name == '\0') {
    out.push_back('?');
    return;
  }
  for (const char* c = name; *c != '\0'; ++c) {
    out.push_back(static_cast<unsigned char>(*c) < 0x20 || *c == 0x7f ? '?' : *c);
  }
}

RecordLine AppendKernel(const CuptiKernelRecord& k, std::string& out) {
  if (k.start == 0 && k.end == 0) return RecordLine::kUntimed;
  AppendTimes(out, 'K', k.start, k.end, k.deviceId, k.streamId);
  AppendNumber(out, k.correlationId);
  AppendName(out, k.name);
  out.push_back('\n');
  return RecordLine::kWritten;
}

RecordLine AppendMemcpy(const CuptiMemcpyRecord& m, std::string& out) {
  if (m.start == 0 && m.end == 0) return RecordLine::kUntimed;
  AppendTimes(out, 'M', m.start, m.end, m.deviceId, m.streamId);
  AppendNumber(out, m.bytes);
  out.push_back(' ');
  out.append(MemcpyKindName(m.copyKind));
  out.push_back('\n');
  return RecordLine::kWritten;
}

RecordLine AppendMemset(const CuptiMemsetRecord& s, std::string& out) {
  if (s.start == 0 && s.end == 0) return RecordLine::kUntimed;
  AppendTimes(out, 'S', s.start, s.end, s.deviceId, s.streamId);
  AppendNumber(out, s.bytes);
  out.push_back('\n');
  return RecordLine::kWritten;
}

}  // namespace

RecordLine AppendRecordLine(const CUpti_Activity& record, std::string& out) {
  // CUPTI's records are tagged unions: `kind` says which struct the bytes are.
  switch (record.kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
      return AppendKernel(reinterpret_cast<const CuptiKernelRecord&>(record), out);
    case CUPTI_ACTIVITY_KIND_MEMCPY:
      return AppendMemcpy(reinterpret_cast<const CuptiMemcpyRecord&>(record), out);
    case CUPTI_ACTIVITY_KIND_MEMSET:
      return AppendMemset(reinterpret_cast<const CuptiMemsetRecord&>(record), out);
    default:
      return RecordLine::kOtherKind;
  }
}

std::string_view MemcpyKindName(uint8_t copy_kind) {
  switch (copy_kind) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD:
      return "HtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH:
      return "DtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOA:
      return "HtoA";
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOH:
      return "AtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOA:
      return "AtoA";
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOD:
      return "AtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOA:
      return "DtoA";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD:
      return "DtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH:
      return "HtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP:
      return "PtoP";
    default:
      return "unknown";
  }
}

}  // namespace gm
