#include "dataplane/protocol.h"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "dataplane/batch_order.h"

namespace gm {

// Tensor bytes travel as they lie in memory; the wire format is little-endian.
static_assert(std::endian::native == std::endian::little, "GMP1 needs a little-endian host");

namespace {

// Payload bytes received per step, so memory is committed as data arrives rather
// than when a header announces it.
constexpr size_t kRecvChunkBytes = size_t{1} << 20;

void PutLE(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

uint64_t GetLE(std::string_view in, size_t at, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= uint64_t{static_cast<uint8_t>(in[at + i])} << (8 * i);
  return v;
}

// Printable rendering of bytes from the wire ("GMP1", "\x00\x16...").
std::string Printable(std::string_view bytes) {
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  for (char c : bytes) {
    auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7f && c != '"' && c != '\\') {
      out.push_back(c);
    } else {
      out += "\\x";
      out.push_back(kHex[u >> 4]);
      out.push_back(kHex[u & 15]);
    }
  }
  return out;
}

// Rejects nesting deeper than kMaxMetaDepth before the JSON parser sees the text.
Status CheckMetaDepth(std::string_view meta) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (char c : meta) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxMetaDepth) {
        return Status::Corrupt("frame meta nests JSON deeper than " +
                               std::to_string(kMaxMetaDepth) + " levels");
      }
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return Status::Ok();
}

Result<std::string> DumpMeta(const nlohmann::json& meta, MsgType type) {
  if (meta.is_null()) return std::string("{}");
  if (!meta.is_object()) {
    return Status::InvalidArgument(std::string(MsgTypeName(type)) +
                                   " frame meta must be a JSON object");
  }
  std::string text;
  try {
    text = meta.dump();
  } catch (const nlohmann::json::exception& e) {
    return Status::InvalidArgument(std::string(MsgTypeName(type)) +
                                   " frame meta cannot be serialized: " + e.what());
  }
  if (text.size() > kMaxMetaBytes) {
    return Status::InvalidArgument(std::string(MsgTypeName(type)) + " frame meta of " +
                                   std::to_string(text.size()) + " bytes exceeds the limit of " +
                                   std::to_string(kMaxMetaBytes));
  }
  return text;
}

}  // namespace

std::string_view MsgTypeName(MsgType type) {
  switch (type) {
    case MsgType::kHello:
      return "HELLO";
    case MsgType::kAuth:
      return "AUTH";
    case MsgType::kWelcome:
      return "WELCOME";
    case MsgType::kError:
      return "ERROR";
    case MsgType::kRegister:
      return "REGISTER";
    case MsgType::kRegistered:
      return "REGISTERED";
    case MsgType::kHeartbeat:
      return "HEARTBEAT";
    case MsgType::kGetSplit:
      return "GET_SPLIT";
    case MsgType::kAssign:
      return "ASSIGN";
    case MsgType::kSplitDone:
      return "SPLIT_DONE";
    case MsgType::kDrain:
      return "DRAIN";
    case MsgType::kAck:
      return "ACK";
    case MsgType::kSubscribe:
      return "SUBSCRIBE";
    case MsgType::kCredit:
      return "CREDIT";
    case MsgType::kBatch:
      return "BATCH";
    case MsgType::kEpochEnd:
      return "EPOCH_END";
    case MsgType::kBye:
      return "BYE";
    case MsgType::kSubscribed:
      return "SUBSCRIBED";
    case MsgType::kGetPlan:
      return "GET_PLAN";
    case MsgType::kPlan:
      return "PLAN";
    case MsgType::kGetWorkers:
      return "GET_WORKERS";
    case MsgType::kWorkers:
      return "WORKERS";
    case MsgType::kResume:
      return "RESUME";
    case MsgType::kFault:
      return "FAULT";
    case MsgType::kOffload:
      return "OFFLOAD";
    case MsgType::kOffloading:
      return "OFFLOADING";
    case MsgType::kOffloadOpen:
      return "OFFLOAD_OPEN";
    case MsgType::kOffloadOpened:
      return "OFFLOAD_OPENED";
    case MsgType::kOffloadData:
      return "OFFLOAD_DATA";
    case MsgType::kOffloadExit:
      return "OFFLOAD_EXIT";
    case MsgType::kOffloadNote:
      return "OFFLOAD_NOTE";
    case MsgType::kPoolReport:
      return "POOL_REPORT";
    case MsgType::kPoolGrant:
      return "POOL_GRANT";
    case MsgType::kPoolStatus:
      return "POOL_STATUS";
    case MsgType::kPoolState:
      return "POOL_STATE";
  }
  return "UNKNOWN";
}

