#include "worker/image/jpeg.h"

#include <jpeglib.h>

#include <algorithm>
#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <string>
// jerror.h after jpeglib.h: it needs the J_MESSAGE_CODE context.
#include <jerror.h>

#include "worker/image/jpeg_entropy.h"

namespace gm {
namespace {

constexpr long kMaxLibjpegMemory = 1L << 30;  // bytes for progressive coefficient buffers
constexpr int kScanLimitCode = -1;            // our own "message code" for the scan limit

// libjpeg reports errors by calling error_exit, which must not return. We
// longjmp back to the setjmp in one of the small trampolines below; only C
// frames and these callbacks (no C++ objects with destructors) lie in between.
struct ErrorManager {
  jpeg_error_mgr pub;
  jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
  int code;
};

[[noreturn]] void ErrorExit(j_common_ptr cinfo) {
  auto* err = reinterpret_cast<ErrorManager*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, err->message);
  err->code = cinfo->err->msg_code;
  longjmp(err->jump, 1);
}

// Warnings (level < 0) are corrupt data: treat them as errors. Trace messages
// (level >= 0) are dropped.
void EmitMessage(j_common_ptr cinfo, int msg_level) {
  if (msg_level < 0) ErrorExit(cinfo);
}

void OutputMessage(j_common_ptr /*cinfo*/) {}

void ProgressMonitor(j_common_ptr cinfo) {
  if (!cinfo->is_decompressor) return;
  auto* dinfo = reinterpret_cast<j_decompress_ptr>(cinfo);
  if (dinfo->input_scan_number <= kMaxJpegScans) return;
  auto* err = reinterpret_cast<ErrorManager*>(cinfo->err);
  std::snprintf(err->message, sizeof(err->message), "more than %d progressive scans",
                kMaxJpegScans);
  err->code = kScanLimitCode;
  longjmp(err->jump, 1);
}

}  // namespace

struct JpegDecoder::State {
  jpeg_decompress_struct cinfo;
  ErrorManager err;
  jpeg_progress_mgr progress;
  bool created = false;
  FastEntropyPtr entropy;  // the Huffman decoder libjpeg calls, when it is ours
};

