// Prometheus text scraped from kepler-estimate, parsed into one value per series.
#pragma once

#include <map>
#include <optional>
#include <string>

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

}  // namespace e2e