bool IsKnownMsgType(uint8_t value) { return MsgTypeName(static_cast<MsgType>(value)) != "UNKNOWN"; }

std::string EncodeFrameHeader(const FrameHeader& header) {
  std::string out(kProtocolMagic);
  PutLE(out, header.version, 1);
  PutLE(out, static_cast<uint8_t>(header.type), 1);
  PutLE(out, header.flags, 2);
  PutLE(out, header.meta_len, 4);
  PutLE(out, 0, 4);
  PutLE(out, header.payload_len, 8);
  return out;
}

Result<FrameHeader> ParseFrameHeader(std::string_view header, const FrameLimits& limits) {
  if (header.size() < kFrameHeaderSize) {
    return Status::Corrupt("frame header of " + std::to_string(header.size()) +
                           " bytes is shorter than " + std::to_string(kFrameHeaderSize));
  }
  if (header.substr(0, 4) != kProtocolMagic) {
    return Status::Corrupt("bad frame magic \"" + Printable(header.substr(0, 4)) +
                           "\" (expected \"GMP1\"): the peer does not speak the goldminer "
                           "data-plane protocol");
  }
  FrameHeader h;
  h.version = static_cast<uint8_t>(header[4]);
  if (h.version != kProtocolVersion) {
    return Status::Corrupt("frame version " + std::to_string(h.version) +
                           " is not supported (this side speaks version " +
                           std::to_string(kProtocolVersion) + ")");
  }
  auto type = static_cast<uint8_t>(header[5]);
  if (!IsKnownMsgType(type)) return Status::Corrupt("unknown frame type " + std::to_string(type));
  h.type = static_cast<MsgType>(type);
  h.flags = static_cast<uint16_t>(GetLE(header, 6, 2));
  h.meta_len = static_cast<uint32_t>(GetLE(header, 8, 4));
  uint64_t reserved = GetLE(header, 12, 4);
  h.payload_len = GetLE(header, 16, 8);
  const std::string name(MsgTypeName(h.type));
  if (reserved != 0) {
    return Status::Corrupt(name + " frame reserved field is " + std::to_string(reserved) +
                           ", expected 0");
  }
  uint32_t max_meta = std::min(limits.max_meta_bytes, kMaxMetaBytes);
  if (h.meta_len > max_meta) {
    return Status::Corrupt(name + " frame meta of " + std::to_string(h.meta_len) +
                           " bytes exceeds the limit of " + std::to_string(max_meta));
  }
  if (h.payload_len > limits.max_payload_bytes) {
    return Status::Corrupt(name + " frame payload of " + std::to_string(h.payload_len) +
                           " bytes exceeds the limit of " +
                           std::to_string(limits.max_payload_bytes));
  }
  return h;
}

Result<nlohmann::json> ParseFrameMeta(std::string_view meta) {
  if (meta.empty()) return nlohmann::json::object();
  GM_RETURN_IF_ERROR(CheckMetaDepth(meta));
  nlohmann::json j;
  // A key given twice in one object ({"rank": 5, "rank": 0}) is refused: a
  // parser keeps one of them, and two readers of one frame might disagree.
  std::vector<std::set<std::string>> keys;  // of each object being parsed
  std::string repeated;
  const auto check_keys = [&](int, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    using Event = nlohmann::json::parse_event_t;
    if (event == Event::object_start) keys.emplace_back();
    if (event == Event::object_end && !keys.empty()) keys.pop_back();
    if (event == Event::key && !keys.empty() &&
        !keys.back().insert(parsed.get<std::string>()).second && repeated.empty()) {
      repeated = parsed.get<std::string>();
    }
    return true;
  };
  try {
    j = nlohmann::json::parse(meta.begin(), meta.end(), check_keys, /*allow_exceptions=*/false);
  } catch (const nlohmann::json::exception& e) {
    return Status::Corrupt(std::string("frame meta is not valid JSON: ") + e.what());
  }
  if (j.is_discarded()) return Status::Corrupt("frame meta is not valid UTF-8 JSON");
  if (!repeated.empty()) {
    return Status::Corrupt("frame meta gives the key \"" +
                           Printable(std::string_view(repeated).substr(0, 64)) +
                           "\" twice in one object");
  }
  if (!j.is_object()) {
    return Status::Corrupt("frame meta is JSON " + std::string(j.type_name()) +
                           ", expected an object");
  }
  return j;
}

