// Per-connection frame authentication after the handshake (goldminer-protocol(7),
// "Sealed frames").
//
// Both ends of an authenticated connection derive, from the key the handshake
// proved and its two nonces, one key per direction:
//
//   session = HMAC-SHA256(key, "goldminer-session-v2|" + N + "|" + C)
//   client->server key = HMAC-SHA256(session, "client-to-server")
//   server->client key = HMAC-SHA256(session, "server-to-client")
//
// Every later frame is sealed: its header has kFrameSealed set and kSealBytes of
// MAC follow the meta (before the payload):
//
//   mac = HMAC-SHA256(direction key, seq as u64 little-endian || header || meta)
//
// where seq counts the frames sent in that direction from 0. The sequence number
// is never sent: a frame injected, replayed, dropped or reordered breaks the MAC
// of the one that follows, and the receiver closes the connection. The payload
// (only BATCH has one) is not covered: its length is, and its bytes are left to
// TCP (reason and measurements in goldminer-protocol(7)).
//
// Thread-safety: Seal is called by the one sending thread and Open by the one
// receiving thread of a Socket; the two share only the immutable keys.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

namespace gm {

inline constexpr size_t kSealBytes = 32;
using SealMac = std::array<unsigned char, kSealBytes>;

class FrameSession {
 public:
  // `key`: the key both sides proved in the handshake; `nonce` and
  // `client_nonce`: the handshake's server and client nonces; `is_server`: which
  // end this is.
  FrameSession(std::string_view key, std::string_view nonce, std::string_view client_nonce,
               bool is_server);

  // The MAC of the next frame this end sends; advances the send sequence.
  SealMac Seal(std::string_view header, std::string_view meta);
  // True when `mac` is the MAC of the next frame from the peer (compared in
  // constant time); advances the receive sequence either way (a failure ends the
  // connection).
  bool Open(std::string_view header, std::string_view meta, const unsigned char* mac);

  uint64_t frames_sent() const { return send_seq_; }
  uint64_t frames_received() const { return recv_seq_; }

 private:
  SealMac send_key_{};
  SealMac recv_key_{};
  uint64_t send_seq_ = 0;
  uint64_t recv_seq_ = 0;
};

}  // namespace gm
