// Proof that the coordinator issued an offload channel.
//
// An offload ticket (dataplane/auth.h) is derived from the worker key, so any
// holder of that key could mint one for a channel the coordinator never issued,
// and a virtual DataLoader worker runs the code its trainer ships. A data port
// therefore opens one only with a proof that only the coordinator can make: an
// Ed25519 signature, by the run's key pair (derived from the run's secret, which
// only the coordinator holds: FromSecret), of
//
//   "goldminer-offload-proof-v1|RANK|CHANNEL"
//
// The coordinator gives its public key to its workers in REGISTERED (over the
// sealed control connection) and the proof to the client in OFFLOADING; the
// client sends it in OFFLOAD_OPEN, and the data port checks it against the rank
// and channel of the ticket the client authenticated with. Keys and proofs travel
// as lower-case hex (64 and 128 characters).
//
// Thread-safety: an OffloadIssuer is immutable after Create(): Proof() may be
// called from any thread. CheckOffloadProof is thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "core/status.h"

namespace gm {

inline constexpr size_t kOffloadKeyHexChars = 64;
inline constexpr size_t kOffloadProofHexChars = 128;

class OffloadIssuer {
 public:
  // A fresh key pair. Internal when the system's generator or OpenSSL fails.
  static Result<OffloadIssuer> Create();
  // The run's key pair, derived from its secret (HMAC-SHA256 of it as the Ed25519
  // seed): a coordinator started again from its journal issues the same proofs,
  // so the channels issued before it died stay good. Only a holder of the secret
  // can derive it (the worker and client keys are HMACs of it too, of other
  // labels). InvalidArgument for a secret that is not one (dataplane/auth.h).
  static Result<OffloadIssuer> FromSecret(std::string_view run_secret);

  // The public key, 64 hex characters.
  const std::string& public_key() const { return public_key_; }
  // The proof for `channel` of `rank`, 128 hex characters. Internal when
  // OpenSSL fails.
  Result<std::string> Proof(int64_t rank, uint64_t channel) const;

 private:
  struct Key;
  OffloadIssuer(std::shared_ptr<const Key> key, std::string public_key)
      : key_(std::move(key)), public_key_(std::move(public_key)) {}
  std::shared_ptr<const Key> key_;
  std::string public_key_;
};

// OK when `proof` is `public_key`'s proof for `channel` of `rank`; else
// InvalidArgument saying that the channel is not one the coordinator issued (a
// malformed key or proof included). An empty `public_key` (a coordinator that gave
// none) refuses every proof.
Status CheckOffloadProof(std::string_view public_key, int64_t rank, uint64_t channel,
                         std::string_view proof);

}  // namespace gm
