// The framed sample wire format spoken between an exec stage and its child
// processes (see python/goldminer/stage.py for the Python side).
//
// All integers are little-endian. A frame is an 8-byte header and a body:
//
//   header   magic (4 bytes)  "GMS1" for a sample, "GMS2" for a seeded sample,
//                             "GME1" for an error, "GMR1" for a resource error
//            u32 length       number of body bytes that follow the header;
//                             at most kMaxFrameBody (1 GiB), larger is an error
//   sample body ("GMS1"), fields in this order:
//            u64 index
//            i64 label                 (-1: no label)
//            key     u32 len + bytes
//            data    u32 len + bytes
//            ext     u32 len + bytes
//            u32 count of extra fields, then per field:
//                    name u32 len + bytes, value u32 len + bytes
//            tensor  u8 present (0 or 1); when 1:
//                    u8 dtype   (0 uint8, 1 int32, 2 int64, 3 float32)
//                    u8 layout  (0 none, 1 HWC, 2 CHW)
//                    u8 ndim    (1..255)
//                    i64 dims[ndim]   (each >= 0)
//                    u64 nbytes       (== product(dims) * dtype size)
//                    bytes[nbytes]    (row-major, contiguous)
//            The body must end exactly after the tensor.
//   seeded sample body ("GMS2"): u64 seed, then a "GMS1" body. The seed is the
//            sample's own random seed for the stage, drawn from (run seed, epoch,
//            sample index, stage number) as native ops draw theirs; the Python
//            helper seeds random, numpy and torch from it before the user's code.
//   error body ("GME1"): the message, UTF-8 bytes (the whole body).
//   resource error body ("GMR1"): the same, for a failure that is not the
//            sample's fault: the child ran out of memory or descriptors (the
//            Python helper sends it for MemoryError and OSError EMFILE, ENFILE,
//            ENOMEM, ENOBUFS, ENOSPC).
//
// An exec stage sends one seeded sample frame per request and reads one frame
// back: the transformed sample ("GMS1"; a "GMS2" answer has its seed dropped),
// an error frame that fails that sample only (skipped under on_error "skip"), or
// a resource error frame, which is never a skipped sample: the worker makes the
// split again (worker/worker_service.cc).
// Sample::normalized and Sample::extra_cpu_s do not travel.
//
// Plain functions on values: thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/sample.h"
#include "core/status.h"

namespace gm {

inline constexpr size_t kFrameHeaderBytes = 8;
inline constexpr uint32_t kMaxFrameBody = 1u << 30;  // bytes
inline constexpr std::string_view kSampleMagic = "GMS1";
inline constexpr std::string_view kSeededSampleMagic = "GMS2";
inline constexpr std::string_view kErrorMagic = "GME1";
inline constexpr std::string_view kResourceErrorMagic = "GMR1";

enum class FrameKind { kSample, kSeededSample, kError, kResourceError };

struct FrameHeader {
  FrameKind kind = FrameKind::kSample;
  uint32_t body_bytes = 0;
};

// Encodes `sample` as a whole "GMS1" frame (header + body), or as "GMS2" carrying
// `seed` when one is given. Fails with InvalidArgument when the sample does not
// fit (a string over 4 GiB, a body over kMaxFrameBody, a tensor whose bytes do not
// match its shape).
Result<std::string> EncodeSampleFrame(const Sample& sample,
                                      std::optional<uint64_t> seed = std::nullopt);

// Encodes a whole "GME1" frame carrying `message` (truncated to kMaxFrameBody),
// or "GMR1" when `resource`.
std::string EncodeErrorFrame(std::string_view message, bool resource = false);

// Parses the first kFrameHeaderBytes of `header`. Corrupt on a short header, an
// unknown magic or a length over kMaxFrameBody.
Result<FrameHeader> DecodeFrameHeader(std::string_view header);

// Decodes a "GMS1" body into `out` (every field the format carries is
// overwritten; `normalized` and `extra_cpu_s` are left as they are). Corrupt,
// naming the field, when the body is short, has trailing bytes or an
// inconsistent tensor. `out` is unspecified after a failure.
Status DecodeSampleBody(std::string_view body, Sample& out);

// Decodes one whole frame. A "GME1" frame yields Corrupt carrying its message,
// a "GMR1" frame ResourceExhausted;
// a "GMS2" frame's seed goes to `seed` when given (else it is dropped).
Result<Sample> DecodeSampleFrame(std::string_view frame, uint64_t* seed = nullptr);

}  // namespace gm
