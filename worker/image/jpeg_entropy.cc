#include "worker/image/jpeg_entropy.h"

#include <jpeglib.h>

#include <cstddef>
#include <cstdio>  // jpeglib.h needs FILE and size_t first
// jpegint.h and jerror.h after jpeglib.h: they use its types.
#include <jerror.h>
#include <jpegint.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace gm {
namespace {

constexpr int kLook = kJpegLookBits;

std::atomic<int> g_entropy{-1};  // -1: not read from the environment yet

// Messages of this decoder's own, in libjpeg's add-on message table.
constexpr int kFirstMessage = 1000;
constexpr int kMsgFillBeforeStuffedZero = kFirstMessage;
const char* const kMessages[] = {
    "Corrupt JPEG data: fill bytes (FF FF) before a stuffed zero in the scan data",
    nullptr,
};

// Zigzag position -> natural (row-major) position, with 64 extra entries that
// all say 63. Corrupt data can push the position past 63 (a run longer than
// what is left of the block); libjpeg then writes coefficient 63, as these
// entries do. The decoder below also writes a zero at the position an end of
// block or a run of 16 zeros points to (up to 63 + 63), which changes nothing:
// that position is past every one written before in the block.
constexpr uint8_t kNaturalOrder[128] = {
    0,  1,  8,  16, 9,  2,  3,  10, 17, 24, 32, 25, 18, 11, 4,  5,  12, 19, 26, 33, 40, 48,
    41, 34, 27, 20, 13, 6,  7,  14, 21, 28, 35, 42, 49, 56, 57, 50, 43, 36, 29, 22, 15, 23,
    30, 37, 44, 51, 58, 59, 52, 45, 38, 31, 39, 46, 53, 60, 61, 54, 47, 55, 62, 63, 63, 63,
    63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63,
    63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63,
    63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63};

// A lookup entry (kLook bits of the stream -> what they start with), laid out
// so that the common case takes few instructions:
//   bits 0-5   bits to consume (the code, plus the value's bits when they fit)
//   bit 6      kNeedsBits: the value's bits are still to be read; its size is in
//              bits 16-19 instead of the value
//   bit 7      kLongCode: the code is longer than kLook bits (decode canonically)
//   bits 8-15  how far the coefficient position moves: run + 1 for a value, 16
//              for a run of 16 zeros, 64 for end of block (ends the block)
//   bits 16-31 the value, sign-extended (0 for a symbol of size 0)
// DC tables use the same entries; only the value counts there.
constexpr uint32_t kNeedsBits = 1u << 6;
constexpr uint32_t kLongCode = 1u << 7;
constexpr uint32_t kSlowFlags = kNeedsBits | kLongCode;

struct Table {
  uint32_t fast[1 << kLook];
  int32_t maxcode[18];    // largest code of each length; -1: none of that length
  int32_t valoffset[18];  // code + valoffset[l] = index of its symbol in huffval
  uint8_t huffval[256];
};

// How far an AC symbol moves the coefficient position.
inline uint32_t Advance(int run, int size) {
  if (size != 0) return static_cast<uint32_t>(run + 1);
  return run == 15 ? 16 : 64;
}

inline int Extend(uint32_t bits, int size) {
  // JPEG's sign convention (F.2.2.1): a value whose top bit is 0 is negative.
  int v = static_cast<int>(bits);
  return v < (1 << (size - 1)) ? v - (1 << size) + 1 : v;
}

// Builds `t` from a table libjpeg already validated (start_pass_huff_decoder
// rejects code sets that overflow and DC symbols over 15). Returns false if
// the table is still one this decoder cannot use.
bool BuildTable(const JHUFF_TBL& h, Table* t) {
  for (uint32_t& e : t->fast) e = kLongCode;
  int p = 0;
  uint32_t code = 0;
  for (int l = 1; l <= 16; ++l) {
    int n = h.bits[l];
    if (p + n > 256) return false;
    if (n == 0) {
      t->maxcode[l] = -1;
      t->valoffset[l] = 0;
    } else {
      t->valoffset[l] = p - static_cast<int32_t>(code);
      for (int i = 0; i < n; ++i, ++p, ++code) {
        if (code >= (1u << l)) return false;
        if (l > kLook) continue;
        const int rs = h.huffval[p];
        const int run = rs >> 4, size = rs & 15;
        const int spare = kLook - l;  // window bits after the code
        const uint32_t base = code << spare;
        for (uint32_t fill = 0; fill < (1u << spare); ++fill) {
          uint32_t e = Advance(run, size) << 8;
          if (size == 0) {
            e |= static_cast<uint32_t>(l);
          } else if (size <= spare) {
            int v = Extend(fill >> (spare - size), size);
            e |= static_cast<uint32_t>(l + size) | static_cast<uint32_t>(static_cast<uint16_t>(v))
                                                       << 16;
          } else {
            e |= static_cast<uint32_t>(l) | kNeedsBits | static_cast<uint32_t>(size) << 16;
          }
          t->fast[base | fill] = e;
        }
      }
      t->maxcode[l] = static_cast<int32_t>(code) - 1;
    }
    code <<= 1;
  }
  t->maxcode[17] = 0x7FFFFFFF;  // ends the canonical search (libjpeg's sentinel)
  t->valoffset[17] = 0;
  std::memcpy(t->huffval, h.huffval, sizeof(t->huffval));
  return true;
}

// Tables are built once per thread for each distinct JPEG table: most files
// of a data set carry the same ones (encoders' standard tables).
struct CachedTable {
  uint8_t bits[17] = {};
  uint8_t huffval[256] = {};
  std::shared_ptr<const Table> table;
};
constexpr int kCachedTables = 8;
thread_local CachedTable t_cache[kCachedTables];
thread_local int t_cache_next = 0;

std::shared_ptr<const Table> GetTable(const JHUFF_TBL& h) {
  for (const CachedTable& c : t_cache) {
    if (c.table != nullptr && std::memcmp(c.bits, h.bits, sizeof(c.bits)) == 0 &&
        std::memcmp(c.huffval, h.huffval, sizeof(c.huffval)) == 0) {
      return c.table;
    }
  }
  auto t = std::make_shared<Table>();
  if (!BuildTable(h, t.get())) return nullptr;
  CachedTable& c = t_cache[t_cache_next];
  t_cache_next = (t_cache_next + 1) % kCachedTables;
  std::memcpy(c.bits, h.bits, sizeof(c.bits));
  std::memcpy(c.huffval, h.huffval, sizeof(c.huffval));
  c.table = t;
  return t;
}

}  // namespace