Result<Frame> ParseFrame(std::string_view bytes, const FrameLimits& limits, size_t* consumed) {
  GM_ASSIGN_OR_RETURN(FrameHeader h, ParseFrameHeader(bytes, limits));
  const std::string name(MsgTypeName(h.type));
  size_t rest = bytes.size() - kFrameHeaderSize;
  if (h.meta_len > rest || h.payload_len > rest - h.meta_len) {
    return Status::Corrupt(name + " frame is truncated: it announces " +
                           std::to_string(h.meta_len) + " meta and " +
                           std::to_string(h.payload_len) + " payload bytes but " +
                           std::to_string(rest) + " follow the header");
  }
  if ((h.flags & kFrameSealed) != 0) {
    return Status::Corrupt(name + " frame is sealed, but no session was set up to check it");
  }
  Frame frame;
  frame.type = h.type;
  frame.flags = h.flags;
  auto meta = ParseFrameMeta(bytes.substr(kFrameHeaderSize, h.meta_len));
  if (!meta.ok()) return meta.status().WithContext(name);
  frame.meta = std::move(*meta);
  const char* payload = bytes.data() + kFrameHeaderSize + h.meta_len;
  frame.payload.assign(payload, payload + h.payload_len);
  if (consumed != nullptr) *consumed = kFrameHeaderSize + h.meta_len + h.payload_len;
  return frame;
}

Result<std::string> EncodeFrame(MsgType type, const nlohmann::json& meta,
                                std::string_view payload) {
  GM_ASSIGN_OR_RETURN(std::string text, DumpMeta(meta, type));
  FrameHeader h;
  h.type = type;
  h.meta_len = static_cast<uint32_t>(text.size());
  h.payload_len = payload.size();
  std::string out = EncodeFrameHeader(h);
  out += text;
  out += payload;
  return out;
}

Status SendFrame(Socket& socket, MsgType type, const nlohmann::json& meta,
                 std::span<const iovec> payload, Deadline deadline, int pass_fd) {
  GM_ASSIGN_OR_RETURN(std::string text, DumpMeta(meta, type));
  FrameHeader h;
  h.type = type;
  h.meta_len = static_cast<uint32_t>(text.size());
  for (const iovec& v : payload) h.payload_len += v.iov_len;
  FrameSession* session = socket.session();
  if (session != nullptr) h.flags |= kFrameSealed;
  std::string header = EncodeFrameHeader(h);
  SealMac mac{};
  std::vector<iovec> iov;
  iov.reserve(payload.size() + 3);
  iov.push_back({header.data(), header.size()});
  iov.push_back({text.data(), text.size()});
  if (session != nullptr) {
    mac = session->Seal(header, text);
    iov.push_back({mac.data(), mac.size()});
  }
  iov.insert(iov.end(), payload.begin(), payload.end());
  return socket.SendAll(iov, deadline, std::string(MsgTypeName(type)) + " frame", pass_fd);
}

Status SendFrame(Socket& socket, MsgType type, const nlohmann::json& meta, Deadline deadline) {
  return SendFrame(socket, type, meta, {}, deadline);
}

