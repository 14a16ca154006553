#include "load/http_fetch.hpp"

#include <fmt/format.h>

#include <fstream>
#include <stdexcept>

#include "support/http/http_client.hpp"

namespace kepler::estimate {

namespace fs = std::filesystem;

std::string fetch_bytes(const ModelServer& server, const std::string& url) {
    kepler::support::HttpRequest request;
    request.url = url;
    request.accept = "*/*";
    request.ca_file = server.ca_file;
    request.insecure_skip_verify = server.insecure_skip_verify;
    request.max_redirects = 3;
    request.timeout_ms = 60'000;
    request.max_bytes = kMaxModelFileBytes;
    kepler::support::HttpResponse response = kepler::support::http_get(request);
    if (response.status != 200) throw std::runtime_error(fmt::format("GET {}: HTTP {}", url, response.status));
    return std::move(response.body);
}

void write_atomically(const fs::path& path, const std::string& bytes) {
    const fs::path temporary = path.string() + ".part";
    {
        std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
        out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
        out.close();  // a full disk shows at the last flush, not the write
        if (!out) throw std::runtime_error(fmt::format("cannot write {}", temporary.string()));
    }
    fs::rename(temporary, path);
}

}  // namespace kepler::estimate
