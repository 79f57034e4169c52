#include "dra/server.h"

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <set>

#include "common/libc.h"
#include "common/mutex.h"
#include "deviceplugin/config.h"
#include "dra/proto/dra_health_v1.grpc.pb.h"
#include "dra/proto/dra_health_v1alpha1.grpc.pb.h"
#include "dra/proto/dra_v1.grpc.pb.h"
#include "dra/proto/dra_v1beta1.grpc.pb.h"
#include "dra/proto/pluginregistration.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "spdlog/spdlog.h"

namespace hami::dra {

namespace v1 = ::k8s::io::kubelet::pkg::apis::dra::v1;
namespace v1beta1 = ::k8s::io::kubelet::pkg::apis::dra::v1beta1;
namespace reg = ::pluginregistration;

namespace {

std::vector<ClaimRef> Refs(const google::protobuf::RepeatedPtrField<v1::Claim>& claims) {
  std::vector<ClaimRef> out;
  for (const auto& c : claims) out.push_back({c.namespace_(), c.name(), c.uid()});
  return out;
}

// A request naming a claim twice or a claim without uid cannot be answered per claim.
grpc::Status CheckRequest(const std::vector<ClaimRef>& refs) {
  std::set<std::string> seen;
  for (const auto& r : refs) {
    if (r.uid.empty() || !seen.insert(r.uid).second)
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          StrCat("claim ", r.namespace_, "/", r.name, ": empty or repeated uid"));
  }
  return grpc::Status::OK;
}

std::string ErrorText(const Status& s) {
  return StrCat(absl::StatusCodeToString(s.code()), ": ", std::string(s.message()));
}

// One implementation for v1 and v1beta1 (the same messages; v1beta1 has no share_id).
template <typename Base, bool kShareId>
class DraServiceImpl : public Base {
 public:
  explicit DraServiceImpl(Driver* driver) : driver_(driver) {}

  grpc::Status NodePrepareResources(grpc::ServerContext*,
                                    const v1::NodePrepareResourcesRequest* req,
                                    v1::NodePrepareResourcesResponse* resp) override {
    const std::vector<ClaimRef> refs = Refs(req->claims());
    if (grpc::Status s = CheckRequest(refs); !s.ok()) return s;
    for (auto& [uid, r] : driver_->Prepare(refs)) {
      v1::NodePrepareResourceResponse& out = (*resp->mutable_claims())[uid];
      if (!r.status.ok()) {
        spdlog::warn("dra: prepare {}: {}", uid, r.status.ToString());
        out.set_error(ErrorText(r.status));
        continue;
      }
      for (const auto& d : r.devices) {
        v1::Device* dev = out.add_devices();
        for (const auto& n : d.request_names) dev->add_request_names(n);
        dev->set_pool_name(d.pool);
        dev->set_device_name(d.device);
        for (const auto& id : d.cdi_device_ids) dev->add_cdi_device_ids(id);
        if (kShareId && !d.share_id.empty()) dev->set_share_id(d.share_id);
      }
    }
    return grpc::Status::OK;
  }

  grpc::Status NodeUnprepareResources(grpc::ServerContext*,
                                      const v1::NodeUnprepareResourcesRequest* req,
                                      v1::NodeUnprepareResourcesResponse* resp) override {
    const std::vector<ClaimRef> refs = Refs(req->claims());
    if (grpc::Status s = CheckRequest(refs); !s.ok()) return s;
    for (auto& [uid, st] : driver_->Unprepare(refs)) {
      v1::NodeUnprepareResourceResponse& out = (*resp->mutable_claims())[uid];
      if (!st.ok()) {
        spdlog::warn("dra: unprepare {}: {}", uid, st.ToString());
        out.set_error(ErrorText(st));
      }
    }
    return grpc::Status::OK;
  }

 private:
  Driver* driver_;
};

// NodeWatchResources for v1alpha1 and v1 (the same messages): the full list at once, then at each
// change and every third of the kubelet's timeout, until the kubelet cancels or the server stops.
template <typename Base>
class HealthServiceImpl : public Base {
 public:
  HealthServiceImpl(HealthBoard* board, std::shared_ptr<std::atomic<bool>> stopping)
      : board_(board), stopping_(std::move(stopping)) {}

