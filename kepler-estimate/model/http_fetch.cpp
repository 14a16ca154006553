#include "model/http_fetch.hpp"

#include <curl/curl.h>
#include <fmt/format.h>

#include <fstream>
#include <stdexcept>

namespace kepler_estimate {

namespace fs = std::filesystem;

namespace {

constexpr size_t kMaxDownloadBytes = 256u << 20;

size_t append_body(char* data, size_t size, size_t count, void* user) {
    auto* body = static_cast<std::string*>(user);
    const size_t n = size * count;
    if (body->size() + n > kMaxDownloadBytes) return 0;  // makes curl fail with a write error
    body->append(data, n);
    return n;
}

}  // namespace

std::string http_get(const std::string& url) {
    CURL* curl = curl_easy_init();
    if (curl == nullptr) throw std::runtime_error("curl_easy_init failed");
    std::string body;
    curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, append_body);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, &body);
    curl_easy_setopt(curl, CURLOPT_FAILONERROR, 1L);
    curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(curl, CURLOPT_MAXREDIRS, 3L);
    curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT, 5L);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT, 60L);
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    const CURLcode rc = curl_easy_perform(curl);
    curl_easy_cleanup(curl);
    if (rc != CURLE_OK) throw std::runtime_error(fmt::format("GET {}: {}", url, curl_easy_strerror(rc)));
    return body;
}

void write_atomically(const fs::path& path, const std::string& bytes) {
    const fs::path temporary = path.string() + ".part";
    {
        std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
        out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
        if (!out) throw std::runtime_error(fmt::format("cannot write {}", temporary.string()));
    }
    fs::rename(temporary, path);
}


}  // namespace kepler_estimate