Status RecvFrameInto(Socket& socket, const FrameLimits& limits, Deadline deadline, Frame& frame) {
  char header[kFrameHeaderSize];
  // The first byte may take as long as the caller allows; once it is here, the
  // rest of the frame must follow within limits.finish_s.
  GM_RETURN_IF_ERROR(socket.RecvExact(header, 1, deadline, "a frame header"));
  if (limits.finish_s > 0) deadline = deadline.Min(Deadline::After(limits.finish_s));
  GM_RETURN_IF_ERROR(
      socket.RecvExact(header + 1, sizeof header - 1, deadline, "the rest of a frame header"));
  auto parsed = ParseFrameHeader(std::string_view(header, sizeof header), limits);
  if (!parsed.ok()) return parsed.status().WithContext(socket.peer());
  const FrameHeader& h = *parsed;
  const std::string name(MsgTypeName(h.type));
  std::string meta_text(h.meta_len, '\0');
  GM_RETURN_IF_ERROR(
      socket.RecvExact(meta_text.data(), meta_text.size(), deadline, name + " frame meta"));
  // A session's frames are checked before their meta is parsed or their payload
  // is given memory: an injected frame costs us its header and meta only.
  if (FrameSession* session = socket.session(); session != nullptr) {
    if ((h.flags & kFrameSealed) == 0) {
      return Status::Corrupt(socket.peer() + ": " + name +
                             " frame is not sealed on an authenticated connection");
    }
    SealMac mac{};
    GM_RETURN_IF_ERROR(socket.RecvExact(mac.data(), mac.size(), deadline, name + " frame seal"));
    if (!session->Open(std::string_view(header, sizeof header), meta_text, mac.data())) {
      return Status::Corrupt(socket.peer() + ": " + name +
                             " frame fails its MAC (injected, replayed, reordered or altered)");
    }
  } else if ((h.flags & kFrameSealed) != 0) {
    return Status::Corrupt(socket.peer() + ": " + name +
                           " frame is sealed, but no session was set up to check it");
  }
  auto meta = ParseFrameMeta(meta_text);
  if (!meta.ok()) return meta.status().WithContext(socket.peer() + ": " + name);
  frame.type = h.type;
  frame.flags = h.flags;
  frame.meta = std::move(*meta);
  frame.payload.clear();                 // keeps the capacity of a recycled frame
  frame.payload.reserve(h.payload_len);  // address space only until written
  while (frame.payload.size() < h.payload_len) {
    size_t at = frame.payload.size();
    size_t step = std::min<uint64_t>(kRecvChunkBytes, h.payload_len - at);
    frame.payload.resize(at + step);
    GM_RETURN_IF_ERROR(
        socket.RecvExact(frame.payload.data() + at, step, deadline, name + " frame payload"));
  }
  return Status::Ok();
}

Result<Frame> RecvFrame(Socket& socket, const FrameLimits& limits, Deadline deadline) {
  Frame frame;
  GM_RETURN_IF_ERROR(RecvFrameInto(socket, limits, deadline, frame));
  return frame;
}

// ---- BATCH ----