struct FastEntropyDecoder {
  jpeg_entropy_decoder pub;  // first: libjpeg sees this decoder through cinfo->entropy
  j_decompress_ptr cinfo = nullptr;
  // The bit buffer: `count` valid bits at the top of `buf` (bits below may hold
  // the next bytes already, or zeros after a marker). count < 0 means bits past
  // a marker were used: corrupt data.
  uint64_t buf = 0;
  int count = 0;
  const uint8_t* next = nullptr;  // first byte not yet in buf
  const uint8_t* end = nullptr;
  bool at_marker = false;  // reached a marker: no more bytes until libjpeg reads it
  // The fast refill reads 8 bytes at `next` while next <= fast_limit: end - 8,
  // or 0 at a marker.
  uintptr_t fast_limit = 0;
  unsigned restarts_to_go = 0;
  int last_dc[MAX_COMPS_IN_SCAN] = {};
  // Per block of the MCU.
  const Table* dc_table[D_MAX_BLOCKS_IN_MCU] = {};
  const Table* ac_table[D_MAX_BLOCKS_IN_MCU] = {};
  int component[D_MAX_BLOCKS_IN_MCU] = {};
  bool dc_needed[D_MAX_BLOCKS_IN_MCU] = {};
  bool ac_needed[D_MAX_BLOCKS_IN_MCU] = {};
  // [0]: DC, [1]: AC; only those the scan uses are set. Shared with the thread's cache.
  std::shared_ptr<const Table> tables[2][NUM_HUFF_TBLS];
};

void FastEntropyDeleter::operator()(FastEntropyDecoder* d) const { delete d; }

