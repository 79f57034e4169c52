#include "deviceplugin/testing/fake_kubelet.h"

#include <grpcpp/grpcpp.h>
#include <sys/stat.h>

#include <filesystem>
#include <set>

#include "deviceplugin/proto/api.grpc.pb.h"
#include "deviceplugin/proto/podresources.grpc.pb.h"

namespace hami::deviceplugin::testing {

namespace fs = std::filesystem;

namespace {
Status FromGrpc(const grpc::Status& s, const char* what) {
  if (s.ok()) return OkStatus();
  return Status(static_cast<absl::StatusCode>(s.error_code()),
                StrCat(what, ": ", s.error_message()));
}
}  // namespace

class FakeKubelet::RegistrationService final : public v1beta1::Registration::Service {
 public:
  explicit RegistrationService(FakeKubelet* k) : k_(k) {}
  grpc::Status Register(grpc::ServerContext*, const v1beta1::RegisterRequest* req,
                        v1beta1::Empty*) override {
    // kubelet's checks (docs/upstream-contract.md#device-plugin-api-v1beta1): supported version,
    // extended resource name, file endpoint.
    if (req->version() != "v1beta1")
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          "unsupported API version " + req->version());
    if (req->resource_name().find('/') == std::string::npos)
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          "invalid resource name " + req->resource_name());
    if (req->endpoint().empty() || req->endpoint().find('/') != std::string::npos)
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          "invalid endpoint " + req->endpoint());
    k_->OnRegister(*req);
    return grpc::Status::OK;
  }

 private:
  FakeKubelet* k_;
};

class FakeKubelet::PodResourcesService final : public v1::PodResourcesLister::Service {
 public:
  explicit PodResourcesService(FakeKubelet* k) : k_(k) {}
  grpc::Status List(grpc::ServerContext*, const v1::ListPodResourcesRequest*,
                    v1::ListPodResourcesResponse* out) override {
    MutexLock l(k_->mu_);
    const std::string resource =
        k_->registrations_.empty() ? "" : k_->registrations_.back().resource_name();
    for (const auto& p : k_->known_pods_) {
      auto* pr = out->add_pod_resources();
      pr->set_namespace_(p.ns);
      pr->set_name(p.name);
      for (const auto& [name, ids] : p.containers) {
        auto* c = pr->add_containers();
        c->set_name(name);
        if (ids.empty()) continue;
        auto* d = c->add_devices();
        d->set_resource_name(resource);
        for (const auto& id : ids) d->add_device_ids(id);
      }
    }
    return grpc::Status::OK;
  }

 private:
  FakeKubelet* k_;
};

FakeKubelet::FakeKubelet(std::string dir) : dir_(std::move(dir)) {}
FakeKubelet::~FakeKubelet() {
  Stop();
  if (pr_server_) {
    pr_server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
    pr_server_->Wait();
  }
}

Status FakeKubelet::ServePodResources(const std::string& socket_path) {
  std::error_code ec;
  fs::create_directories(fs::path(socket_path).parent_path(), ec);
  fs::remove(socket_path, ec);
  pr_service_ = std::make_unique<PodResourcesService>(this);
  grpc::ServerBuilder b;
  b.AddListeningPort("unix:" + socket_path, grpc::InsecureServerCredentials());
  b.RegisterService(pr_service_.get());
  pr_server_ = b.BuildAndStart();
  if (!pr_server_) return Unavailable("fake kubelet cannot serve PodResources on ", socket_path);
  return OkStatus();
}

StatusOr<v1beta1::AllocateResponse> FakeKubelet::AdmitAndAllocate(
    const std::string& ns, const std::string& pod, const std::string& container,
    const std::vector<std::string>& ids) {
  auto find = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> KnownPod& {
    for (auto& p : known_pods_)
      if (p.ns == ns && p.name == pod) return p;
    known_pods_.push_back({ns, pod, {}});
    return known_pods_.back();
  };
  {
    MutexLock l(mu_);
    KnownPod& p = find();
    bool known = false;
    for (auto& c : p.containers) known |= c.first == container;
    if (!known) p.containers.push_back({container, {}});
  }
  auto r = Allocate({ids});
  if (r.ok()) {
    MutexLock l(mu_);
    for (auto& c : find().containers)
      if (c.first == container) c.second = ids;
  }
  return r;
}

StatusOr<FakeKubelet::Admitted> FakeKubelet::AdmitPreferred(const std::string& ns,
                                                            const std::string& pod,
                                                            const std::string& container, int n) {
  std::vector<std::string> available;
  {
    MutexLock l(mu_);
    std::set<std::string> held;
    for (const auto& p : known_pods_)
      for (const auto& c : p.containers) held.insert(c.second.begin(), c.second.end());
    for (const auto& d : devices_)
      if (d.health() == "Healthy" && !held.count(d.id())) available.push_back(d.id());
  }
  auto pref = GetPreferredAllocation(available, {}, n);
  if (!pref.ok()) return pref.status();
  if (pref->container_responses_size() != 1)
    return Internal("GetPreferredAllocation: not one container response");
  Admitted out;
  out.ids.assign(pref->container_responses(0).deviceids().begin(),
                 pref->container_responses(0).deviceids().end());
  if (static_cast<int>(out.ids.size()) != n)
    return Internal("GetPreferredAllocation: ", out.ids.size(), " devices, asked ", n);
  HAMI_ASSIGN_OR_RETURN(out.response, AdmitAndAllocate(ns, pod, container, out.ids));
  return out;
}

std::string FakeKubelet::KubeletSocketPath() const {
  return (fs::path(dir_) / "kubelet.sock").string();
}

Status FakeKubelet::Start() {
  return Serve();
}

