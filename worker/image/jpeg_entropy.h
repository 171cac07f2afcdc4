// A faster Huffman (entropy) decoder for baseline JPEG scans, installed into
// libjpeg-turbo in place of its own.
//
// libjpeg-turbo's Huffman decoding is about half the time of the whole ImageNet
// pipeline on one core. This decoder produces exactly the same DCT coefficients
// (Huffman coding is lossless, so the pixels are bit-identical) with fewer steps
// per coefficient:
//   - one table lookup of kJpegLookBits bits gives the code's length, the run of
//     zeros and, when the value's extra bits fit in the same window, the value
//     itself (libjpeg looks up the symbol, then reads and sign-extends the value);
//   - the bit buffer is refilled 7 bytes at a time when none of the next 8 bytes
//     is 0xFF (no byte stuffing or marker to handle).
// Everything rare goes through libjpeg's own code, so errors are the same:
// restart markers (libjpeg reads and checks them), running out of data (its
// source manager reports it), and reaching a marker inside the scan. Codes
// longer than the window are decoded from the canonical tables, as libjpeg does.
// It is stricter than libjpeg-turbo on three kinds of corrupt data, which it
// reports (as libjpeg warnings) where libjpeg may decode on without a word:
//   - an invalid Huffman code (libjpeg's fast path decodes it as a zero);
//   - bytes skipped before a restart marker (libjpeg reports them only when it
//     looks for a later marker itself, which depends on how far it had read);
//   - FF FF .. 00 in the scan data (libjpeg takes it for a data byte FF, but its
//     fast path keeps coefficients of a first, wrong, try at the block).
// The warning for the last one is this decoder's own message, installed as the
// error manager's add-on message table.
//
// Used only for single-scan, 8-bit, sequential Huffman images (what cameras and
// PIL write); progressive and arithmetic-coded images keep libjpeg's decoder.
// libjpeg calls the decoder through cinfo->entropy, the hook its own decoders
// use (jpegint.h, installed by libjpeg-turbo's -dev package).
#pragma once

#include <memory>

struct jpeg_decompress_struct;  // jpeglib.h

namespace gm {

// Which entropy decoder JPEG decodes use. kFast unless the environment variable
// GOLDMINER_JPEG_ENTROPY is "libjpeg" (read once per process); tests and
// benchmarks set it directly. kFastPortable is kFast without the BMI2 build,
// which kFast uses where the CPU has BMI2 (tests run both).
enum class JpegEntropy { kFast, kLibjpeg, kFastPortable };
JpegEntropy GetJpegEntropy();
void SetJpegEntropy(JpegEntropy which);

// Bits looked up at once. 2^10 entries of 4 bytes per table.
inline constexpr int kJpegLookBits = 10;

// The decoder's state; its first member is libjpeg's jpeg_entropy_decoder.
struct FastEntropyDecoder;
struct FastEntropyDeleter {
  void operator()(FastEntropyDecoder* d) const;
};
using FastEntropyPtr = std::unique_ptr<FastEntropyDecoder, FastEntropyDeleter>;

// After jpeg_start_decompress() and before the first scanline is read: when the
// scan is one this decoder handles (see above) and GetJpegEntropy() is kFast,
// points cinfo->entropy at a new decoder (returned; it must outlive the
// decompressor's use) and returns it; otherwise returns null and libjpeg's
// decoder stays.
FastEntropyPtr InstallFastEntropyDecoder(jpeg_decompress_struct* cinfo);

}  // namespace gm
