// sha256.hpp — SHA-256 digests (OpenSSL's libcrypto) for files an operator pins: model files fetched
// from a server or kept in a volume are refused when their bytes are not the ones named.
#pragma once

#include <string>
#include <string_view>

namespace kepler::support {

/// The digest of `bytes` as 64 lower-case hex digits.
[[nodiscard]] std::string sha256_hex(std::string_view bytes);

/// True when `text` is 64 hex digits (either case): the form an operator writes a digest in.
[[nodiscard]] bool is_sha256_hex(std::string_view text) noexcept;

/// True when `bytes` hash to `expected` (64 hex digits, either case).
[[nodiscard]] bool sha256_matches(std::string_view bytes, std::string_view expected);

}  // namespace kepler::support