namespace {

// Hands the read position back to libjpeg's source manager, which reads the
// markers after the scan and at restarts.
inline void SyncSource(FastEntropyDecoder* d) {
  jpeg_source_mgr* src = d->cinfo->src;
  src->next_input_byte = d->next;
  src->bytes_in_buffer = static_cast<size_t>(d->end - d->next);
}

inline void SetFastLimit(FastEntropyDecoder* d) {
  const auto end = reinterpret_cast<uintptr_t>(d->end);
  d->fast_limit = d->at_marker || end - reinterpret_cast<uintptr_t>(d->next) < 8 ? 0 : end - 8;
}

// Fills d's buffer byte by byte to more than 56 bits, undoing byte stuffing
// (FF 00 is a data byte FF), up to a marker (FF, any more FF fill bytes, then
// the marker's code): then, as libjpeg does, the marker is consumed, left in
// cinfo->unread_marker, and zeros follow in the buffer.
[[gnu::noinline]] void RefillSlow(FastEntropyDecoder* d) {
  if (d->at_marker) return;
  uint64_t buf = d->count > 0 ? d->buf & ~(~uint64_t{0} >> d->count) : 0;  // drop peeked bytes
  int count = d->count;
  j_decompress_ptr cinfo = d->cinfo;
  auto next_byte = [&]() -> int {
    if (d->next == d->end) {
      // Out of data: libjpeg's source manager reports it (a warning, which the
      // caller's error manager makes an error) and supplies a fake marker.
      SyncSource(d);
      if (!(*cinfo->src->fill_input_buffer)(cinfo)) ERREXIT(cinfo, JERR_INPUT_EOF);
      d->next = cinfo->src->next_input_byte;
      d->end = d->next + cinfo->src->bytes_in_buffer;
    }
    return *d->next++;
  };
  while (count <= 56) {
    int c = next_byte();
    if (c == 0xFF) {
      int after = 0;
      do {
        c = next_byte();
        ++after;
      } while (c == 0xFF);
      if (c == 0) {
        // FF 00 is a data byte FF. libjpeg also takes FF FF .. 00 for one, but
        // only on its careful path: its fast path takes the second FF for a
        // marker, decodes the block again carefully, and keeps coefficients
        // of the first try. The standard allows FF fill bytes only before a
        // marker, so this is corrupt data.
        if (after > 1) WARNMS(cinfo, kMsgFillBeforeStuffedZero);
        c = 0xFF;
      } else {
        cinfo->unread_marker = c;
        d->at_marker = true;
        break;
      }
    }
    buf |= static_cast<uint64_t>(c) << (56 - count);
    count += 8;
  }
  d->buf = buf;
  d->count = count;
  SetFastLimit(d);
}

inline bool HasFFByte(uint64_t v) {
  uint64_t x = ~v;  // an FF byte of v is a zero byte of x
  return ((x - 0x0101010101010101ull) & ~x & 0x8080808080808080ull) != 0;
}

// A code longer than kLook bits, decoded from the canonical tables (F.2.2.3)
// with d's buffer. Returns its symbol and consumes it.
[[gnu::noinline]] int DecodeLong(FastEntropyDecoder* d, const Table* t) {
  int l = kLook + 1;
  uint32_t code = static_cast<uint32_t>(d->buf >> (64 - l));
  while (l <= 16 && static_cast<int32_t>(code) > t->maxcode[l]) {
    ++l;
    code = static_cast<uint32_t>(d->buf >> (64 - l));
  }
  if (l > 16) {
    // No such code: libjpeg warns (an error here) and would decode a zero.
    WARNMS(d->cinfo, JWRN_HUFF_BAD_CODE);
    l = 16;
    code = 0;
  }
  d->buf <<= l;
  d->count -= l;
  return t->huffval[(static_cast<int32_t>(code) + t->valoffset[l]) & 0xFF];
}

// Consumes, from d's buffer, a symbol whose code is longer than kLook bits, and
// its value; returns the lookup entry it would have had (without the length).
[[gnu::noinline]] uint32_t DecodeLongSymbol(FastEntropyDecoder* d, const Table* t) {
  const int rs = DecodeLong(d, t);
  const int run = rs >> 4, size = rs & 15;
  int v = 0;
  if (size != 0) {
    v = Extend(static_cast<uint32_t>(d->buf >> (64 - size)), size);
    d->buf <<= size;
    d->count -= size;
  }
  return Advance(run, size) << 8 | static_cast<uint32_t>(static_cast<uint16_t>(v)) << 16;
}

// The bit buffer of one decode_mcu call, in registers; spilled to the decoder
// around the rare out-of-line paths.
struct Bits {
  FastEntropyDecoder* d;
  uint64_t buf;
  int count;
  const uint8_t* next;
  uintptr_t limit;

  explicit Bits(FastEntropyDecoder* dec) : d(dec) { Load(); }
  void Spill() const {
    d->buf = buf;
    d->count = count;
    d->next = next;
  }
  void Load() {
    buf = d->buf;
    count = d->count;
    next = d->next;
    limit = d->fast_limit;
  }

  // Ensures at least 32 valid bits, unless a marker ends the data first.
  inline void Refill() {
    if (count >= 32) return;
    if (reinterpret_cast<uintptr_t>(next) <= limit) [[likely]] {
      uint64_t v;
      std::memcpy(&v, next, 8);
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
      v = __builtin_bswap64(v);  // the stream's first byte to the top
#endif
      if (!HasFFByte(v)) [[likely]] {
        buf |= v >> count;
        next += (63 - count) >> 3;
        count |= 56;
        return;
      }
    }
    Spill();
    RefillSlow(d);
    Load();
  }

