#include "dra/testing/fake_dra_kubelet.h"

#include <algorithm>
#include <chrono>

#include "dra/proto/dra_health_v1alpha1.grpc.pb.h"
#include "dra/proto/dra_v1.grpc.pb.h"
#include "dra/proto/dra_v1beta1.grpc.pb.h"
#include "dra/proto/pluginregistration.grpc.pb.h"
#include "grpcpp/grpcpp.h"

namespace hami::dra::testing {

namespace v1 = ::k8s::io::kubelet::pkg::apis::dra::v1;
namespace v1beta1 = ::k8s::io::kubelet::pkg::apis::dra::v1beta1;
namespace reg = ::pluginregistration;

namespace {

Status FromGrpc(const grpc::Status& s, const std::string& what) {
  if (s.ok()) return OkStatus();
  return Status(static_cast<absl::StatusCode>(s.error_code()),
                StrCat(what, ": ", s.error_message()));
}

std::unique_ptr<grpc::ClientContext> Context() {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(45));  // kubelet's
  return ctx;
}

template <typename Req>
Req Request(const std::vector<ClaimRef>& claims) {
  Req req;
  for (const auto& c : claims) {
    v1::Claim* out = req.add_claims();
    out->set_namespace_(c.namespace_);
    out->set_name(c.name);
    out->set_uid(c.uid);
  }
  return req;
}

}  // namespace

Status FakeDraKubelet::Register(const std::string& registry_dir, const std::string& driver) {
  const std::string sock = registry_dir + "/" + driver + "-reg.sock";
  auto stub = reg::Registration::NewStub(
      grpc::CreateChannel("unix:" + sock, grpc::InsecureChannelCredentials()));
  reg::InfoRequest req;
  reg::PluginInfo info;
  HAMI_RETURN_IF_ERROR(FromGrpc(stub->GetInfo(Context().get(), req, &info), "GetInfo " + sock));
  std::string refusal;
  const auto& v = info.supported_versions();
  const bool has_v1 = std::find(v.begin(), v.end(), "v1.DRAPlugin") != v.end();
  const bool has_v1beta1 = std::find(v.begin(), v.end(), "v1beta1.DRAPlugin") != v.end();
  if (info.type() != "DRAPlugin")
    refusal = "type is '" + info.type() + "'";
  else if (info.name() != driver)
    refusal = "name is '" + info.name() + "'";
  else if (info.endpoint().empty() || info.endpoint()[0] != '/')
    refusal = "endpoint '" + info.endpoint() + "' is not absolute";
  else if (!has_v1 && !has_v1beta1)
    refusal = "no DRAPlugin service this kubelet speaks";
  reg::RegistrationStatus st;
  st.set_plugin_registered(refusal.empty());
  st.set_error(refusal);
  reg::RegistrationStatusResponse resp;
  const grpc::Status notify = stub->NotifyRegistrationStatus(Context().get(), st, &resp);
  if (!refusal.empty()) return FailedPrecondition("kubelet refuses ", driver, ": ", refusal);
  HAMI_RETURN_IF_ERROR(FromGrpc(notify, "NotifyRegistrationStatus"));
  info_ = info;
  chosen_ = has_v1 ? DraVersion::kV1 : DraVersion::kV1beta1;
  return OkStatus();
}

StatusOr<FakeDraKubelet::PrepareResponse> FakeDraKubelet::Prepare(
    const std::vector<ClaimRef>& claims, DraVersion version) {
  auto ch = grpc::CreateChannel("unix:" + info_.endpoint(), grpc::InsecureChannelCredentials());
  const auto req = Request<v1::NodePrepareResourcesRequest>(claims);
  PrepareResponse resp;
  grpc::Status s =
      version == DraVersion::kV1
          ? v1::DRAPlugin::NewStub(ch)->NodePrepareResources(Context().get(), req, &resp)
          : v1beta1::DRAPlugin::NewStub(ch)->NodePrepareResources(Context().get(), req, &resp);
  HAMI_RETURN_IF_ERROR(FromGrpc(s, "NodePrepareResources"));
  return resp;
}

StatusOr<FakeDraKubelet::UnprepareResponse> FakeDraKubelet::Unprepare(
    const std::vector<ClaimRef>& claims, DraVersion version) {
  auto ch = grpc::CreateChannel("unix:" + info_.endpoint(), grpc::InsecureChannelCredentials());
  const auto req = Request<v1::NodeUnprepareResourcesRequest>(claims);
  UnprepareResponse resp;
  grpc::Status s =
      version == DraVersion::kV1
          ? v1::DRAPlugin::NewStub(ch)->NodeUnprepareResources(Context().get(), req, &resp)
          : v1beta1::DRAPlugin::NewStub(ch)->NodeUnprepareResources(Context().get(), req, &resp);
  HAMI_RETURN_IF_ERROR(FromGrpc(s, "NodeUnprepareResources"));
  return resp;
}

StatusOr<FakeDraKubelet::HealthResponse> FakeDraKubelet::WatchHealth(
    const std::function<bool(const HealthResponse&)>& done, std::chrono::milliseconds timeout) {
  const auto& v = info_.supported_versions();
  if (std::find(v.begin(), v.end(), "v1alpha1.DRAResourceHealth") == v.end())
    return FailedPrecondition("the plugin does not advertise v1alpha1.DRAResourceHealth");
  auto ch = grpc::CreateChannel("unix:" + info_.endpoint(), grpc::InsecureChannelCredentials());
  auto stub = ::v1alpha1::DRAResourceHealth::NewStub(ch);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + timeout);
  auto reader = stub->NodeWatchResources(&ctx, ::v1alpha1::NodeWatchResourcesRequest());
  HealthResponse msg;
  int n = 0;
  while (reader->Read(&msg)) {
    ++n;
    if (done(msg)) {
      ctx.TryCancel();
      (void)reader->Finish();
      return msg;
    }
  }
  const grpc::Status s = reader->Finish();
  return absl::DeadlineExceededError(
      StrCat("health stream ended after ", n, " message(s): ", s.error_message()));
}

}  // namespace hami::dra::testing