namespace {

std::string_view LayoutName(Layout layout) {
  switch (layout) {
    case Layout::kNone:
      return "none";
    case Layout::kHWC:
      return "HWC";
    case Layout::kCHW:
      return "CHW";
  }
  return "none";
}

Status BatchError(std::string_view what) {
  return Status::Corrupt("BATCH frame meta: " + std::string(what));
}

// A non-negative integer, however it was built (parsed JSON has unsigned ones).
bool IsU64(const nlohmann::json& j) {
  return j.is_number_unsigned() || (j.is_number_integer() && j.get<int64_t>() >= 0);
}

bool IsString(const nlohmann::json& j) { return j.is_string(); }

Result<uint64_t> GetU64(const nlohmann::json& meta, const char* key) {
  auto it = meta.find(key);
  if (it == meta.end()) return BatchError("missing \"" + std::string(key) + "\"");
  if (!IsU64(*it)) return BatchError("\"" + std::string(key) + "\" must be a non-negative integer");
  return it->get<uint64_t>();
}

Result<std::string> GetString(const nlohmann::json& meta, const char* key) {
  auto it = meta.find(key);
  if (it == meta.end() || !it->is_string()) {
    return BatchError("\"" + std::string(key) + "\" must be a string");
  }
  return it->get<std::string>();
}

// An array member of `n` elements, each passing `is_kind`.
Result<const nlohmann::json*> GetArray(const nlohmann::json& meta, const char* key, uint64_t n,
                                       bool (*is_kind)(const nlohmann::json&),
                                       std::string_view kind) {
  auto it = meta.find(key);
  if (it == meta.end() || !it->is_array()) {
    return BatchError("\"" + std::string(key) + "\" must be an array");
  }
  if (it->size() != n) {
    return BatchError("\"" + std::string(key) + "\" has " + std::to_string(it->size()) +
                      " elements but n is " + std::to_string(n));
  }
  for (const auto& e : *it) {
    if (!is_kind(e))
      return BatchError("\"" + std::string(key) + "\" must hold " + std::string(kind));
  }
  return &*it;
}

Result<DType> ParseDType(const std::string& name) {
  for (DType d : {DType::kUInt8, DType::kInt32, DType::kInt64, DType::kFloat32}) {
    if (DTypeName(d) == name) return d;
  }
  return BatchError("unknown dtype \"" + name + "\"");
}

Result<Layout> ParseLayout(const std::string& name) {
  for (Layout l : {Layout::kNone, Layout::kHWC, Layout::kCHW}) {
    if (LayoutName(l) == name) return l;
  }
  return BatchError("unknown layout \"" + name + "\"");
}

// Shape of the data tensor: [] only for an empty batch, else [n, ...]; returns
// the byte count it implies, or Corrupt on overflow.
Result<uint64_t> ParseShape(const nlohmann::json& meta, uint64_t n, DType dtype,
                            std::vector<int64_t>& shape) {
  auto it = meta.find("shape");
  if (it == meta.end() || !it->is_array()) return BatchError("\"shape\" must be an array");
  if (it->size() > kMaxBatchDims) {
    return BatchError("\"shape\" has more than " + std::to_string(kMaxBatchDims) + " dimensions");
  }
  // The product of the non-zero dimensions must fit in int64 too: code that
  // strides over a tensor multiplies dimensions without looking for a zero, so
  // [1, 0, 2^40, 2^40] (0 bytes) would still wrap there.
  uint64_t elements = it->empty() ? 0 : 1;
  uint64_t nonzero = 1;
  for (const auto& d : *it) {
    if (!IsU64(d) || d.get<uint64_t>() > uint64_t{INT64_MAX}) {
      return BatchError("\"shape\" must hold non-negative integers");
    }
    uint64_t dim = d.get<uint64_t>();
    if (dim != 0 && nonzero > uint64_t{INT64_MAX} / dim) return BatchError("\"shape\" overflows");
    if (dim != 0) nonzero *= dim;
    elements *= dim;
    shape.push_back(static_cast<int64_t>(dim));
  }
  if (shape.empty() ? n != 0 : static_cast<uint64_t>(shape[0]) != n) {
    return BatchError("\"shape\" " + ShapeString(shape) +
                      " does not start with n = " + std::to_string(n));
  }
  if (elements > UINT64_MAX / DTypeSize(dtype)) return BatchError("\"shape\" overflows");
  return elements * DTypeSize(dtype);
}

// Everything but the tensors' bytes; checks that the sizes agree with `payload_size`.
Result<Batch> DecodeBatchFields(const Frame& frame, const Batch::External* external = nullptr) {
  if (frame.type != MsgType::kBatch) {
    return Status::Corrupt("expected a BATCH frame, got " + std::string(MsgTypeName(frame.type)));
  }
  const nlohmann::json& m = frame.meta;
  Batch b;
  GM_ASSIGN_OR_RETURN(b.epoch, GetU64(m, "epoch"));
  GM_ASSIGN_OR_RETURN(b.index, GetU64(m, "index"));
  GM_ASSIGN_OR_RETURN(b.split, GetU64(m, "split"));
  GM_ASSIGN_OR_RETURN(b.split_batch, GetU64(m, "split_batch"));
  GM_ASSIGN_OR_RETURN(uint64_t n, GetU64(m, "n"));
  if (n > kMaxBatchSamples) {  // also keeps n * 8 (the labels' bytes) from wrapping
    return BatchError("\"n\" is " + std::to_string(n) + ", more than " +
                      std::to_string(kMaxBatchSamples) + " samples");
  }
  GM_ASSIGN_OR_RETURN(std::string dtype_name, GetString(m, "dtype"));
  GM_ASSIGN_OR_RETURN(b.data.dtype, ParseDType(dtype_name));
  GM_ASSIGN_OR_RETURN(std::string layout_name, GetString(m, "layout"));
  GM_ASSIGN_OR_RETURN(b.layout, ParseLayout(layout_name));
  GM_ASSIGN_OR_RETURN(uint64_t shape_bytes, ParseShape(m, n, b.data.dtype, b.data.shape));
  GM_ASSIGN_OR_RETURN(uint64_t data_bytes, GetU64(m, "data_bytes"));
  GM_ASSIGN_OR_RETURN(uint64_t labels_bytes, GetU64(m, "labels_bytes"));
  if (data_bytes != shape_bytes) {
    return BatchError("\"data_bytes\" is " + std::to_string(data_bytes) + " but " + dtype_name +
                      " " + ShapeString(b.data.shape) + " needs " + std::to_string(shape_bytes));
  }
  GM_ASSIGN_OR_RETURN(const nlohmann::json* keys, GetArray(m, "keys", n, IsString, "strings"));
  GM_ASSIGN_OR_RETURN(const nlohmann::json* indices,
                      GetArray(m, "sample_indices", n, IsU64, "non-negative integers"));
  if (labels_bytes != n * 8) {
    return BatchError("\"labels_bytes\" is " + std::to_string(labels_bytes) +
                      ", expected n * 8 = " + std::to_string(n * 8));
  }
  const uint64_t inline_bytes = external == nullptr ? data_bytes : 0;
  if (inline_bytes + labels_bytes != frame.payload.size()) {
    return BatchError((external == nullptr ? "data_bytes + labels_bytes = " : "labels_bytes = ") +
                      std::to_string(inline_bytes + labels_bytes) + " but the payload has " +
                      std::to_string(frame.payload.size()) + " bytes");
  }
  if (external != nullptr && external->size < data_bytes) {
    return BatchError("\"data_bytes\" is " + std::to_string(data_bytes) + " but its segment has " +
                      std::to_string(external->size));
  }
  for (const auto& k : *keys) b.keys.push_back(k.get<std::string>());
  for (const auto& i : *indices) b.sample_indices.push_back(i.get<uint64_t>());
  if (n > 0) b.labels.Reset(DType::kInt64, {static_cast<int64_t>(n)});
  if (labels_bytes > 0) {
    std::memcpy(b.labels.bytes.data(), frame.payload.data() + inline_bytes, labels_bytes);
  }
  if (external != nullptr)
    b.external = Batch::External{external->data, data_bytes, external->owner};
  return b;
}

}  // namespace