  // The entry for the next symbol. Needs 31 valid bits (Refill first).
  inline uint32_t Peek(const Table* t) const { return t->fast[buf >> (64 - kLook)]; }

  // Decodes one symbol and its value; returns its entry without the length.
  inline uint32_t Decode(const Table* t) {
    uint32_t e = Peek(t);
    if (e & kSlowFlags) [[unlikely]] {
      if (e & kLongCode) {
        Spill();
        e = DecodeLongSymbol(d, t);
        Load();
        return e;
      }
      // The code was in the window, its value's bits not all: read them.
      buf <<= e & 63;
      count -= static_cast<int>(e & 63);
      const int size = static_cast<int>(e >> 16) & 15;
      const int v = Extend(static_cast<uint32_t>(buf >> (64 - size)), size);
      buf <<= size;
      count -= size;
      return (e & 0xFF00) | static_cast<uint32_t>(static_cast<uint16_t>(v)) << 16;
    }
    buf <<= e & 63;
    count -= static_cast<int>(e & 63);
    return e;
  }
};

// Restart marker: like libjpeg's process_restart (jdhuff.c), which this
// mirrors: whole bytes left in the buffer count as skipped data, then libjpeg's
// marker reader finds and checks RSTn.
bool ProcessRestart(FastEntropyDecoder* d) {
  j_decompress_ptr cinfo = d->cinfo;
  if (d->count > 0) cinfo->marker->discarded_bytes += static_cast<unsigned>(d->count / 8);
  d->buf = 0;
  d->count = 0;
  SyncSource(d);
  if (cinfo->unread_marker != 0 && cinfo->marker->discarded_bytes != 0) {
    // The bytes were read up to the marker already, so libjpeg's marker reader
    // will not look for it and would report the skipped bytes only at the next
    // marker it looks for, if any; they are reported here, at this marker.
    WARNMS2(cinfo, JWRN_EXTRANEOUS_DATA, cinfo->marker->discarded_bytes, cinfo->unread_marker);
  }
  if (!(*cinfo->marker->read_restart_marker)(cinfo)) return false;
  d->next = cinfo->src->next_input_byte;
  d->end = d->next + cinfo->src->bytes_in_buffer;
  d->at_marker = cinfo->unread_marker != 0;
  SetFastLimit(d);
  for (int& dc : d->last_dc) dc = 0;
  d->restarts_to_go = cinfo->restart_interval;
  return true;
}

// One MCU (libjpeg's decode_mcu): compiled twice, for any x86-64 and with
// BMI2's shifts by a register (one instruction where plain x86 needs three).
[[gnu::always_inline]] inline boolean DecodeMcuBody(j_decompress_ptr cinfo, JBLOCKROW* mcu) {
  auto* d = reinterpret_cast<FastEntropyDecoder*>(cinfo->entropy);
  if (cinfo->restart_interval != 0 && d->restarts_to_go == 0 && !ProcessRestart(d)) {
    return FALSE;
  }
  Bits bits(d);
  JBLOCK discard;  // where the coefficients of blocks libjpeg does not want go
  for (int b = 0; b < cinfo->blocks_in_MCU; ++b) {
    JCOEF* block = mcu != nullptr ? mcu[b][0] : nullptr;
    bits.Refill();
    const int diff = static_cast<int16_t>(bits.Decode(d->dc_table[b]) >> 16);
    if (d->dc_needed[b]) {
      int ci = d->component[b];
      // Wraps like libjpeg's int arithmetic on corrupt data, without overflow.
      int dc =
          static_cast<int>(static_cast<unsigned>(diff) + static_cast<unsigned>(d->last_dc[ci]));
      d->last_dc[ci] = dc;
      if (block != nullptr) block[0] = static_cast<JCOEF>(dc);
    }
    const Table* ac = d->ac_table[b];
    JCOEF* out = block != nullptr && d->ac_needed[b] ? block : discard;
    // k: the zigzag position after the last coefficient decoded.
    for (unsigned k = 1; k < 64;) {
      bits.Refill();
      const uint32_t e = bits.Decode(ac);
      k += (e >> 8) & 0xFF;
      out[kNaturalOrder[k - 1]] = static_cast<JCOEF>(e >> 16);
    }
  }
  bits.Spill();
  const int count = d->count;
  SyncSource(d);
  // Bits past a marker were used (libjpeg's "premature end of data segment").
  if (count < 0) WARNMS(cinfo, JWRN_HIT_MARKER);
  if (cinfo->restart_interval != 0) --d->restarts_to_go;
  return TRUE;
}

boolean DecodeMcu(j_decompress_ptr cinfo, JBLOCKROW* mcu) { return DecodeMcuBody(cinfo, mcu); }

#if defined(__x86_64__)
[[gnu::target("bmi2")]] boolean DecodeMcuBmi2(j_decompress_ptr cinfo, JBLOCKROW* mcu) {
  return DecodeMcuBody(cinfo, mcu);
}
#endif

void StartPass(j_decompress_ptr cinfo) {
  // Single-scan images only: a second scan is an error libjpeg reports before
  // it would start one.
  ERREXIT(cinfo, JERR_NOT_COMPILED);
}

}  // namespace

