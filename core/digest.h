// SHA-256 over a stream of byte ranges (OpenSSL's libcrypto), and bytes as hex.
// Sha256 is not thread-safe; the functions are.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

namespace gm {

class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(Sha256&&) noexcept;
  Sha256& operator=(Sha256&&) noexcept;

  void Update(const void* data, size_t size);
  void Update(std::string_view s) { Update(s.data(), s.size()); }
  // Lower-case hex of the digest; the object must not be used afterwards.
  std::string FinishHex();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Lower-case hex SHA-256 of `bytes`, in one call.
std::string Sha256Hex(std::string_view bytes);

// `size` bytes from `data` as lower-case hex (2 x size characters).
std::string ToHex(const unsigned char* data, size_t size);

}  // namespace gm