  grpc::Status NodeWatchResources(
      grpc::ServerContext* ctx, const ::v1alpha1::NodeWatchResourcesRequest*,
      grpc::ServerWriter<::v1alpha1::NodeWatchResourcesResponse>* writer) override {
    using std::chrono::steady_clock;
    const auto resend = std::chrono::seconds(kHealthTimeoutSeconds / 3);
    uint64_t sent = 0;
    auto last = steady_clock::now();
    bool first = true;
    while (!ctx->IsCancelled() && !stopping_->load() && !board_->shut_down()) {
      uint64_t version = 0;
      const std::vector<HealthBoard::Entry> entries = board_->Snapshot(&version);
      if (first || version != sent || steady_clock::now() - last >= resend) {
        ::v1alpha1::NodeWatchResourcesResponse resp;
        const int64_t now = static_cast<int64_t>(std::time(nullptr));
        for (const auto& e : entries) {
          ::v1alpha1::DeviceHealth* d = resp.add_devices();
          d->mutable_device()->set_pool_name(board_->pool());
          d->mutable_device()->set_device_name(e.device);
          d->set_health(e.healthy ? ::v1alpha1::HEALTHY : ::v1alpha1::UNHEALTHY);
          d->set_last_updated_time(now);  // checked now: the kubelet times a device out from it
          d->set_health_check_timeout_seconds(kHealthTimeoutSeconds);
          d->set_message(e.message);
        }
        if (!writer->Write(resp)) break;  // the kubelet went away
        if (version != sent && !first)
          spdlog::info("dra: health stream: sent a change (version {})", version);
        sent = version;
        last = steady_clock::now();
        first = false;
      }
      // Short waits: a cancelled stream or a stopping server is noticed within half a second.
      board_->WaitChange(sent, std::chrono::milliseconds(500));
    }
    return grpc::Status::OK;
  }

 private:
  HealthBoard* board_;
  std::shared_ptr<std::atomic<bool>> stopping_;
};

// A stale socket of an earlier run would make bind fail.
Status RemoveSocket(const std::string& path) {
  if (::unlink(path.c_str()) != 0 && errno != ENOENT)
    return Internal("cannot remove stale socket ", path, ": ", ErrnoText(errno));
  return OkStatus();
}

StatusOr<std::unique_ptr<grpc::Server>> Serve(const std::string& path,
                                              const std::vector<grpc::Service*>& services) {
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  if (ec) return Internal("cannot create the directory of ", path, ": ", ec.message());
  HAMI_RETURN_IF_ERROR(RemoveSocket(path));
  grpc::ServerBuilder b;
  b.AddListeningPort("unix:" + path, grpc::InsecureServerCredentials());
  for (auto* s : services) b.RegisterService(s);
  std::unique_ptr<grpc::Server> server = b.BuildAndStart();
  if (server == nullptr) return Unavailable("cannot serve gRPC on ", path);
  return server;
}

}  // namespace

class DraServer::V1Service final : public DraServiceImpl<v1::DRAPlugin::Service, true> {
  using DraServiceImpl::DraServiceImpl;
};
class DraServer::V1beta1Service final : public DraServiceImpl<v1beta1::DRAPlugin::Service, false> {
  using DraServiceImpl::DraServiceImpl;
};

class DraServer::HealthV1alpha1Service final
    : public HealthServiceImpl<::v1alpha1::DRAResourceHealth::Service> {
  using HealthServiceImpl::HealthServiceImpl;
};
class DraServer::HealthV1Service final
    : public HealthServiceImpl<::v1::DRAResourceHealth::Service> {
  using HealthServiceImpl::HealthServiceImpl;
};

class DraServer::Registration final : public reg::Registration::Service {
 public:
  Registration(std::string driver, std::string endpoint, bool health)
      : driver_(std::move(driver)), endpoint_(std::move(endpoint)), health_(health) {}

