#include "deviceplugin/pod_resources.h"

#include <grpcpp/grpcpp.h>

#include <chrono>

#include "deviceplugin/proto/podresources.grpc.pb.h"

namespace hami::deviceplugin {

struct PodResourcesView::Impl {
  std::string socket;
  std::string resource;
  std::unique_ptr<v1::PodResourcesLister::Stub> stub;
};

PodResourcesView::PodResourcesView(std::string socket_path, std::string resource_name)
    : impl_(std::make_unique<Impl>()) {
  impl_->socket = std::move(socket_path);
  impl_->resource = std::move(resource_name);
  impl_->stub = v1::PodResourcesLister::NewStub(
      grpc::CreateChannel("unix:" + impl_->socket, grpc::InsecureChannelCredentials()));
}

PodResourcesView::~PodResourcesView() = default;

StatusOr<std::vector<KubeletPod>> PodResourcesView::ListPods() {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
  v1::ListPodResourcesResponse resp;
  grpc::Status s = impl_->stub->List(&ctx, v1::ListPodResourcesRequest(), &resp);
  if (!s.ok()) return Unavailable("PodResources List on ", impl_->socket, ": ", s.error_message());
  std::vector<KubeletPod> out;
  for (const auto& p : resp.pod_resources()) {
    KubeletPod k;
    k.namespace_ = p.namespace_();
    k.name = p.name();
    for (const auto& c : p.containers()) {
      for (const auto& d : c.devices()) {
        if (d.resource_name() == impl_->resource && d.device_ids_size() > 0)
          k.containers_with_devices.insert(c.name());
      }
    }
    out.push_back(std::move(k));
  }
  return out;
}

}  // namespace hami::deviceplugin