nlohmann::json EncodeBatchMeta(const Batch& batch) {
  nlohmann::json keys = nlohmann::json::array();
  for (const auto& k : batch.keys) keys.push_back(k);
  return {{"epoch", batch.epoch},
          {"index", batch.index},
          {"split", batch.split},
          {"split_batch", batch.split_batch},
          {"dtype", DTypeName(batch.data.dtype)},
          {"shape", batch.data.shape},
          {"layout", LayoutName(batch.layout)},
          {"n", batch.keys.size()},
          {"keys", std::move(keys)},
          {"sample_indices", batch.sample_indices},
          {"data_bytes", batch.data_size()},
          {"labels_bytes", batch.labels.bytes.size()}};
}

std::array<iovec, 2> BatchPayload(const Batch& batch) {
  // iovec points at const data only for sending; sendmsg never writes through it.
  return {iovec{const_cast<uint8_t*>(batch.data_ptr()), batch.data_size()},
          iovec{const_cast<uint8_t*>(batch.labels.bytes.data()), batch.labels.bytes.size()}};
}

Status CheckBatch(const Batch& batch) {
  const size_t n = batch.keys.size();
  const std::string where =
      "batch " + std::to_string(batch.index) + " of epoch " + std::to_string(batch.epoch) + ": ";
  const auto& shape = batch.data.shape;
  if (shape.empty() ? n != 0 : static_cast<size_t>(shape[0]) != n) {
    return Status::InvalidArgument(where + "data shape " + ShapeString(shape) +
                                   " does not start with the " + std::to_string(n) + " keys");
  }
  for (int64_t d : shape) {
    if (d < 0)
      return Status::InvalidArgument(where + "negative dimension in " + ShapeString(shape));
  }
  if (batch.data_size() != batch.data.num_elements() * DTypeSize(batch.data.dtype)) {
    return Status::InvalidArgument(where + "data holds " + std::to_string(batch.data_size()) +
                                   " bytes, which does not match its shape " + ShapeString(shape));
  }
  if (batch.labels.bytes.size() != n * 8 || (n > 0 && batch.labels.dtype != DType::kInt64)) {
    return Status::InvalidArgument(where + "labels must be " + std::to_string(n) + " int64 values");
  }
  if (batch.sample_indices.size() != n) {
    return Status::InvalidArgument(where + std::to_string(batch.sample_indices.size()) +
                                   " sample indices for " + std::to_string(n) + " keys");
  }
  return Status::Ok();
}

