#include "worker/sample_frame.h"

#include <cstring>
#include <limits>
#include <vector>

namespace gm {
namespace {

// Little-endian append/read helpers. The format is little-endian on every host;
// these go through bytes so they are independent of host order and alignment.
template <typename T>
void Put(std::string& out, T value) {
  auto u = static_cast<std::make_unsigned_t<T>>(value);
  for (size_t i = 0; i < sizeof(T); ++i) out.push_back(static_cast<char>((u >> (8 * i)) & 0xff));
}

template <typename T>
T GetLe(const char* p) {
  std::make_unsigned_t<T> u = 0;
  for (size_t i = 0; i < sizeof(T); ++i) {
    u |= static_cast<std::make_unsigned_t<T>>(static_cast<uint8_t>(p[i])) << (8 * i);
  }
  return static_cast<T>(u);
}

bool PutBytes(std::string& out, std::string_view bytes) {
  if (bytes.size() > std::numeric_limits<uint32_t>::max()) return false;
  Put<uint32_t>(out, static_cast<uint32_t>(bytes.size()));
  out.append(bytes);
  return true;
}

// Reads fields off a body; every failure names the field that did not fit.
class Reader {
 public:
  explicit Reader(std::string_view body) : body_(body) {}

  template <typename T>
  Status Int(std::string_view field, T& out) {
    if (body_.size() - pos_ < sizeof(T)) return Short(field);
    out = GetLe<T>(body_.data() + pos_);
    pos_ += sizeof(T);
    return Status::Ok();
  }
  Status Bytes(std::string_view field, std::string& out) {
    uint32_t len = 0;
    GM_RETURN_IF_ERROR(Int(field, len));
    if (body_.size() - pos_ < len) return Short(field);
    out.assign(body_.data() + pos_, len);
    pos_ += len;
    return Status::Ok();
  }
  Status Raw(std::string_view field, uint64_t len, gm::Bytes& out) {
    if (body_.size() - pos_ < len) return Short(field);
    out.resize(len);
    if (len) std::memcpy(out.data(), body_.data() + pos_, len);
    pos_ += len;
    return Status::Ok();
  }
  size_t remaining() const { return body_.size() - pos_; }

