// fake_kubelet.hpp — the kubelet's pod-resources service (v1.PodResourcesLister, gRPC) on a unix socket,
// answering List with whatever the test sets: the estimator's client is exercised over a real socket and
// the real wire format, never through a mock of our code.
#pragma once

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "kubelet/podresources/v1/api.grpc.pb.h"

namespace kepler::testing {

/// One container's devices, as a device plugin allocated them.
struct FakeContainer {
    std::string name;
    std::vector<std::pair<std::string, std::vector<std::string>>> devices;  // resource name → device ids
};

struct FakePod {
    std::string name;
    std::string pod_namespace;
    std::vector<FakeContainer> containers;
};

class FakeKubelet {
public:
    /// Serves on `socket` (a path; removed at destruction).
    explicit FakeKubelet(std::filesystem::path socket);
    ~FakeKubelet();
    FakeKubelet(const FakeKubelet&) = delete;
    FakeKubelet& operator=(const FakeKubelet&) = delete;

    /// What List answers from now on.
    void set_pods(std::vector<FakePod> pods);
    /// List fails with this status until cleared (nullopt).
    void set_failure(std::optional<grpc::Status> status);
    /// List calls answered or failed so far.
    [[nodiscard]] uint64_t calls() const;
    [[nodiscard]] const std::filesystem::path& socket() const noexcept { return socket_; }

private:
    class Service;
    std::filesystem::path socket_;
    std::unique_ptr<Service> service_;
    std::unique_ptr<grpc::Server> server_;
};

}  // namespace kepler::testing
