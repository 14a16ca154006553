#include "support/http/http_client.hpp"

#include <curl/curl.h>
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <memory>
#include <mutex>

namespace kepler::support {

namespace {

/// curl_global_init is not thread-safe and must run before any handle exists: once per process.
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

/// Response headers: at most this many bytes in all, so that a hostile server cannot grow them.
constexpr size_t kMaxHeaderBytes = 64u << 10;

struct HeaderSink {
    std::map<std::string, std::string>* headers;
    size_t bytes = 0;
};

size_t on_header(char* data, size_t size, size_t count, void* user) {
    auto* sink = static_cast<HeaderSink*>(user);
    const size_t bytes = size * count;
    sink->bytes += bytes;
    if (sink->bytes > kMaxHeaderBytes) return 0;  // CURLE_WRITE_ERROR
    std::string_view line(data, bytes);
    if (line.rfind("HTTP/", 0) == 0) sink->headers->clear();  // a new response (after 100 or a redirect)
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos) return bytes;
    std::string name(line.substr(0, colon));
    std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    std::string_view value = line.substr(colon + 1);
    while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
    while (!value.empty() && (value.back() == '\r' || value.back() == '\n' || value.back() == ' ')) value.remove_suffix(1);
    (*sink->headers)[name] = std::string(value);
    return bytes;
}

bool starts_with_no_case(std::string_view text, std::string_view prefix) {
    return text.size() >= prefix.size() && std::equal(prefix.begin(), prefix.end(), text.begin(), [](char a, char b) {
               return std::tolower(static_cast<unsigned char>(a)) == std::tolower(static_cast<unsigned char>(b));
           });
}

void set_security(CURL* c, const HttpRequest& request) {
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    // A redirect may keep or raise the protection the caller chose, never drop it.
    curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, is_https(request.url) ? "https" : "http,https");
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, request.max_redirects > 0 ? 1L : 0L);
    curl_easy_setopt(c, CURLOPT_MAXREDIRS, static_cast<long>(request.max_redirects));
    if (!request.ca_file.empty()) curl_easy_setopt(c, CURLOPT_CAINFO, request.ca_file.c_str());
    if (request.insecure_skip_verify) {
        curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 0L);
        curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 0L);
    }
}

}  // namespace

bool is_https(std::string_view url) noexcept { return starts_with_no_case(url, "https://"); }

HttpResponse http_get(const HttpRequest& request) {
    HttpRequest get = request;
    get.method = "GET";
    return http_request(get);
}

namespace {

void check_request(const HttpRequest& request) {
    if (request.method != "GET" && request.method != "POST" && request.method != "DELETE") {
        throw HttpError(fmt::format("http: method {} is not supported", request.method));
    }
    if (!starts_with_no_case(request.url, "http://") && !is_https(request.url)) {
        throw HttpError(fmt::format("http: \"{}\" is not an http:// or https:// URL", request.url));
    }
}

using HeaderList = std::unique_ptr<curl_slist, void (*)(curl_slist*)>;

HeaderList request_headers(const HttpRequest& request) {
    curl_slist* headers = curl_slist_append(nullptr, fmt::format("Accept: {}", request.accept).c_str());
    if (!request.bearer_token.empty()) {
        headers = curl_slist_append(headers, fmt::format("Authorization: Bearer {}", request.bearer_token).c_str());
    }
    if (request.method == "POST") {
        headers = curl_slist_append(headers, fmt::format("Content-Type: {}", request.content_type).c_str());
    }
    for (const auto& [name, value] : request.headers) {
        headers = curl_slist_append(headers, fmt::format("{}: {}", name, value).c_str());
    }
    return HeaderList(headers, curl_slist_free_all);
}

void set_method_and_credentials(CURL* c, const HttpRequest& request) {
    if (request.method == "POST") {
        curl_easy_setopt(c, CURLOPT_POST, 1L);
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, request.body.c_str());
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(request.body.size()));
    } else if (request.method == "DELETE") {
        curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, "DELETE");
    }
    if (!request.basic_user.empty()) {
        curl_easy_setopt(c, CURLOPT_HTTPAUTH, CURLAUTH_BASIC);
        curl_easy_setopt(c, CURLOPT_USERNAME, request.basic_user.c_str());
        curl_easy_setopt(c, CURLOPT_PASSWORD, request.basic_password.c_str());
    }
}

/// One exchange on handle `c`, whose options are at their defaults (new, or reset).
HttpResponse perform(CURL* c, const HttpRequest& request) {
    HttpResponse response;
    Sink sink{&response.body, request.max_bytes};
    HeaderSink header_sink{&response.headers};
    char error_text[CURL_ERROR_SIZE] = {};
    const HeaderList headers = request_headers(request);
    curl_easy_setopt(c, CURLOPT_URL, request.url.c_str());
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers.get());
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &sink);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &header_sink);
    set_method_and_credentials(c, request);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, error_text);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, request.timeout_ms);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, std::min(request.connect_timeout_ms, request.timeout_ms));
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);  // called from worker threads: no SIGALRM
    curl_easy_setopt(c, CURLOPT_ACCEPT_ENCODING, "");  // gzip when the server offers it (max_bytes counts inflated bytes)
    set_security(c, request);

    const CURLcode rc = curl_easy_perform(c);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, nullptr);  // the buffer ends with this call; the handle may live on
    if (sink.overflow) {
        throw HttpError(fmt::format("http: the response of {} exceeds {} bytes", request.url, request.max_bytes));
    }
    if (rc != CURLE_OK) {
        if (header_sink.bytes > kMaxHeaderBytes) {
            throw HttpError(fmt::format("http: the response headers of {} exceed {} bytes", request.url, kMaxHeaderBytes));
        }
        throw HttpError(fmt::format("http: {} {}: {}", request.method, request.url, error_text[0] ? error_text : curl_easy_strerror(rc)));
    }
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &response.status);
    return response;
}

}  // namespace

HttpResponse http_request(const HttpRequest& request) {
    check_request(request);
    global_init_once();
    std::unique_ptr<CURL, void (*)(CURL*)> curl(curl_easy_init(), curl_easy_cleanup);
    if (!curl) throw HttpError("http: cannot create a curl handle");
    return perform(curl.get(), request);
}

HttpConnection::HttpConnection() {
    global_init_once();
    handle_ = curl_easy_init();
    if (handle_ == nullptr) throw HttpError("http: cannot create a curl handle");
}

HttpConnection::~HttpConnection() { curl_easy_cleanup(handle_); }

HttpResponse HttpConnection::request(const HttpRequest& request) {
    check_request(request);
    // Options back to their defaults; the open connection, TLS session and DNS caches stay.
    curl_easy_reset(handle_);
    return perform(handle_, request);
}

std::string url_encode(std::string_view text) {
    std::string out;
    for (const char ch : text) {
        const auto c = static_cast<unsigned char>(ch);
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.' || c == '~') {
            out.push_back(ch);
        } else {
            out += fmt::format("%{:02X}", c);
        }
    }
    return out;
}

}  // namespace kepler::support
