#include "workloads/http_client.hpp"

#include <curl/curl.h>

#include <memory>
#include <mutex>

#include <fmt/format.h>

#include "common/text_io.hpp"

namespace kepler::collect {

namespace {

void global_init_once() {
    static std::once_flag once;
    std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

struct Sink {
    std::string* body;
    size_t max_bytes;
    bool overflow = false;
};

size_t on_data(char* data, size_t size, size_t count, void* user) {
    auto* sink = static_cast<Sink*>(user);
    const size_t bytes = size * count;
    if (sink->body->size() + bytes > sink->max_bytes) {
        sink->overflow = true;
        return 0;  // makes curl stop with CURLE_WRITE_ERROR
    }
    sink->body->append(data, bytes);
    return bytes;
}

}  // namespace

HttpResponse http_get(const HttpRequest& request) {
    global_init_once();
    std::unique_ptr<CURL, void (*)(CURL*)> curl(curl_easy_init(), curl_easy_cleanup);
    if (!curl) throw CollectError("http: cannot create a curl handle");

    HttpResponse response;
    Sink sink{&response.body, request.max_bytes};
    char error_text[CURL_ERROR_SIZE] = {};
    curl_slist* headers = curl_slist_append(nullptr, "Accept: application/json");
    if (!request.bearer_token.empty()) {
        headers = curl_slist_append(headers, fmt::format("Authorization: Bearer {}", request.bearer_token).c_str());
    }
    std::unique_ptr<curl_slist, void (*)(curl_slist*)> header_list(headers, curl_slist_free_all);

    CURL* c = curl.get();
    curl_easy_setopt(c, CURLOPT_URL, request.url.c_str());
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, header_list.get());
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &sink);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, error_text);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, request.timeout_ms);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, request.timeout_ms);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);  // called from a worker thread: no SIGALRM
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_ACCEPT_ENCODING, "");  // gzip when the server offers it
    if (!request.ca_file.empty()) curl_easy_setopt(c, CURLOPT_CAINFO, request.ca_file.c_str());
    if (request.insecure_skip_verify) {
        curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 0L);
        curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 0L);
    }

    const CURLcode rc = curl_easy_perform(c);
    if (sink.overflow) {
        throw CollectError(fmt::format("http: response of {} exceeds {} bytes", request.url, request.max_bytes));
    }
    if (rc != CURLE_OK) {
        throw CollectError(fmt::format("http: GET {}: {}", request.url, error_text[0] ? error_text : curl_easy_strerror(rc)));
    }
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &response.status);
    return response;
}

std::string url_encode(std::string_view text) {
    std::string out;
    for (const char ch : text) {
        const auto c = static_cast<unsigned char>(ch);
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
            c == '.' || c == '~') {
            out.push_back(ch);
        } else {
            out += fmt::format("%{:02X}", c);
        }
    }
    return out;
}

}  // namespace kepler::collect