Status SendBatch(Socket& socket, const Batch& batch, Deadline deadline) {
  GM_RETURN_IF_ERROR(CheckBatch(batch));
  auto payload = BatchPayload(batch);
  return SendFrame(socket, MsgType::kBatch, EncodeBatchMeta(batch), payload, deadline);
}

void BatchMeta::AddTo(nlohmann::json& meta) const {
  meta["rank"] = rank;
  if (split_batches) meta["split_batches"] = *split_batches;
  if (shm) meta["shm"] = {{"id", shm->id}, {"fd", shm->fd}};
}

Result<BatchMeta> BatchMeta::Decode(const nlohmann::json& meta) {
  BatchMeta m;
  auto rank = meta.find("rank");
  if (rank == meta.end() || !IsU64(*rank) || rank->get<uint64_t>() > 65535)
    return BatchError("\"rank\" must be an integer from 0 to 65535");
  m.rank = rank->get<int64_t>();
  if (auto count = meta.find("split_batches"); count != meta.end()) {
    if (!IsU64(*count) || count->get<uint64_t>() < 1 || count->get<uint64_t>() > kMaxSplitBatches)
      return BatchError("\"split_batches\" must be an integer from 1 to " +
                        std::to_string(kMaxSplitBatches));
    m.split_batches = count->get<uint64_t>();
  }
  if (auto shm = meta.find("shm"); shm != meta.end()) {
    const auto id = shm->is_object() ? shm->find("id") : shm->end();
    const auto fd = shm->is_object() ? shm->find("fd") : shm->end();
    if (id == shm->end() || !IsU64(*id) || id->get<uint64_t>() >= kMaxSegments ||
        fd == shm->end() || !fd->is_boolean()) {
      return BatchError("\"shm\" must be {\"id\": 0.." + std::to_string(kMaxSegments - 1) +
                        ", \"fd\": true|false}");
    }
    m.shm = Segment{id->get<uint64_t>(), fd->get<bool>()};
  }
  return m;
}

Result<Batch> DecodeBatch(const Frame& frame) {
  GM_ASSIGN_OR_RETURN(Batch b, DecodeBatchFields(frame));
  const size_t data_bytes = frame.payload.size() - b.labels.bytes.size();
  b.data.bytes.assign(frame.payload.begin(), frame.payload.begin() + data_bytes);
  return b;
}

Result<Batch> DecodeBatch(const Frame& frame, const Batch::External& external) {
  return DecodeBatchFields(frame, &external);
}

Result<Batch> DecodeBatch(Frame&& frame) {
  GM_ASSIGN_OR_RETURN(Batch b, DecodeBatchFields(frame));
  const size_t data_bytes = frame.payload.size() - b.labels.bytes.size();
  b.data.bytes = std::move(frame.payload);
  b.data.bytes.resize(data_bytes);  // drops the labels' tail; no reallocation
  return b;
}

}  // namespace gm
