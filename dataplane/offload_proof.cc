#include "dataplane/offload_proof.h"

#include <openssl/evp.h>

#include <array>
#include <optional>
#include <vector>

#include "core/digest.h"
#include "dataplane/auth.h"

namespace gm {
namespace {

constexpr size_t kPublicKeyBytes = 32;
constexpr size_t kSignatureBytes = 64;

struct PkeyFree {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
};
struct MdCtxFree {
  void operator()(EVP_MD_CTX* c) const { EVP_MD_CTX_free(c); }
};
using Pkey = std::unique_ptr<EVP_PKEY, PkeyFree>;
using MdCtx = std::unique_ptr<EVP_MD_CTX, MdCtxFree>;

std::string Signed(int64_t rank, uint64_t channel) {
  return "goldminer-offload-proof-v1|" + std::to_string(rank) + "|" + std::to_string(channel);
}

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

// `hex` (lower case, exactly 2 x bytes characters) as bytes; nullopt otherwise.
std::optional<std::vector<unsigned char>> FromHex(std::string_view hex, size_t bytes) {
  if (hex.size() != 2 * bytes) return std::nullopt;
  std::vector<unsigned char> out(bytes);
  for (size_t i = 0; i < bytes; ++i) {
    const int hi = HexDigit(hex[2 * i]), lo = HexDigit(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out[i] = static_cast<unsigned char>(hi * 16 + lo);
  }
  return out;
}

// The Ed25519 public key of `pkey`, 64 hex.
Result<std::string> PublicKeyHex(EVP_PKEY* pkey) {
  std::array<unsigned char, kPublicKeyBytes> pub{};
  size_t size = pub.size();
  if (EVP_PKEY_get_raw_public_key(pkey, pub.data(), &size) != 1 || size != pub.size()) {
    return Status::Internal("OpenSSL could not give the Ed25519 public key");
  }
  return ToHex(pub.data(), pub.size());
}

}  // namespace

struct OffloadIssuer::Key {
  Pkey pkey;
};

Result<OffloadIssuer> OffloadIssuer::Create() {
  Pkey pkey(EVP_PKEY_Q_keygen(nullptr, nullptr, "ED25519"));
  if (!pkey) return Status::Internal("OpenSSL could not make an Ed25519 key pair");
  GM_ASSIGN_OR_RETURN(std::string public_key, PublicKeyHex(pkey.get()));
  auto key = std::make_shared<Key>();
  key->pkey = std::move(pkey);
  return OffloadIssuer(std::move(key), std::move(public_key));
}

Result<OffloadIssuer> OffloadIssuer::FromSecret(std::string_view run_secret) {
  GM_RETURN_IF_ERROR(CheckSecret(run_secret, "the run's secret"));
  const std::optional<std::vector<unsigned char>> seed =
      FromHex(HmacSha256Hex(run_secret, "goldminer-offload-issuer-v1"), 32);
  if (!seed) return Status::Internal("the offload issuer's seed is not 32 bytes");
  Pkey pkey(EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, nullptr, seed->data(), seed->size()));
  if (!pkey) return Status::Internal("OpenSSL could not make the run's Ed25519 key pair");
  GM_ASSIGN_OR_RETURN(std::string public_key, PublicKeyHex(pkey.get()));
  auto key = std::make_shared<Key>();
  key->pkey = std::move(pkey);
  return OffloadIssuer(std::move(key), std::move(public_key));
}

Result<std::string> OffloadIssuer::Proof(int64_t rank, uint64_t channel) const {
  const std::string message = Signed(rank, channel);
  MdCtx ctx(EVP_MD_CTX_new());
  std::array<unsigned char, kSignatureBytes> sig{};
  size_t size = sig.size();
  if (!ctx || EVP_DigestSignInit(ctx.get(), nullptr, nullptr, nullptr, key_->pkey.get()) != 1 ||
      EVP_DigestSign(ctx.get(), sig.data(), &size,
                     reinterpret_cast<const unsigned char*>(message.data()), message.size()) != 1 ||
      size != sig.size()) {
    return Status::Internal("OpenSSL could not sign an offload channel");
  }
  return ToHex(sig.data(), sig.size());
}

Status CheckOffloadProof(std::string_view public_key, int64_t rank, uint64_t channel,
                         std::string_view proof) {
  const Status refused = Status::InvalidArgument(
      "offload channel " + std::to_string(channel) + " of rank " + std::to_string(rank) +
      " is not one this run's coordinator issued (no valid proof): only a trainer of the run, "
      "through its coordinator, opens virtual DataLoader workers");
  const auto pub = FromHex(public_key, kPublicKeyBytes);
  const auto sig = FromHex(proof, kSignatureBytes);
  if (!pub || !sig) return refused;
  Pkey pkey(EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, nullptr, pub->data(), pub->size()));
  MdCtx ctx(EVP_MD_CTX_new());
  const std::string message = Signed(rank, channel);
  if (!pkey || !ctx ||
      EVP_DigestVerifyInit(ctx.get(), nullptr, nullptr, nullptr, pkey.get()) != 1 ||
      EVP_DigestVerify(ctx.get(), sig->data(), sig->size(),
                       reinterpret_cast<const unsigned char*>(message.data()),
                       message.size()) != 1) {
    return refused;
  }
  return Status::Ok();
}

}  // namespace gm
