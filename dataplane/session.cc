#include "dataplane/session.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <string>

namespace gm {
namespace {

SealMac Hmac(std::string_view key, std::string_view message) {
  SealMac out{};
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(message.data()), message.size(), out.data(), &len);
  return out;
}

std::string_view View(const SealMac& mac) {
  return {reinterpret_cast<const char*>(mac.data()), mac.size()};
}

SealMac FrameMac(const SealMac& key, uint64_t seq, std::string_view header, std::string_view meta) {
  std::string message;
  message.reserve(8 + header.size() + meta.size());
  for (int i = 0; i < 8; ++i) message.push_back(static_cast<char>((seq >> (8 * i)) & 0xff));
  message.append(header);
  message.append(meta);
  return Hmac(View(key), message);
}

}  // namespace

FrameSession::FrameSession(std::string_view key, std::string_view nonce,
                           std::string_view client_nonce, bool is_server) {
  const SealMac session =
      Hmac(key, "goldminer-session-v2|" + std::string(nonce) + "|" + std::string(client_nonce));
  const SealMac to_server = Hmac(View(session), "client-to-server");
  const SealMac to_client = Hmac(View(session), "server-to-client");
  send_key_ = is_server ? to_client : to_server;
  recv_key_ = is_server ? to_server : to_client;
}

SealMac FrameSession::Seal(std::string_view header, std::string_view meta) {
  return FrameMac(send_key_, send_seq_++, header, meta);
}

bool FrameSession::Open(std::string_view header, std::string_view meta, const unsigned char* mac) {
  const SealMac want = FrameMac(recv_key_, recv_seq_++, header, meta);
  return CRYPTO_memcmp(want.data(), mac, kSealBytes) == 0;
}

}  // namespace gm