JpegEntropy GetJpegEntropy() {
  int v = g_entropy.load(std::memory_order_relaxed);
  if (v < 0) {
    const char* env = std::getenv("GOLDMINER_JPEG_ENTROPY");
    v = static_cast<int>(env != nullptr && std::strcmp(env, "libjpeg") == 0 ? JpegEntropy::kLibjpeg
                                                                            : JpegEntropy::kFast);
    g_entropy.store(v, std::memory_order_relaxed);
  }
  return static_cast<JpegEntropy>(v);
}

void SetJpegEntropy(JpegEntropy which) {
  g_entropy.store(static_cast<int>(which), std::memory_order_relaxed);
}

FastEntropyPtr InstallFastEntropyDecoder(jpeg_decompress_struct* cinfo) {
  const JpegEntropy which = GetJpegEntropy();
  if (which == JpegEntropy::kLibjpeg) return nullptr;
  if (cinfo->progressive_mode || cinfo->arith_code || cinfo->data_precision != 8 ||
      cinfo->comps_in_scan != cinfo->num_components || cinfo->Ss != 0 ||
      cinfo->Se != DCTSIZE2 - 1 || cinfo->Ah != 0 || cinfo->Al != 0 ||
      cinfo->blocks_in_MCU > D_MAX_BLOCKS_IN_MCU || cinfo->unread_marker != 0 ||
      cinfo->output_scanline != 0) {
    return nullptr;
  }
  jpeg_error_mgr* err = cinfo->err;
  if (err->addon_message_table != nullptr && err->addon_message_table != kMessages) {
    return nullptr;  // the caller's own messages use the table
  }
  err->addon_message_table = kMessages;
  err->first_addon_message = kFirstMessage;
  err->last_addon_message = kFirstMessage;
  FastEntropyPtr d(new FastEntropyDecoder);
  for (int ci = 0; ci < cinfo->comps_in_scan; ++ci) {
    const jpeg_component_info* comp = cinfo->cur_comp_info[ci];
    const int no[2] = {comp->dc_tbl_no, comp->ac_tbl_no};
    JHUFF_TBL* const* src[2] = {cinfo->dc_huff_tbl_ptrs, cinfo->ac_huff_tbl_ptrs};
    for (int kind = 0; kind < 2; ++kind) {
      if (no[kind] < 0 || no[kind] >= NUM_HUFF_TBLS || src[kind][no[kind]] == nullptr) {
        return nullptr;
      }
      std::shared_ptr<const Table>& t = d->tables[kind][no[kind]];
      if (t == nullptr) {
        t = GetTable(*src[kind][no[kind]]);
        if (t == nullptr) return nullptr;
      }
    }
  }
  for (int b = 0; b < cinfo->blocks_in_MCU; ++b) {
    const int ci = cinfo->MCU_membership[b];
    const jpeg_component_info* comp = cinfo->cur_comp_info[ci];
    d->component[b] = ci;
    d->dc_table[b] = d->tables[0][comp->dc_tbl_no].get();
    d->ac_table[b] = d->tables[1][comp->ac_tbl_no].get();
    // As libjpeg: AC coefficients are not stored for a 1x1 scaled IDCT.
    d->dc_needed[b] = comp->component_needed != 0;
    d->ac_needed[b] = comp->component_needed != 0 && comp->DCT_scaled_size > 1;
  }
  d->cinfo = cinfo;
  d->next = cinfo->src->next_input_byte;
  d->end = d->next + cinfo->src->bytes_in_buffer;
  d->restarts_to_go = cinfo->restart_interval;
  SetFastLimit(d.get());
  d->pub.start_pass = StartPass;
  d->pub.decode_mcu = DecodeMcu;
#if defined(__x86_64__)
  if (which == JpegEntropy::kFast && __builtin_cpu_supports("bmi2")) {
    d->pub.decode_mcu = DecodeMcuBmi2;
  }
#endif
  d->pub.insufficient_data = FALSE;
  cinfo->entropy = &d->pub;
  return d;
}

}  // namespace gm