namespace {

using State = JpegDecoder::State;

// Trampolines: each runs libjpeg calls under its own setjmp and returns false
// when libjpeg reported an error (the message is in state->err).
bool TryCreate(State* s) {
  if (setjmp(s->err.jump)) return false;
  jpeg_create_decompress(&s->cinfo);
  s->created = true;
  s->cinfo.mem->max_memory_to_use = kMaxLibjpegMemory;
  s->progress.progress_monitor = ProgressMonitor;
  s->cinfo.progress = &s->progress;
  return true;
}

bool TryReadHeader(State* s, const unsigned char* data, unsigned long size) {
  if (setjmp(s->err.jump)) return false;
  jpeg_mem_src(&s->cinfo, data, size);
  jpeg_read_header(&s->cinfo, TRUE);
  return true;
}

bool TryStart(State* s) {
  if (setjmp(s->err.jump)) return false;
  jpeg_start_decompress(&s->cinfo);
  return true;
}

bool TryCropAndSkip(State* s, JDIMENSION* x, JDIMENSION* w, JDIMENSION skip_rows) {
  if (setjmp(s->err.jump)) return false;
  if (*x != 0 || *w != s->cinfo.output_width) jpeg_crop_scanline(&s->cinfo, x, w);
  if (skip_rows > 0 && jpeg_skip_scanlines(&s->cinfo, skip_rows) != skip_rows) {
    ERREXIT(&s->cinfo, JERR_BAD_SCAN_SCRIPT);
  }
  return true;
}

// Reads `rows` scanlines into dst (rows `stride` bytes apart).
bool TryReadRows(State* s, unsigned char* dst, size_t stride, int rows) {
  if (setjmp(s->err.jump)) return false;
  constexpr int kBatch = 16;
  JSAMPROW pointers[kBatch];
  int done = 0;
  while (done < rows) {
    int n = std::min(kBatch, rows - done);
    for (int i = 0; i < n; ++i) pointers[i] = dst + static_cast<size_t>(done + i) * stride;
    JDIMENSION got = jpeg_read_scanlines(&s->cinfo, pointers, static_cast<JDIMENSION>(n));
    if (got == 0) ERREXIT(&s->cinfo, JERR_INPUT_EOF);  // cannot suspend on memory input
    done += static_cast<int>(got);
  }
  return true;
}

Status ErrorStatus(const State& s) {
  switch (s.err.code) {
    case JWRN_JPEG_EOF:
    case JERR_INPUT_EOF:
      return Status::Corrupt("truncated JPEG (data ends before the image is complete)");
    case JERR_NO_SOI:
      return Status::Corrupt("not a JPEG (no start-of-image marker)");
    case JERR_INPUT_EMPTY:
      return Status::Corrupt("zero bytes (empty file)");
    case kScanLimitCode:
      return Status::Corrupt(std::string("JPEG refused: ") + s.err.message);
    default:
      return Status::Corrupt(std::string("corrupt JPEG: ") + s.err.message);
  }
}

inline uint8_t MulDiv255(int a, int b) {
  int t = a * b + 128;
  return static_cast<uint8_t>((t + (t >> 8)) >> 8);
}

// libjpeg returns Adobe CMYK inverted (255 = no ink), as Photoshop writes it.
void CmykToRgb(const uint8_t* in, size_t pixels, bool inverted, uint8_t* out) {
  for (size_t i = 0; i < pixels; ++i, in += 4, out += 3) {
    int k = inverted ? in[3] : 255 - in[3];
    for (int c = 0; c < 3; ++c) out[c] = MulDiv255(inverted ? in[c] : 255 - in[c], k);
  }
}

}  // namespace

Status CheckJpegSignature(std::string_view data) {
  if (data.empty()) return Status::Corrupt("zero bytes (empty file)");
  if (data.size() >= 2 && static_cast<uint8_t>(data[0]) == 0xFF &&
      static_cast<uint8_t>(data[1]) == 0xD8) {
    // A fused decode stops at the crop box's last row and would not notice a file
    // cut short below it; checking for the end-of-image marker here makes a
    // truncated file bad input whatever the crop. Entropy-coded data cannot hold
    // FF D9 (an FF byte is stuffed as FF 00), so the marker's presence in the
    // tail is decisive; up to kMaxJpegTrailer bytes may follow it.
    std::string_view tail = data.substr(data.size() - std::min(data.size(), kMaxJpegTrailer));
    if (tail.find("\xFF\xD9") == std::string_view::npos) {
      return Status::Corrupt("truncated JPEG (no end-of-image marker)");
    }
    return Status::Ok();
  }
  if (data.starts_with("\x89PNG")) return Status::Corrupt("not a JPEG (PNG signature)");
  if (data.starts_with("GIF8")) return Status::Corrupt("not a JPEG (GIF signature)");
  if (data.size() >= 12 && data.starts_with("RIFF") && data.substr(8, 4) == "WEBP") {
    return Status::Corrupt("not a JPEG (WebP signature)");
  }
  if (data.starts_with("BM")) return Status::Corrupt("not a JPEG (BMP signature)");
  char first[64];
  std::snprintf(first, sizeof(first), "not a JPEG (starts with 0x%02X%s, expected 0xFFD8)",
                static_cast<uint8_t>(data[0]), data.size() > 1 ? "..." : "");
  return Status::Corrupt(first);
}

JpegDecoder::JpegDecoder(std::string_view data) : state_(std::make_unique<State>()), data_(data) {}

JpegDecoder::~JpegDecoder() {
  if (state_->created) jpeg_destroy_decompress(&state_->cinfo);
}

bool JpegDecoder::fast_entropy() const { return state_->entropy != nullptr; }