 private:
  Status Short(std::string_view field) const {
    return Status::Corrupt("sample frame: body ends inside field \"" + std::string(field) +
                           "\" at byte " + std::to_string(pos_) + " of " +
                           std::to_string(body_.size()));
  }
  std::string_view body_;
  size_t pos_ = 0;
};

Status DecodeTensor(Reader& r, Sample& out) {
  uint8_t dtype = 0, layout = 0, ndim = 0;
  GM_RETURN_IF_ERROR(r.Int("tensor.dtype", dtype));
  GM_RETURN_IF_ERROR(r.Int("tensor.layout", layout));
  GM_RETURN_IF_ERROR(r.Int("tensor.ndim", ndim));
  if (dtype > 3)
    return Status::Corrupt("sample frame: unknown tensor dtype " + std::to_string(dtype));
  if (layout > 2)
    return Status::Corrupt("sample frame: unknown tensor layout " + std::to_string(layout));
  if (ndim == 0) return Status::Corrupt("sample frame: a tensor needs at least one dimension");
  std::vector<int64_t> shape(ndim);
  uint64_t elements = 1;
  bool overflow = false;
  for (auto& d : shape) {
    GM_RETURN_IF_ERROR(r.Int("tensor.dims", d));
    if (d < 0)
      return Status::Corrupt("sample frame: negative tensor dimension " + std::to_string(d));
    auto ud = static_cast<uint64_t>(d);
    if (ud != 0 && elements > kMaxFrameBody / ud) overflow = true;
    elements *= ud;
    if (elements > kMaxFrameBody) overflow = true;
  }
  uint64_t nbytes = 0;
  GM_RETURN_IF_ERROR(r.Int("tensor.nbytes", nbytes));
  auto dt = static_cast<DType>(dtype);
  if (overflow || nbytes != elements * DTypeSize(dt)) {
    return Status::Corrupt("sample frame: tensor of shape " + ShapeString(shape) + " and dtype " +
                           std::string(DTypeName(dt)) + " cannot hold " + std::to_string(nbytes) +
                           " bytes");
  }
  out.tensor.dtype = dt;
  out.tensor.shape = std::move(shape);
  out.layout = static_cast<Layout>(layout);
  return r.Raw("tensor.bytes", nbytes, out.tensor.bytes);
}

}  // namespace

Result<std::string> EncodeSampleFrame(const Sample& s, std::optional<uint64_t> seed) {
  std::string out(seed ? kSeededSampleMagic : kSampleMagic);
  Put<uint32_t>(out, 0);  // body length, patched below
  if (seed) Put<uint64_t>(out, *seed);
  Put<uint64_t>(out, s.index);
  Put<int64_t>(out, s.label);
  bool fits = PutBytes(out, s.key) && PutBytes(out, s.data) && PutBytes(out, s.ext);
  Put<uint32_t>(out, static_cast<uint32_t>(s.fields.size()));
  for (const auto& [name, value] : s.fields)
    fits = fits && PutBytes(out, name) && PutBytes(out, value);
  if (!fits) return Status::InvalidArgument("sample " + s.key + ": a string is over 4 GiB");
  const Tensor& t = s.tensor;
  Put<uint8_t>(out, t.empty() ? 0 : 1);
  if (!t.empty()) {
    if (t.shape.size() > 255 || t.bytes.size() != t.num_elements() * DTypeSize(t.dtype)) {
      return Status::InvalidArgument("sample " + s.key + ": tensor of shape " +
                                     ShapeString(t.shape) + " does not match its " +
                                     std::to_string(t.bytes.size()) + " bytes");
    }
    Put<uint8_t>(out, static_cast<uint8_t>(t.dtype));
    Put<uint8_t>(out, static_cast<uint8_t>(s.layout));
    Put<uint8_t>(out, static_cast<uint8_t>(t.shape.size()));
    for (int64_t d : t.shape) Put<int64_t>(out, d);
    Put<uint64_t>(out, t.bytes.size());
    out.append(reinterpret_cast<const char*>(t.bytes.data()), t.bytes.size());
  }
  size_t body = out.size() - kFrameHeaderBytes;
  if (body > kMaxFrameBody) {
    return Status::InvalidArgument("sample " + s.key + ": frame body of " + std::to_string(body) +
                                   " bytes is over the 1 GiB limit");
  }
  std::string len;
  Put<uint32_t>(len, static_cast<uint32_t>(body));
  out.replace(4, 4, len);
  return out;
}

std::string EncodeErrorFrame(std::string_view message, bool resource) {
  message = message.substr(0, kMaxFrameBody);
  std::string out(resource ? kResourceErrorMagic : kErrorMagic);
  Put<uint32_t>(out, static_cast<uint32_t>(message.size()));
  out.append(message);
  return out;
}

Result<FrameHeader> DecodeFrameHeader(std::string_view header) {
  if (header.size() < kFrameHeaderBytes) {
    return Status::Corrupt("frame header: got " + std::to_string(header.size()) + " bytes, need " +
                           std::to_string(kFrameHeaderBytes));
  }
  FrameHeader h;
  std::string_view magic = header.substr(0, 4);
  if (magic == kSampleMagic) {
    h.kind = FrameKind::kSample;
  } else if (magic == kSeededSampleMagic) {
    h.kind = FrameKind::kSeededSample;
  } else if (magic == kErrorMagic) {
    h.kind = FrameKind::kError;
  } else if (magic == kResourceErrorMagic) {
    h.kind = FrameKind::kResourceError;
  } else {
    std::string shown;
    for (char c : magic) shown += (c >= 0x20 && c < 0x7f) ? c : '?';
    return Status::Corrupt("frame header: bad magic \"" + shown +
                           "\" (expected \"GMS1\", \"GMS2\", \"GME1\" or \"GMR1\")");
  }
  h.body_bytes = GetLe<uint32_t>(header.data() + 4);
  if (h.body_bytes > kMaxFrameBody) {
    return Status::Corrupt("frame header: body of " + std::to_string(h.body_bytes) +
                           " bytes is over the 1 GiB limit");
  }
  return h;
}

Status DecodeSampleBody(std::string_view body, Sample& out) {
  Reader r(body);
  GM_RETURN_IF_ERROR(r.Int("index", out.index));
  GM_RETURN_IF_ERROR(r.Int("label", out.label));
  GM_RETURN_IF_ERROR(r.Bytes("key", out.key));
  GM_RETURN_IF_ERROR(r.Bytes("data", out.data));
  GM_RETURN_IF_ERROR(r.Bytes("ext", out.ext));
  uint32_t count = 0;
  GM_RETURN_IF_ERROR(r.Int("fields.count", count));
  out.fields.clear();
  for (uint32_t i = 0; i < count; ++i) {
    std::string name, value;
    GM_RETURN_IF_ERROR(r.Bytes("fields.name", name));
    GM_RETURN_IF_ERROR(r.Bytes("fields.value", value));
    out.fields[std::move(name)] = std::move(value);
  }
  uint8_t present = 0;
  GM_RETURN_IF_ERROR(r.Int("tensor.present", present));
  out.tensor = Tensor{};
  out.layout = Layout::kNone;
  if (present > 1)
    return Status::Corrupt("sample frame: tensor.present is " + std::to_string(present));
  if (present) GM_RETURN_IF_ERROR(DecodeTensor(r, out));
  if (r.remaining()) {
    return Status::Corrupt("sample frame: " + std::to_string(r.remaining()) +
                           " unexpected bytes after the last field");
  }
  return Status::Ok();
}

Result<Sample> DecodeSampleFrame(std::string_view frame, uint64_t* seed) {
  GM_ASSIGN_OR_RETURN(FrameHeader h, DecodeFrameHeader(frame));
  std::string_view body = frame.substr(kFrameHeaderBytes);
  if (body.size() != h.body_bytes) {
    return Status::Corrupt("sample frame: header says " + std::to_string(h.body_bytes) +
                           " body bytes, got " + std::to_string(body.size()));
  }
  if (h.kind == FrameKind::kError) return Status::Corrupt(std::string(body));
  if (h.kind == FrameKind::kResourceError) return Status::ResourceExhausted(std::string(body));
  if (h.kind == FrameKind::kSeededSample) {
    if (body.size() < sizeof(uint64_t))
      return Status::Corrupt("sample frame: no room for the seed");
    if (seed != nullptr) *seed = GetLe<uint64_t>(body.data());
    body.remove_prefix(sizeof(uint64_t));
  }
  Sample s;
  GM_RETURN_IF_ERROR(DecodeSampleBody(body, s));
  return s;
}

}  // namespace gm