  grpc::Status GetInfo(grpc::ServerContext*, const reg::InfoRequest*,
                       reg::PluginInfo* info) override {
    info->set_type("DRAPlugin");
    info->set_name(driver_);
    info->set_endpoint(endpoint_);
    info->add_supported_versions("v1.DRAPlugin");
    info->add_supported_versions("v1beta1.DRAPlugin");
    if (health_) {
      info->add_supported_versions("v1alpha1.DRAResourceHealth");  // 1.34 .. 1.36 kubelets
      info->add_supported_versions("v1.DRAResourceHealth");        // 1.37
    }
    return grpc::Status::OK;
  }

  grpc::Status NotifyRegistrationStatus(grpc::ServerContext*, const reg::RegistrationStatus* st,
                                        reg::RegistrationStatusResponse*) override {
    MutexLock l(mu_);
    registered_ = st->plugin_registered();
    error_ = st->error();
    if (!registered_) {
      spdlog::error("dra: the kubelet refused the registration of {}: {}", driver_, error_);
      return grpc::Status(grpc::StatusCode::UNKNOWN, "registration refused: " + error_);
    }
    spdlog::info("dra: registered {} with the kubelet (endpoint {})", driver_, endpoint_);
    return grpc::Status::OK;
  }

  bool registered() const {
    MutexLock l(mu_);
    return registered_;
  }
  std::string error() const {
    MutexLock l(mu_);
    return error_;
  }

 private:
  const std::string driver_;
  const std::string endpoint_;
  const bool health_;
  mutable Mutex mu_;
  bool registered_ ABSL_GUARDED_BY(mu_) = false;
  std::string error_ ABSL_GUARDED_BY(mu_);
};

std::string PluginDirOrDefault(const std::string& plugin_dir, const std::string& driver) {
  return plugin_dir.empty() ? StrCat("/var/lib/kubelet/plugins/", driver) : plugin_dir;
}

DraServer::DraServer(ServerOptions options, Driver* driver, HealthBoard* health)
    : options_(std::move(options)), driver_(driver), health_(health) {
  options_.plugin_dir = PluginDirOrDefault(options_.plugin_dir, options_.driver);
}

DraServer::~DraServer() {
  Stop();
}

std::string DraServer::RegistrationSocket() const {
  return deviceplugin::JoinPath(options_.registry_dir, options_.driver + "-reg.sock");
}
std::string DraServer::DraSocket() const {
  return deviceplugin::JoinPath(options_.plugin_dir, "dra.sock");
}

Status DraServer::Start() {
  Stop();
  const std::string endpoint = std::filesystem::absolute(DraSocket()).string();
  v1_ = std::make_unique<V1Service>(driver_);
  v1beta1_ = std::make_unique<V1beta1Service>(driver_);
  registration_ = std::make_unique<Registration>(options_.driver, endpoint, health_ != nullptr);
  std::vector<grpc::Service*> services = {v1_.get(), v1beta1_.get()};
  if (health_ != nullptr) {
    stopping_ = std::make_shared<std::atomic<bool>>(false);
    health_v1alpha1_ = std::make_unique<HealthV1alpha1Service>(health_, stopping_);
    health_v1_ = std::make_unique<HealthV1Service>(health_, stopping_);
    services.push_back(health_v1alpha1_.get());
    services.push_back(health_v1_.get());
  }
  HAMI_ASSIGN_OR_RETURN(dra_server_, Serve(DraSocket(), services));
  HAMI_ASSIGN_OR_RETURN(reg_server_, Serve(RegistrationSocket(), {registration_.get()}));
  return OkStatus();
}

void DraServer::Stop() {
  if (stopping_ != nullptr) stopping_->store(true);  // open health streams end
  const auto deadline = std::chrono::system_clock::now() + std::chrono::seconds(2);
  if (reg_server_ != nullptr) {
    reg_server_->Shutdown(deadline);
    reg_server_.reset();
    (void)RemoveSocket(RegistrationSocket());
  }
  if (dra_server_ != nullptr) {
    dra_server_->Shutdown(deadline);
    dra_server_.reset();
    (void)RemoveSocket(DraSocket());
  }
}

bool DraServer::Registered() const {
  return registration_ != nullptr && registration_->registered();
}
std::string DraServer::RegistrationError() const {
  return registration_ != nullptr ? registration_->error() : "";
}

}  // namespace hami::dra
