// Prometheus text scraped from kepler-estimate, parsed into one value per series.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>

#include "support/process.hpp"

namespace e2e {

/// Series ("name{labels}" exactly as exposed) -> value.
using Scrape = std::map<std::string, double>;

/// GET http://127.0.0.1:port/metrics; nullopt when the server does not answer.
std::optional<std::string> http_get_metrics(int port);

Scrape parse_exposition(const std::string& text);

/// The metric name of a series key ("kepler_x_total{a=\"b\"}" -> "kepler_x_total").
std::string metric_name(const std::string& series);

/// Value of an unlabelled series, or -1 when absent.
double value_of(const Scrape& scrape, const std::string& series);

/// Scrapes until it works or `attempts` failed (the estimator may still be starting).
std::optional<Scrape> scrape(int port, int attempts = 50);

/// The `--listen` value for an estimator under test: port 0, so the kernel picks a free port (no race
/// for a port that was free a moment earlier, with tests running in parallel).
inline const char* kAnyLocalPort = "127.0.0.1:0";

/// The port an estimator logged as "serving /metrics on ADDR:PORT", waiting up to `timeout` for the
/// line; -1 when it never came.
int metrics_port(const Child& estimator, std::chrono::milliseconds timeout = std::chrono::seconds(30));

}  // namespace e2e