Status JpegDecoder::ReadHeader() {
  GM_RETURN_IF_ERROR(CheckJpegSignature(data_));
  State* s = state_.get();
  s->cinfo.err = jpeg_std_error(&s->err.pub);
  s->err.pub.error_exit = ErrorExit;
  s->err.pub.emit_message = EmitMessage;
  s->err.pub.output_message = OutputMessage;
  s->err.code = 0;
  if (!TryCreate(s)) return ErrorStatus(*s);
  if (!TryReadHeader(s, reinterpret_cast<const unsigned char*>(data_.data()), data_.size())) {
    return ErrorStatus(*s);
  }
  width_ = static_cast<int>(s->cinfo.image_width);
  height_ = static_cast<int>(s->cinfo.image_height);
  if (static_cast<int64_t>(width_) * height_ > kMaxJpegPixels) {
    return Status::Corrupt("JPEG refused: " + std::to_string(width_) + "x" +
                           std::to_string(height_) + " pixels is over the limit of " +
                           std::to_string(kMaxJpegPixels));
  }
  return Status::Ok();
}

Status JpegDecoder::DecodeRegion(int scale_num, int x, int y, int w, int h, DecodedRegion& out) {
  State* s = state_.get();
  if (!s->created || width_ == 0) return Status::Internal("JpegDecoder: ReadHeader() first");
  jpeg_decompress_struct& c = s->cinfo;
  const bool cmyk = c.jpeg_color_space == JCS_CMYK || c.jpeg_color_space == JCS_YCCK;
  c.out_color_space = cmyk ? JCS_CMYK : JCS_RGB;
  c.scale_num = static_cast<unsigned>(std::clamp(scale_num, 1, 8));
  c.scale_denom = 8;
  if (!TryStart(s)) return ErrorStatus(*s);
  s->entropy = InstallFastEntropyDecoder(&c);

  out.scaled_width = static_cast<int>(c.output_width);
  out.scaled_height = static_cast<int>(c.output_height);
  x = std::clamp(x, 0, out.scaled_width - 1);
  y = std::clamp(y, 0, out.scaled_height - 1);
  w = std::clamp(w, 1, out.scaled_width - x);
  h = std::clamp(h, 1, out.scaled_height - y);
  JDIMENSION cx = static_cast<JDIMENSION>(x), cw = static_cast<JDIMENSION>(w);
  if (!TryCropAndSkip(s, &cx, &cw, static_cast<JDIMENSION>(y))) return ErrorStatus(*s);
  out.x = static_cast<int>(cx);
  out.y = y;
  out.width = static_cast<int>(cw);
  out.height = h;

  const size_t pixels = static_cast<size_t>(out.width) * out.height;
  out.pixels.resize(pixels * 3);
  if (!cmyk) {
    if (!TryReadRows(s, out.pixels.data(), static_cast<size_t>(out.width) * 3, h)) {
      return ErrorStatus(*s);
    }
    return Status::Ok();
  }
  std::vector<uint8_t> cmyk_pixels(pixels * 4);
  if (!TryReadRows(s, cmyk_pixels.data(), static_cast<size_t>(out.width) * 4, h)) {
    return ErrorStatus(*s);
  }
  CmykToRgb(cmyk_pixels.data(), pixels, c.saw_Adobe_marker != 0, out.pixels.data());
  return Status::Ok();
}

Status DecodeJpeg(std::string_view data, Tensor& out) {
  JpegDecoder decoder(data);
  GM_RETURN_IF_ERROR(decoder.ReadHeader());
  DecodedRegion region;
  GM_RETURN_IF_ERROR(decoder.DecodeRegion(8, 0, 0, decoder.width(), decoder.height(), region));
  out.dtype = DType::kUInt8;
  out.shape = {region.height, region.width, 3};
  out.bytes = std::move(region.pixels);
  return Status::Ok();
}

}  // namespace gm