Status FakeKubelet::Serve() {
  std::error_code ec;
  fs::create_directories(dir_, ec);
  fs::remove(KubeletSocketPath(), ec);
  service_ = std::make_unique<RegistrationService>(this);
  grpc::ServerBuilder b;
  b.AddListeningPort("unix:" + KubeletSocketPath(), grpc::InsecureServerCredentials());
  b.RegisterService(service_.get());
  server_ = b.BuildAndStart();
  if (!server_) return Unavailable("fake kubelet cannot serve ", KubeletSocketPath());
  return OkStatus();
}

void FakeKubelet::Stop() {
  if (server_) {
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
    server_->Wait();
    server_.reset();
  }
  service_.reset();
  DisconnectPlugin();
}

Status FakeKubelet::Restart() {
  Stop();
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir_, ec)) {
    if (e.is_socket(ec)) fs::remove(e.path(), ec);
  }
  return Serve();
}

void FakeKubelet::DisconnectPlugin() {
  std::thread t;
  {
    MutexLock l(mu_);
    ++stream_generation_;
    if (stream_ctx_) stream_ctx_->TryCancel();
    t = std::move(stream_thread_);
  }
  if (t.joinable()) t.join();
}

void FakeKubelet::OnRegister(const v1beta1::RegisterRequest& req) {
  DisconnectPlugin();  // a new registration replaces the old plugin connection
  auto ctx = std::make_shared<grpc::ClientContext>();
  uint64_t generation;
  {
    MutexLock l(mu_);
    registrations_.push_back(req);
    endpoint_ = req.endpoint();
    devices_.clear();
    updates_ = 0;
    stream_ctx_ = ctx;
    generation = stream_generation_;
    cv_.NotifyAll();
  }
  const std::string target = "unix:" + (fs::path(dir_) / req.endpoint()).string();
  std::thread t([this, ctx, target, generation] {
    auto stub = v1beta1::DevicePlugin::NewStub(
        grpc::CreateChannel(target, grpc::InsecureChannelCredentials()));
    {
      grpc::ClientContext octx;
      octx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
      v1beta1::DevicePluginOptions opts;
      if (stub->GetDevicePluginOptions(&octx, v1beta1::Empty(), &opts).ok()) {
        MutexLock l(mu_);
        if (generation == stream_generation_) options_ = opts;
      }
    }
    auto reader = stub->ListAndWatch(ctx.get(), v1beta1::Empty());
    v1beta1::ListAndWatchResponse resp;
    while (reader->Read(&resp)) {
      MutexLock l(mu_);
      if (generation != stream_generation_) break;
      devices_.assign(resp.devices().begin(), resp.devices().end());
      ++updates_;
      cv_.NotifyAll();
    }
    reader->Finish();
  });
  MutexLock l(mu_);
  stream_thread_ = std::move(t);
}

bool FakeKubelet::WaitForRegistrations(int n, std::chrono::milliseconds timeout) {
  MutexLock l(mu_);
  return cv_.WaitFor(mu_, timeout, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return static_cast<int>(registrations_.size()) >= n;
  });
}

std::vector<v1beta1::RegisterRequest> FakeKubelet::Registrations() const {
  MutexLock l(mu_);
  return registrations_;
}

bool FakeKubelet::WaitForDevices(const DevicesPredicate& pred, std::chrono::milliseconds timeout) {
  MutexLock l(mu_);
  return cv_.WaitFor(mu_, timeout, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return updates_ > 0 && pred(devices_);
  });
}

std::vector<v1beta1::Device> FakeKubelet::Devices() const {
  MutexLock l(mu_);
  return devices_;
}

int FakeKubelet::Updates() const {
  MutexLock l(mu_);
  return updates_;
}

v1beta1::DevicePluginOptions FakeKubelet::Options() const {
  MutexLock l(mu_);
  return options_;
}

StatusOr<std::unique_ptr<v1beta1::DevicePlugin::Stub>> FakeKubelet::PluginStub() const {
  std::string endpoint;
  {
    MutexLock l(mu_);
    endpoint = endpoint_;
  }
  if (endpoint.empty()) return FailedPrecondition("no device plugin registered");
  return v1beta1::DevicePlugin::NewStub(grpc::CreateChannel(
      "unix:" + (fs::path(dir_) / endpoint).string(), grpc::InsecureChannelCredentials()));
}

StatusOr<v1beta1::AllocateResponse> FakeKubelet::Allocate(
    const std::vector<std::vector<std::string>>& containers) {
  HAMI_ASSIGN_OR_RETURN(auto stub, PluginStub());
  v1beta1::AllocateRequest req;
  for (const auto& ids : containers) {
    auto* c = req.add_container_requests();
    for (const auto& id : ids) c->add_devices_ids(id);
  }
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  v1beta1::AllocateResponse resp;
  HAMI_RETURN_IF_ERROR(FromGrpc(stub->Allocate(&ctx, req, &resp), "Allocate"));
  return resp;
}

StatusOr<v1beta1::PreferredAllocationResponse> FakeKubelet::GetPreferredAllocation(
    const std::vector<std::string>& available, const std::vector<std::string>& must_include,
    int size) {
  HAMI_ASSIGN_OR_RETURN(auto stub, PluginStub());
  v1beta1::PreferredAllocationRequest req;
  auto* c = req.add_container_requests();
  for (const auto& id : available) c->add_available_deviceids(id);
  for (const auto& id : must_include) c->add_must_include_deviceids(id);
  c->set_allocation_size(size);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  v1beta1::PreferredAllocationResponse resp;
  HAMI_RETURN_IF_ERROR(
      FromGrpc(stub->GetPreferredAllocation(&ctx, req, &resp), "GetPreferredAllocation"));
  return resp;
}

}  // namespace hami::deviceplugin::testing
