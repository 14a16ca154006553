#include "app/options.hpp"

#include <CLI/CLI.hpp>

#include "support/cli/units.hpp"
#include "support/version/build_info.hpp"

#include <algorithm>

namespace kepler::feed {

std::optional<FeedOptions> parse_command_line(int argc, char** argv, int& exit_code) {
    FeedOptions o;
    CLI::App app{"kepler-feed: serves the frames of a keplershm segment (/dev/shm/NAME) over gRPC "
                 "(keplershm.feed.v1.Feed), read-only and unprivileged."};
    app.get_formatter()->column_width(40);
    app.set_version_flag("--version", kepler::support::version_line("kepler-feed"));
    app.add_option("--shm-name", o.shm_name, "Segment to serve (kepler-collect's --shm-name)")->required();
    app.add_option("--listen", o.listen, "HOST:PORT to listen on; port 0 picks a free one (see --port-file)")
        ->capture_default_str();
    app.add_option("--port-file", o.port_file, "Write the bound port here once listening");
    app.add_option("--log-level", o.log_level, "debug, info, warning or error")
        ->check(CLI::IsMember({"debug", "info", "warning", "error"}))->capture_default_str();
    app.add_option("--estimates", o.estimates,
                   "Estimates segment (PROTOCOL.md section 8, e.g. kepler-estimate --publish-estimates PREFIX's PREFIX-<model>) whose "
                   "answers frames carry when a subscriber selects section 'estimates'; repeatable");
    support::duration_option(app.add_option("--estimates-wait", o.estimates_wait_ms,
                                            "How long a frame waits for the answers of sources that keep up, after the feed "
                                            "read it (a bare number is milliseconds; also capped at a quarter of the frame's "
                                            "interval); a frame whose answer did not come is sent marked missing"),
                             support::BareNumber::milliseconds)
        ->check(CLI::Range(0u, 10000u))->capture_default_str();
    app.add_option("--tls-cert", o.tls_cert, "Server certificate (PEM); with --tls-key enables TLS")->check(CLI::ExistingFile);
    app.add_option("--tls-key", o.tls_key, "Server private key (PEM)")->check(CLI::ExistingFile);
    app.add_option("--tls-client-ca", o.tls_client_ca, "CA bundle (PEM): require client certificates signed by it")
        ->check(CLI::ExistingFile);
    app.add_option("--token-file", o.token_file, "File holding the bearer token every call must carry")
        ->check(CLI::ExistingFile);
    app.add_option("--max-subscribers", o.limits.max_subscribers, "Concurrent subscriptions served")
        ->check(CLI::Range(1u, 4096u))->capture_default_str();
    app.add_option("--queue-frames", o.limits.queue_frames, "Frames a subscriber may fall behind before it is dropped")
        ->check(CLI::Range(1u, 4096u))->capture_default_str();
    app.add_option("--max-top-n", o.limits.max_top_n, "Largest top_n_by_cpu accepted")
        ->check(CLI::Range(1u, 1u << 24))->capture_default_str();
    support::duration_option(app.add_option("--drop-grace", o.limits.drop_grace_s,
                                            "How long a dropped subscriber that does not read may hold its call before "
                                            "it is cancelled (10, 10s, 1m; whole seconds)"))
        ->check(CLI::Range(1u, 3600u))->capture_default_str();
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        exit_code = support::usage_exit(app, e);
        return std::nullopt;
    }
    for (size_t i = 0; i < o.estimates.size(); ++i) {
        if (std::find(o.estimates.begin(), o.estimates.begin() + static_cast<std::ptrdiff_t>(i), o.estimates[i]) !=
            o.estimates.begin() + static_cast<std::ptrdiff_t>(i)) {
            std::cerr << "kepler-feed: --estimates " << o.estimates[i] << " is given twice\n";
            exit_code = 2;
            return std::nullopt;
        }
    }
    if (o.tls_cert.empty() != o.tls_key.empty()) {
        std::cerr << "kepler-feed: --tls-cert and --tls-key go together\n";
        exit_code = 2;
        return std::nullopt;
    }
    if (!o.tls_client_ca.empty() && o.tls_cert.empty()) {
        std::cerr << "kepler-feed: --tls-client-ca needs --tls-cert and --tls-key\n";
        exit_code = 2;
        return std::nullopt;
    }
    return o;
}

}  // namespace kepler::feed
