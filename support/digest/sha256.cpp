#include "support/digest/sha256.hpp"

#include <openssl/evp.h>

#include <algorithm>
#include <cctype>
#include <memory>
#include <stdexcept>

namespace kepler::support {

std::string sha256_hex(std::string_view bytes) {
    std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> context(EVP_MD_CTX_new(), EVP_MD_CTX_free);
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int length = 0;
    if (!context || EVP_DigestInit_ex(context.get(), EVP_sha256(), nullptr) != 1 ||
        EVP_DigestUpdate(context.get(), bytes.data(), bytes.size()) != 1 ||
        EVP_DigestFinal_ex(context.get(), digest, &length) != 1) {
        throw std::runtime_error("sha256: libcrypto failed to hash");
    }
    static constexpr char kHex[] = "0123456789abcdef";
    std::string out;
    out.reserve(2 * length);
    for (unsigned int i = 0; i < length; ++i) {
        out.push_back(kHex[digest[i] >> 4]);
        out.push_back(kHex[digest[i] & 0xf]);
    }
    return out;
}

bool is_sha256_hex(std::string_view text) noexcept {
    return text.size() == 64 && std::all_of(text.begin(), text.end(), [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; });
}

bool sha256_matches(std::string_view bytes, std::string_view expected) {
    if (!is_sha256_hex(expected)) return false;
    const std::string actual = sha256_hex(bytes);
    return std::equal(actual.begin(), actual.end(), expected.begin(), expected.end(),
                      [](char a, char b) { return a == std::tolower(static_cast<unsigned char>(b)); });
}

}  // namespace kepler::support
