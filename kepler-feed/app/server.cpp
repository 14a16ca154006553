#include "app/server.hpp"

#include <signal.h>

#include <fmt/format.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/resource_quota.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "serve/feed_service.hpp"
#include "support/log/log.hpp"

namespace kepler::feed {

namespace {

std::string read_text(const std::string& path) {
    std::ifstream in(path);
    if (!in) throw std::runtime_error(fmt::format("cannot read '{}'", path));
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
}

/// The token file's first line, without trailing whitespace (files written by `echo` end in a newline).
std::string read_token(const std::string& path) {
    std::string token = read_text(path);
    token = token.substr(0, token.find('\n'));
    while (!token.empty() && std::isspace(static_cast<unsigned char>(token.back()))) token.pop_back();
    if (token.empty()) throw std::runtime_error(fmt::format("token file '{}' is empty", path));
    return token;
}

std::shared_ptr<grpc::ServerCredentials> credentials(const FeedOptions& o) {
    if (o.tls_cert.empty()) return grpc::InsecureServerCredentials();
    grpc::SslServerCredentialsOptions ssl(o.tls_client_ca.empty()
                                              ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
                                              : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
    ssl.pem_key_cert_pairs.push_back({read_text(o.tls_key), read_text(o.tls_cert)});
    if (!o.tls_client_ca.empty()) ssl.pem_root_certs = read_text(o.tls_client_ca);
    return grpc::SslServerCredentials(ssl);
}

/// Written through a rename so that a reader never sees a half-written port.
void write_port_file(const std::string& path, int port) {
    const std::string tmp = path + ".tmp";
    std::ofstream(tmp) << port << "\n";
    std::filesystem::rename(tmp, path);
}

bool is_loopback(const std::string& listen) {
    return listen.starts_with("127.") || listen.starts_with("localhost:") || listen.starts_with("[::1]");
}

void wait_for_stop_signal() {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    int signal = 0;
    sigwait(&set, &signal);
}

}  // namespace

int run_server(const FeedOptions& options) {
    ServiceConfig config{options.shm_name, options.token_file.empty() ? "" : read_token(options.token_file), options.limits};
    if (!is_loopback(options.listen) && options.tls_cert.empty()) {
        log_warn("listening on {} without TLS: frames{} travel in clear text",
                 options.listen, config.token.empty() ? " and no token" : " and the token");
    }
    Fanout fanout(options.limits);
    FrameReader reader(options.shm_name, [&](SnapshotPtr s) { fanout.publish(s); });
    reader.set_tick([&] { fanout.tick(); });
    EstimatesBoard estimates(options.estimates, std::chrono::milliseconds(options.estimates_wait_ms));
    FeedService service(config, reader, fanout, estimates);
    estimates.start();  // first: the answers to the frames the reader catches up on are there for them
    reader.start();     // before listening: see FrameReader::start

    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort(options.listen, credentials(options), &port);
    builder.RegisterService(&service);
    // The largest valid request (filters at their limits) is ~200 KB: gRPC refuses bigger ones itself.
    builder.SetMaxReceiveMessageSize(1 << 20);
    // One handler thread per subscription (plus Describe calls): the quota bounds them.
    grpc::ResourceQuota quota("kepler-feed");
    quota.SetMaxThreads(static_cast<int>(options.limits.max_subscribers) + 8);
    builder.SetResourceQuota(quota);
    std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
    if (!server || port == 0) {
        log_error("cannot listen on {}", options.listen);
        return 1;
    }
    for (const std::string& name : options.estimates) {
        log_info("joining the answers of estimates segment '{}' (waiting at most {} ms)", name,
                 options.estimates_wait_ms);
    }
    log_info("serving segment '{}' on port {} ({}{})", options.shm_name, port,
             options.tls_cert.empty() ? "plain text" : options.tls_client_ca.empty() ? "TLS" : "TLS with client certificates",
             config.token.empty() ? "" : ", bearer token");
    if (!options.port_file.empty()) write_port_file(options.port_file, port);
    wait_for_stop_signal();
    log_info("stopping");
    fanout.stop();  // handlers end their streams with UNAVAILABLE
    server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
    reader.stop();
    estimates.stop();
    return 0;
}

}  // namespace kepler::feed
