#include "pod_resources/fake_kubelet.hpp"

#include <stdexcept>

namespace kepler::testing {

class FakeKubelet::Service final : public v1::PodResourcesLister::Service {
public:
    grpc::Status List(grpc::ServerContext*, const v1::ListPodResourcesRequest*, v1::ListPodResourcesResponse* response) override {
        std::lock_guard lock(mutex_);
        ++calls_;
        if (failure_) return *failure_;
        *response = answer_;
        return grpc::Status::OK;
    }

    void set_pods(const std::vector<FakePod>& pods) {
        v1::ListPodResourcesResponse answer;
        for (const FakePod& pod : pods) {
            v1::PodResources* p = answer.add_pod_resources();
            p->set_name(pod.name);
            p->set_namespace_(pod.pod_namespace);
            for (const FakeContainer& container : pod.containers) {
                v1::ContainerResources* c = p->add_containers();
                c->set_name(container.name);
                for (const auto& [resource, ids] : container.devices) {
                    v1::ContainerDevices* d = c->add_devices();
                    d->set_resource_name(resource);
                    for (const std::string& id : ids) d->add_device_ids(id);
                }
            }
        }
        std::lock_guard lock(mutex_);
        answer_ = std::move(answer);
    }

    void set_failure(std::optional<grpc::Status> status) {
        std::lock_guard lock(mutex_);
        failure_ = std::move(status);
    }

    uint64_t calls() const {
        std::lock_guard lock(mutex_);
        return calls_;
    }

private:
    mutable std::mutex mutex_;
    v1::ListPodResourcesResponse answer_;
    std::optional<grpc::Status> failure_;
    uint64_t calls_ = 0;
};

FakeKubelet::FakeKubelet(std::filesystem::path socket) : socket_(std::move(socket)), service_(std::make_unique<Service>()) {
    std::filesystem::remove(socket_);
    grpc::ServerBuilder builder;
    builder.AddListeningPort("unix:" + socket_.string(), grpc::InsecureServerCredentials());
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    if (!server_) throw std::runtime_error("fake kubelet: cannot serve on " + socket_.string());
}

FakeKubelet::~FakeKubelet() {
    server_->Shutdown();
    server_->Wait();
    std::error_code ec;
    std::filesystem::remove(socket_, ec);
}

void FakeKubelet::set_pods(std::vector<FakePod> pods) { service_->set_pods(pods); }
void FakeKubelet::set_failure(std::optional<grpc::Status> status) { service_->set_failure(std::move(status)); }
uint64_t FakeKubelet::calls() const { return service_->calls(); }

}  // namespace kepler::testing
