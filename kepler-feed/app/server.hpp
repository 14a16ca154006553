// Wires the reader, the fan-out and the gRPC service together and runs until a stop signal.
#pragma once

#include "app/options.hpp"

namespace kepler::feed {

/// Serves until SIGTERM or SIGINT (which the caller has blocked in every thread); returns the exit code.
int run_server(const FeedOptions& options);

}  // namespace kepler::feed
