#include "deviceplugin/plugin.h"

#include <grpcpp/grpcpp.h>
#include <poll.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>
#include <set>

#include "common/libc.h"
#include "common/log.h"
#include "core/annotations.h"
#include "core/mig.h"
#include "core/node_codec.h"
#include "deviceplugin/allocate_env.h"
#include "deviceplugin/mps.h"
#include "deviceplugin/node_devices.h"
#include "deviceplugin/proto/api.grpc.pb.h"
#include "vendors/nvidia/annotations.h"

namespace hami::deviceplugin {

namespace fs = std::filesystem;

namespace {

grpc::Status ToGrpc(const Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()));
}

// Identity of a socket file: a recreated kubelet.sock differs in inode or change time.
struct FileId {
  bool exists = false;
  ino_t ino = 0;
  int64_t ctime_ns = 0;
  bool operator==(const FileId&) const = default;
};

FileId StatFile(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return {};
  return {true, st.st_ino,
          static_cast<int64_t>(st.st_ctim.tv_sec) * 1'000'000'000 + st.st_ctim.tv_nsec};
}

// The region directory of one container: fresh, 0770, owned by the container's user and the pod's
// group. Never world-writable: the monitor (root) reads the files in it, and any other user of the
// host must not plant or swap them.
Status PrepareRegionDir(const std::string& dir, int64_t uid, int64_t gid) {
  std::error_code ec;
  fs::remove_all(dir, ec);
  if (ec) return Internal("cannot clear region directory ", dir, ": ", ec.message());
  fs::create_directories(fs::path(dir).parent_path(), ec);
  if (ec) return Internal("cannot create region root of ", dir, ": ", ec.message());
  if (::mkdir(dir.c_str(), 0700) != 0)
    return Internal("cannot create region directory ", dir, ": ", ErrnoText(errno));
  // chmod while the directory is still ours: after chown only CAP_FOWNER could.
  if (::chmod(dir.c_str(), 0770) != 0)
    return Internal("cannot chmod region directory ", dir, ": ", ErrnoText(errno));
  if ((uid >= 0 || gid >= 0) &&
      ::chown(dir.c_str(), uid >= 0 ? static_cast<uid_t>(uid) : static_cast<uid_t>(-1),
              gid >= 0 ? static_cast<gid_t>(gid) : static_cast<gid_t>(-1)) != 0)
    return Internal("cannot give region directory ", dir, " to ", uid, ":", gid,
                    " (the container's runAsUser:fsGroup; "
                    "the plugin needs CAP_CHOWN): ",
                    ErrnoText(errno));
  return OkStatus();
}

// Writes libvgpu's limits file (read-only for everybody; replaced atomically).
Status WriteLimitsFile(const std::string& path, const std::string& contents) {
  const std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "w");
  if (f == nullptr) return Internal("cannot write limits file ", tmp);
  bool ok = std::fwrite(contents.data(), 1, contents.size(), f) == contents.size();
  ok = std::fclose(f) == 0 && ok;
  if (!ok || ::chmod(tmp.c_str(), 0444) != 0 || std::rename(tmp.c_str(), path.c_str()) != 0)
    return Internal("cannot write limits file ", path);
  return OkStatus();
}

v1beta1::ContainerAllocateResponse ToResponse(const ContainerAllocation& alloc) {
  v1beta1::ContainerAllocateResponse out;
  for (const auto& [k, v] : alloc.envs) (*out.mutable_envs())[k] = v;
  for (const auto& m : alloc.mounts) {
    auto* pm = out.add_mounts();
    pm->set_container_path(m.container_path);
    pm->set_host_path(m.host_path);
    pm->set_read_only(m.read_only);
  }
  for (const auto& [k, v] : alloc.annotations) (*out.mutable_annotations())[k] = v;
  for (const auto& name : alloc.cdi_devices) out.add_cdi_devices()->set_name(name);
  return out;
}

std::string Placement(const core::MigPlacement& p) {
  return StrCat("slices ", p.start, "+", p.size);
}

}  // namespace

// ---- gRPC service: thin adapter over DevicePlugin ----
class DevicePlugin::Service final : public v1beta1::DevicePlugin::Service {
 public:
  explicit Service(DevicePlugin* p) : p_(p) {}

  grpc::Status GetDevicePluginOptions(grpc::ServerContext*, const v1beta1::Empty*,
                                      v1beta1::DevicePluginOptions* out) override {
    *out = p_->Options();
    return grpc::Status::OK;
  }

  grpc::Status ListAndWatch(grpc::ServerContext* ctx, const v1beta1::Empty*,
                            grpc::ServerWriter<v1beta1::ListAndWatchResponse>* writer) override {
    uint64_t generation;
    {
      MutexLock l(p_->mu_);
      generation = p_->generation_;
    }
    bool first = true;
    uint64_t seen = 0;
    while (true) {
      v1beta1::ListAndWatchResponse resp;
      {
        MutexLock l(p_->mu_);
        p_->cv_.WaitFor(p_->mu_, std::chrono::milliseconds(200),
                        [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(p_->mu_) {
                          return first || p_->version_ != seen || p_->generation_ != generation ||
                                 p_->stopping_;
                        });
        if (p_->generation_ != generation || p_->stopping_) return grpc::Status::OK;
        if (ctx->IsCancelled()) return grpc::Status::CANCELLED;
        if (!first && p_->version_ == seen) continue;
        first = false;
        seen = p_->version_;
        resp = p_->DeviceListLocked();
      }
      if (!writer->Write(resp)) return grpc::Status::OK;  // kubelet went away
    }
  }

  grpc::Status GetPreferredAllocation(grpc::ServerContext*,
                                      const v1beta1::PreferredAllocationRequest* req,
                                      v1beta1::PreferredAllocationResponse* out) override {
    *out = p_->PreferredAllocation(*req);
    return grpc::Status::OK;
  }

  grpc::Status Allocate(grpc::ServerContext*, const v1beta1::AllocateRequest* req,
                        v1beta1::AllocateResponse* out) override {
    auto r = p_->Allocate(*req);
    if (!r.ok()) {
      spdlog::error("Allocate failed: {}", std::string(r.status().message()));
      return ToGrpc(r.status());
    }
    *out = std::move(*r);
    return grpc::Status::OK;
  }

  grpc::Status PreStartContainer(grpc::ServerContext*, const v1beta1::PreStartContainerRequest*,
                                 v1beta1::PreStartContainerResponse*) override {
    return grpc::Status::OK;  // pre_start_required is false; nothing to prepare
  }

 private:
  DevicePlugin* p_;
};

DevicePlugin::DevicePlugin(PluginConfig config, gpu::DeviceDiscovery* discovery,
                           PendingPodSource* pending, uint64_t seed)
    : config_(std::move(config)), discovery_(discovery), pending_(pending), rng_(seed) {}

DevicePlugin::~DevicePlugin() {
  Stop();
}

std::string DevicePlugin::SocketPath() const {
  return JoinPath(config_.plugin_dir, config_.socket_name);
}
std::string DevicePlugin::KubeletSocketPath() const {
  return JoinPath(config_.plugin_dir, config_.kubelet_socket);
}

void DevicePlugin::ServeStaticMig(std::vector<StaticMigDevice> devices, bool with_shared_gpus) {
  static_mig_ = std::move(devices);
  static_mig_index_.clear();
  for (size_t i = 0; i < static_mig_.size(); ++i) static_mig_index_[static_mig_[i].uuid] = i;
  with_shared_gpus_ = with_shared_gpus;
}

Status DevicePlugin::Start() {
  if (started_) return FailedPrecondition("device plugin already started");
  HAMI_RETURN_IF_ERROR(Validate(config_));
  HAMI_ASSIGN_OR_RETURN(std::vector<gpu::GpuInfo> all, discovery_->ListDevices());
  size_t kept = 0;
  {
    MutexLock l(mu_);
    all_gpus_ = all;
    gpus_ = FilterDevices(all, config_);
    // Static MIG: a GPU with MIG on offers its MIG devices (ServeStaticMig), it is not shared.
    if (config_.mig_strategy != "none")
      std::erase_if(gpus_, [](const gpu::GpuInfo& g) { return g.mig_enabled; });
    if (!with_shared_gpus_) gpus_.clear();
    for (const auto& m : static_mig_) static_mig_gpu_healthy_[m.gpu_uuid] = true;
    for (const auto& g : gpus_) {
      healthy_[g.uuid] = true;
      for (auto& id : ReplicaIds(g.uuid, config_.split_count)) replica_to_uuid_[id] = g.uuid;
    }
    ++version_;
    kept = gpus_.size();
  }
  if (auto links = discovery_->Topology(); links.ok()) {
    MutexLock l(mu_);
    links_ = std::move(*links);
  } else {
    spdlog::warn("GPU topology unavailable: {}", std::string(links.status().message()));
  }
  spdlog::info(
      "device plugin: {} shared GPU(s) ({} excluded or static MIG), {} replicas each, {} static "
      "MIG device(s) (strategy {}), resource {}",
      kept, all.size() - kept, config_.split_count, static_mig_.size(), config_.mig_strategy,
      config_.resource_name);
  if (config_.mode == core::kModeMig) {
    if (mig_ == nullptr) spdlog::warn("operating mode mig without MIG control: grants will fail");
    MutexLock l(mu_);
    for (const auto& g : gpus_) {
      if (!g.mig_enabled || g.mig_profiles.empty())
        spdlog::warn(
            "GPU {} has MIG {}: registered as a shared (hami-core) GPU; enable MIG "
            "(nvidia-smi -i {} -mig 1) to offer its instances",
            g.uuid, g.mig_enabled ? "on but reports no profile" : "off", g.index);
    }
  }

  if (config_.mode == core::kModeMps) {
    // The daemon may start after us (or restart): Allocate checks it for every container.
    if (Status d = CheckMpsControlDaemon(config_.mps_pipe_dir); !d.ok())
      spdlog::warn("operating mode mps: {}; Allocate refuses containers until it runs",
                   std::string(d.message()));
    else
      spdlog::info("operating mode mps: containers are clients of the MPS control daemon of {}",
                   config_.mps_pipe_dir);
    MutexLock l(mu_);
    for (const auto& g : gpus_)
      if (g.mig_enabled)
        spdlog::warn(
            "GPU {} has MIG on: MPS clients cannot use it as a whole GPU; disable MIG "
            "(nvidia-smi -i {} -mig 0)",
            g.uuid, g.index);
  }

  std::error_code ec;
  fs::create_directories(config_.plugin_dir, ec);
  HAMI_RETURN_IF_ERROR(StartServer());

  auto watch = discovery_->WatchHealth([this](const gpu::HealthEvent& ev) { OnHealth(ev); });
  if (watch.ok()) {
    health_watch_ = std::move(*watch);
  } else {
    spdlog::warn("health checks disabled: {}", std::string(watch.status().message()));
  }

  inotify_fd_ = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (inotify_fd_ < 0 || inotify_add_watch(inotify_fd_, config_.plugin_dir.c_str(),
                                           IN_CREATE | IN_DELETE | IN_MOVED_TO) < 0) {
    // Without inotify the watch loop still polls the sockets every tick.
    spdlog::warn("inotify on {} unavailable; polling for kubelet restarts", config_.plugin_dir);
  }
  stop_ = false;
  started_ = true;
  watcher_ = std::thread([this] { WatchLoop(); });
  return OkStatus();
}

void DevicePlugin::Stop() {
  if (!started_) return;
  started_ = false;
  stop_ = true;
  if (watcher_.joinable()) watcher_.join();
  health_watch_.reset();
  {
    MutexLock l(mu_);
    stopping_ = true;
  }
  cv_.NotifyAll();
  StopServer();
  if (inotify_fd_ >= 0) ::close(inotify_fd_);
  inotify_fd_ = -1;
  std::error_code ec;
  fs::remove(SocketPath(), ec);
}

Status DevicePlugin::StartServer() {
  MutexLock l(server_mu_);
  const std::string path = SocketPath();
  std::error_code ec;
  fs::remove(path, ec);  // a stale socket from a previous run would make bind fail
  service_ = std::make_unique<Service>(this);
  grpc::ServerBuilder b;
  b.AddListeningPort("unix:" + path, grpc::InsecureServerCredentials());
  b.RegisterService(service_.get());
  server_ = b.BuildAndStart();
  if (!server_) return Unavailable("cannot serve the device plugin on ", path);
  {
    MutexLock m(mu_);
    stopping_ = false;
  }
  return OkStatus();
}

void DevicePlugin::StopServer() {
  MutexLock l(server_mu_);
  {
    MutexLock m(mu_);
    ++generation_;  // ends running ListAndWatch streams
  }
  cv_.NotifyAll();
  if (server_) {
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
    server_->Wait();
  }
  server_.reset();
  service_.reset();
}

Status DevicePlugin::Register() {
  auto channel =
      grpc::CreateChannel("unix:" + KubeletSocketPath(), grpc::InsecureChannelCredentials());
  auto stub = v1beta1::Registration::NewStub(channel);
  v1beta1::RegisterRequest req;
  req.set_version(kApiVersion);
  req.set_endpoint(config_.socket_name);
  req.set_resource_name(config_.resource_name);
  *req.mutable_options() = Options();
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  v1beta1::Empty resp;
  grpc::Status s = stub->Register(&ctx, req, &resp);
  if (!s.ok()) {
    return Unavailable("register ", config_.resource_name, " with kubelet at ", KubeletSocketPath(),
                       ": ", s.error_message());
  }
  ++registrations_;
  spdlog::info("registered {} with kubelet (endpoint {})", config_.resource_name,
               config_.socket_name);
  return OkStatus();
}

void DevicePlugin::WatchLoop() {
  FileId registered_with;  // kubelet.sock we registered with; !exists = not registered
  auto last_attempt = std::chrono::steady_clock::time_point{};
  while (!stop_) {
    if (inotify_fd_ >= 0) {
      pollfd p{inotify_fd_, POLLIN, 0};
      if (::poll(&p, 1, 200) > 0) {
        // Any change in the directory wakes us; what changed is re-checked below.
        alignas(inotify_event) char buf[4096];
        while (::read(inotify_fd_, buf, sizeof buf) > 0) {
        }
      }
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    if (stop_) break;
    FileId kubelet = StatFile(KubeletSocketPath());
    bool own = StatFile(SocketPath()).exists;
    // A restarting kubelet deletes the sockets in the directory, then creates a new kubelet.sock.
    // Act once the new kubelet.sock is there (compared by identity: inode + change time), so one
    // restart leads to exactly one new server and registration.
    if (registered_with.exists && !kubelet.exists) continue;
    bool restarted = registered_with.exists && (!(kubelet == registered_with) || !own);
    if (restarted) {
      spdlog::info(
          "kubelet restarted (kubelet.sock recreated or our socket removed); serving again");
      StopServer();
      Status s = StartServer();
      if (!s.ok()) spdlog::error("{}", std::string(s.message()));
      registered_with = FileId{};
      last_attempt = {};
    }
    if (registered_with.exists || !kubelet.exists) continue;
    auto now = std::chrono::steady_clock::now();
    if (now - last_attempt < std::chrono::seconds(1)) continue;
    last_attempt = now;
    if (!StatFile(SocketPath()).exists) {
      Status s = StartServer();
      if (!s.ok()) {
        spdlog::error("{}", std::string(s.message()));
        continue;
      }
    }
    Status s = Register();
    if (s.ok()) {
      registered_with = kubelet;
    } else {
      spdlog::warn("{}; retrying", std::string(s.message()));
    }
  }
}

void DevicePlugin::OnHealth(const gpu::HealthEvent& ev) {
  {
    MutexLock l(mu_);
    bool changed = false;
    for (auto* health : {&healthy_, &static_mig_gpu_healthy_}) {
      for (auto& [uuid, h] : *health) {
        if ((ev.uuid.empty() || ev.uuid == uuid) && h != ev.healthy) {
          h = ev.healthy;
          changed = true;
        }
      }
    }
    if (!changed) return;
    ++version_;
  }
  spdlog::warn("GPU {} is now {}: {}", ev.uuid.empty() ? "(all)" : ev.uuid,
               ev.healthy ? kHealthy : kUnhealthy, ev.reason);
  cv_.NotifyAll();
}

std::vector<core::DeviceInfo> DevicePlugin::NodeDevices() const {
  MutexLock l(mu_);
  return BuildNodeDevices(gpus_, healthy_, config_);
}

std::map<std::string, std::string> DevicePlugin::NodeAnnotations(bool with_link_scores) const {
  MutexLock l(mu_);
  std::map<std::string, std::string> out;
  out[vendors::nvidia::kNodeNvidiaRegister] =
      core::EncodeNodeDevicesJson(BuildNodeDevices(gpus_, healthy_, config_));
  if (with_link_scores)
    out[vendors::nvidia::kNodeNvidiaScore] =
        core::EncodeLinkScores(BuildLinkScores(all_gpus_, links_, config_));
  return out;
}

v1beta1::DevicePluginOptions DevicePlugin::Options() const {
  v1beta1::DevicePluginOptions o;
  o.set_pre_start_required(false);
  o.set_get_preferred_allocation_available(config_.enable_preferred_allocation);
  return o;
}

v1beta1::ListAndWatchResponse DevicePlugin::DeviceList() const {
  MutexLock l(mu_);
  return DeviceListLocked();
}

v1beta1::ListAndWatchResponse DevicePlugin::DeviceListLocked() const {
  v1beta1::ListAndWatchResponse resp;
  for (const auto& g : gpus_) {
    auto h = healthy_.find(g.uuid);
    const bool ok = h == healthy_.end() || h->second;
    for (const auto& id : ReplicaIds(g.uuid, config_.split_count)) {
      v1beta1::Device* d = resp.add_devices();
      d->set_id(id);
      d->set_health(ok ? kHealthy : kUnhealthy);
      if (config_.enable_numa_topology && g.numa_node >= 0) {
        d->mutable_topology()->add_nodes()->set_id(g.numa_node);
      }
    }
  }
  for (const auto& m : static_mig_) {
    auto h = static_mig_gpu_healthy_.find(m.gpu_uuid);
    v1beta1::Device* d = resp.add_devices();
    d->set_id(m.uuid);
    d->set_health(h == static_mig_gpu_healthy_.end() || h->second ? kHealthy : kUnhealthy);
    if (config_.enable_numa_topology && m.numa_node >= 0)
      d->mutable_topology()->add_nodes()->set_id(m.numa_node);
  }
  return resp;
}

v1beta1::PreferredAllocationResponse DevicePlugin::PreferredAllocation(
    const v1beta1::PreferredAllocationRequest& req) {
  MutexLock l(alloc_mu_);
  std::vector<PendingPod> pods;
  if (auto listed = pending_->ListPending(); listed.ok()) {
    pods = std::move(*listed);
  } else {
    spdlog::warn("GetPreferredAllocation: {}", std::string(listed.status().message()));
  }
  v1beta1::PreferredAllocationResponse resp;
  for (const auto& cr : req.container_requests()) {
    std::vector<std::string> available(cr.available_deviceids().begin(),
                                       cr.available_deviceids().end());
    std::vector<std::string> chosen(cr.must_include_deviceids().begin(),
                                    cr.must_include_deviceids().end());
    std::vector<std::string> available_uuids;
    for (const auto& id : available) {
      if (auto u = ReplicaUuid(id); u.ok()) available_uuids.push_back(*u);
    }
    auto taken = [&](const std::string& id) {
      return std::find(chosen.begin(), chosen.end(), id) != chosen.end();
    };
    auto cands = PreferenceCandidates(pods, cr.allocation_size(), available_uuids);
    if (cands.empty() && chosen.empty()) chosen = NumaRefit(pods, cr.allocation_size(), available);
    if (cands.size() == 1 && chosen.empty()) {
      const PendingPod& p = *cands.front();
      for (const auto& d : p.containers.front().devices) {
        for (const auto& id : available) {
          auto u = ReplicaUuid(id);
          if (u.ok() && *u == d.uuid && !taken(id)) {
            chosen.push_back(id);
            break;
          }
        }
      }
      steered_.push_back(
          {p.uid, p.containers.front().index, std::set<std::string>(chosen.begin(), chosen.end())});
      if (steered_.size() > 64) steered_.erase(steered_.begin());
    }
    for (const auto& id : available) {
      if (static_cast<int>(chosen.size()) >= cr.allocation_size()) break;
      if (!taken(id)) chosen.push_back(id);
    }
    auto* out = resp.add_container_responses();
    for (const auto& id : chosen) out->add_deviceids(id);
  }
  return resp;
}

std::vector<std::string> DevicePlugin::NumaRefit(const std::vector<PendingPod>& pods, int size,
                                                 const std::vector<std::string>& available) {
  std::vector<std::string> offered;  // physical UUIDs kubelet offers, first-seen order
  for (const auto& id : available)
    if (auto u = ReplicaUuid(id);
        u.ok() && std::find(offered.begin(), offered.end(), *u) == offered.end())
      offered.push_back(*u);
  const PendingPod* pod = nullptr;
  int mismatched = 0;
  for (const auto& p : pods) {
    if (!p.refused.empty() || p.containers.empty()) continue;
    const auto& devs = p.containers.front().devices;
    if (static_cast<int>(devs.size()) != size) continue;
    if (std::all_of(devs.begin(), devs.end(), [&](const core::ContainerDevice& d) {
          return std::find(offered.begin(), offered.end(), d.uuid) != offered.end();
        }))
      continue;
    pod = &p;
    ++mismatched;
  }
  if (mismatched != 1 || pod->numa_alignment == core::NumaAlignment::kNone) return {};
  const PendingContainer& ctr = pod->containers.front();
  const bool strict = pod->numa_alignment == core::NumaAlignment::kStrict;
  const bool mig = std::any_of(ctr.devices.begin(), ctr.devices.end(),
                               [](const auto& d) { return !d.mig_profile.empty(); });
  if (refit_ == nullptr || mig || config_.mode == "mig") {
    // Without the refit (or for MIG, which it does not move) the mismatch is only reported.
    const std::string why = mig || config_.mode == "mig" ? "MIG grants are not refitted"
                                                         : "the NUMA refit is not enabled";
    if (strict)
      spdlog::error("pod {} container {}: kubelet offers none of its GPUs; {}", pod->Key(),
                    ctr.name, why);
    else
      spdlog::info("pod {} container {}: kubelet offers none of its GPUs; {}", pod->Key(), ctr.name,
                   why);
    return {};
  }
  core::RefitRequest req;
  req.pod_uid = pod->uid;
  req.pod_namespace = pod->namespace_;
  req.pod_name = pod->name;
  req.node_name = node_name_;
  req.container_index = ctr.index;
  req.container_name = ctr.name;
  req.device_type = core::kNvidiaVendor;
  req.allowed_device_uuids = offered;
  if (req.allowed_device_uuids.size() > core::kMaxRefitAllowedDevices)
    req.allowed_device_uuids.resize(core::kMaxRefitAllowedDevices);
  auto moved = refit_->Refit(req);
  if (!moved.ok()) {
    if (strict) {
      const std::string reason =
          StrCat("numa-alignment strict: NUMA refit failed: ", moved.status().message());
      spdlog::error("pod {} container {}: {}", pod->Key(), ctr.name, reason);
      if (Status s = pending_->MarkFailed(*pod, reason); !s.ok())
        spdlog::warn("pod {}: cannot mark the allocation failed: {}", pod->Key(),
                     std::string(s.message()));
    } else {
      spdlog::info(
          "pod {} container {}: NUMA refit failed; best-effort keeps kubelet's own "
          "selection: {}",
          pod->Key(), ctr.name, std::string(moved.status().message()));
    }
    return {};
  }
  std::vector<std::string> pick;
  for (const auto& d : *moved) {
    for (const auto& id : available) {
      auto u = ReplicaUuid(id);
      if (u.ok() && *u == d.uuid && std::find(pick.begin(), pick.end(), id) == pick.end()) {
        pick.push_back(id);
        break;
      }
    }
  }
  if (static_cast<int>(pick.size()) != size) {
    // The scheduler moved the grant already: arming kubelet's own choice would run the container
    // on GPUs its accounting does not charge.
    const std::string reason = StrCat("NUMA refit moved the grant to ", moved->size(),
                                      " GPU(s) kubelet cannot offer ", size, " replicas of");
    spdlog::error("pod {} container {}: {}", pod->Key(), ctr.name, reason);
    (void)pending_->MarkFailed(*pod, reason);
    return {};
  }
  spdlog::info("pod {} container {}: NUMA refit moved its grant onto GPUs kubelet offers",
               pod->Key(), ctr.name);
  steered_.push_back({pod->uid, ctr.index, std::set<std::string>(pick.begin(), pick.end())});
  if (steered_.size() > 64) steered_.erase(steered_.begin());
  return pick;
}

std::string DevicePlugin::NewCacheFileName() {
  uint64_t a = rng_.Next(), b = rng_.Next();
  char buf[64];
  std::snprintf(buf, sizeof buf, "%08x-%04x-%04x-%04x-%012llx.cache",
                static_cast<unsigned>(a >> 32), static_cast<unsigned>((a >> 16) & 0xffff),
                static_cast<unsigned>(a & 0xffff), static_cast<unsigned>(b >> 48),
                static_cast<unsigned long long>(b & 0xffffffffffffULL));
  return buf;
}

StatusOr<v1beta1::AllocateResponse> DevicePlugin::Allocate(const v1beta1::AllocateRequest& req) {
  MutexLock l(alloc_mu_);
  v1beta1::AllocateResponse resp;
  for (const auto& cr : req.container_requests()) {
    HAMI_ASSIGN_OR_RETURN(*resp.add_container_responses(), AllocateOne(cr));
  }
  return resp;
}

StatusOr<v1beta1::ContainerAllocateResponse> DevicePlugin::AllocateOne(
    const v1beta1::ContainerAllocateRequest& cr) {
  std::vector<std::string> ids(cr.devices_ids().begin(), cr.devices_ids().end());
  if (ids.empty()) return InvalidArgument("Allocate: container request names no devices");
  size_t static_ids = 0;
  {
    MutexLock m(mu_);
    for (const auto& id : ids) {
      if (static_mig_index_.count(id)) {
        ++static_ids;
      } else if (!replica_to_uuid_.count(id)) {
        return InvalidArgument("Allocate: unknown device ID '", id,
                               "' (not advertised by this plugin)");
      }
    }
  }
  if (static_ids > 0) {
    if (static_ids != ids.size())
      return InvalidArgument("Allocate: one container request names ", static_ids,
                             " static MIG device(s) and ", ids.size() - static_ids,
                             " shared GPU replica(s); a container gets either");
    return AllocateStaticMig(ids);
  }
  auto listed = pending_->ListPending();
  if (!listed.ok())
    return Unavailable("Allocate: cannot find pending pods: ",
                       std::string(listed.status().message()));
  HAMI_ASSIGN_OR_RETURN(Selection sel, SelectPending(*listed, ids, steered_, kubelet_view_));
  const PendingPod& pod = sel.pod;
  const PendingContainer& ctr = sel.container;

  auto fail = [&](const Status& s) -> Status {
    Status annotated = Annotate(s, StrCat("Allocate for pod ", pod.Key(), " container ", ctr.name));
    Status mark = pending_->MarkFailed(pod, std::string(annotated.message()));
    if (!mark.ok())
      spdlog::error("cannot record failure of {}: {}", pod.Key(), std::string(mark.message()));
    return annotated;
  };
  std::map<std::string, int> gpu_indices;  // for device ID strategy "index"
  std::set<std::string> mig_gpus;          // registered in mode mig
  {
    MutexLock m(mu_);
    for (const auto& d : ctr.devices) {
      auto h = healthy_.find(d.uuid);
      if (h == healthy_.end())
        return fail(FailedPrecondition("decided GPU ", d.uuid, " is not on this node"));
      if (!h->second) return fail(FailedPrecondition("decided GPU ", d.uuid, " is unhealthy"));
    }
    for (const auto& g : all_gpus_) gpu_indices[g.uuid] = g.index;
    for (const auto& d : BuildNodeDevices(gpus_, healthy_, config_))
      if (d.mode == core::kModeMig) mig_gpus.insert(d.uuid);
  }
  size_t mig_grants = 0;
  for (const auto& d : ctr.devices) {
    mig_grants += d.mig_profile.empty() ? 0 : 1;
    // A GPU in MIG mode runs nothing without an instance: a plain grant on it cannot be armed.
    if (d.mig_profile.empty() && mig_gpus.count(d.uuid))
      return fail(FailedPrecondition("decided GPU ", d.uuid,
                                     " is in MIG mode but the decision names no MIG instance for "
                                     "it (no matching ",
                                     core::kMigAllocations, " entry)"));
  }
  std::string cache_file = NewCacheFileName();
  StatusOr<ContainerAllocation> alloc = InvalidArgument("no allocation");
  std::string what;  // for the log line
  if (mig_grants > 0) {
    if (mig_grants != ctr.devices.size())
      return fail(FailedPrecondition(
          "the decision gives this container ", mig_grants, " MIG instance(s) and ",
          ctr.devices.size() - mig_grants,
          " shared GPU(s); one container gets either (docs/migration.md, Dynamic MIG)"));
    auto uuids = EnsureMigInstances(pod, ctr);
    if (!uuids.ok()) return fail(uuids.status());
    alloc = BuildMigContainerAllocation(pod, ctr, config_, *uuids,
                                        cache_file.substr(0, cache_file.size() - 6));
    for (const auto& u : *uuids) what += (what.empty() ? "" : ",") + u;
    if (!alloc.ok()) return fail(alloc.status());
  } else if (config_.mode == core::kModeMps) {
    // An MPS client started without the daemon runs outside MPS, unlimited: refuse it instead.
    if (Status s = CheckMpsControlDaemon(config_.mps_pipe_dir); !s.ok()) return fail(s);
    alloc = BuildMpsContainerAllocation(pod, ctr, config_,
                                        cache_file.substr(0, cache_file.size() - 6), gpu_indices);
    if (!alloc.ok()) return fail(alloc.status());
    what = StrCat("MPS client of ", config_.mps_pipe_dir);
  } else {
    alloc = BuildContainerAllocation(pod, ctr, config_, cache_file, gpu_indices);
    if (!alloc.ok()) return fail(alloc.status());
    if (Status s = PrepareRegionDir(alloc->region_host_dir, alloc->region_uid, alloc->region_gid);
        !s.ok())
      return fail(s);
    if (Status s = WriteLimitsFile(alloc->limits_host_path, alloc->limits_file); !s.ok())
      return fail(s);
    what = alloc->region_host_dir;
  }
  if (Status s = pending_->MarkAllocated(pod, ctr.index); !s.ok())
    return Unavailable("Allocate for pod ", pod.Key(),
                       ": cannot record the allocation: ", std::string(s.message()));
  steered_.erase(std::remove_if(steered_.begin(), steered_.end(),
                                [&](const SteeredChoice& c) {
                                  return c.pod_uid == pod.uid && c.container_index == ctr.index;
                                }),
                 steered_.end());

  std::string decided;
  for (const auto& d : ctr.devices) decided += (decided.empty() ? "" : ",") + d.uuid;
  spdlog::info("allocated pod {} container {}: {} ({}, device list {})", pod.Key(), ctr.name,
               decided, what, config_.device_list_strategy);
  return ToResponse(*alloc);
}

StatusOr<v1beta1::ContainerAllocateResponse> DevicePlugin::AllocateStaticMig(
    const std::vector<std::string>& ids) {
  {
    MutexLock m(mu_);
    for (const auto& id : ids) {
      const StaticMigDevice& d = static_mig_[static_mig_index_.at(id)];
      auto h = static_mig_gpu_healthy_.find(d.gpu_uuid);
      if (h != static_mig_gpu_healthy_.end() && !h->second)
        return FailedPrecondition("Allocate: MIG device ", id, " (", d.profile, ") is on GPU ",
                                  d.gpu_uuid, ", which is unhealthy");
    }
  }
  const std::string cache_file = NewCacheFileName();  // its name is the allocation's ID
  HAMI_ASSIGN_OR_RETURN(
      ContainerAllocation alloc,
      BuildMigDeviceListAllocation(ids, config_, cache_file.substr(0, cache_file.size() - 6)));
  std::string list;
  for (const auto& id : ids) list += (list.empty() ? "" : ",") + id;
  spdlog::info("allocated static MIG device(s) {} of {} (device list {})", list,
               config_.resource_name, config_.device_list_strategy);
  return ToResponse(alloc);
}

StatusOr<std::vector<std::string>> DevicePlugin::EnsureMigInstances(const PendingPod& pod,
                                                                    const PendingContainer& ctr) {
  if (config_.mode != core::kModeMig)
    return FailedPrecondition(
        "the decision grants MIG instances but this node's operating mode is ", config_.mode,
        " (nodeconfig operatingmode)");
  if (mig_ == nullptr)
    return FailedPrecondition(
        "the decision grants MIG instances but this plugin cannot create "
        "them (NVML without the MIG API)");
  // What this node registered: a grant is honoured only as the node reported the GPU.
  std::map<std::string, core::DeviceInfo> registered;
  {
    MutexLock m(mu_);
    for (auto& d : BuildNodeDevices(gpus_, healthy_, config_)) registered[d.uuid] = std::move(d);
  }
  std::vector<gpu::MigInstance> created;  // by this call: undone on error
  std::vector<std::pair<std::string, int>> claimed;
  auto undo = [&](const Status& s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(alloc_mu_) -> Status {
    for (size_t i = 0; i < created.size(); ++i) {
      const std::string& gpu = claimed[i].first;
      if (Status d = mig_->DestroyMigInstance(gpu, created[i].gpu_instance_id); !d.ok())
        spdlog::error("cannot undo MIG instance {}: {}", created[i].uuid, std::string(d.message()));
    }
    for (const auto& key : claimed) mig_owners_.erase(key);
    return s;
  };
  std::vector<std::string> uuids;
  std::vector<core::MigAllocation> identities;
  for (size_t i = 0; i < ctr.devices.size(); ++i) {
    const core::ContainerDevice& d = ctr.devices[i];
    const std::string where =
        StrCat("MIG ", d.mig_profile, " on GPU ", d.uuid, " at ", Placement(d.mig_placement));
    auto reg = registered.find(d.uuid);
    if (reg == registered.end()) return undo(FailedPrecondition(where, ": GPU not registered"));
    if (std::string why = core::CheckMigGrant(reg->second, d); !why.empty())
      return undo(FailedPrecondition(where, ": ", why, " (as this node registered it)"));
    auto listed = mig_->ListMigInstances(d.uuid);
    if (!listed.ok()) return undo(Annotate(listed.status(), where));
    const gpu::MigPlacement at{d.mig_placement.start, d.mig_placement.size};
    const auto key = std::make_pair(d.uuid, at.start);
    std::optional<gpu::MigInstance> inst;
    for (const auto& x : *listed) {
      if (!(x.placement == at)) continue;
      // Reuse only what is provably this container's: made by an earlier try of this plugin, or
      // recorded on the pod (a restarted plugin). Anything else is another pod's, or debris.
      auto own = mig_owners_.find(key);
      const bool ours = own != mig_owners_.end() && own->second.pod_uid == pod.uid &&
                        own->second.container_index == ctr.index &&
                        own->second.instance.uuid == x.uuid;
      bool recorded = false;
      for (const auto& e : ctr.mig) {
        recorded = recorded || (e.device_index == static_cast<int>(i) && e.HasRuntime() &&
                                e.mig_uuid == x.uuid && e.gpu_instance_id == x.gpu_instance_id);
      }
      if (x.profile != d.mig_profile || x.uuid.empty() || !(ours || recorded))
        return undo(FailedPrecondition(where, ": the placement holds ",
                                       x.uuid.empty() ? "a GPU instance without compute instance"
                                                      : StrCat("MIG device ", x.uuid),
                                       " (", x.profile, ") that is not this container's"));
      inst = x;
    }
    if (!inst) {
      auto made = mig_->CreateMigInstance(d.uuid, d.mig_profile, at);
      if (!made.ok()) return undo(made.status());
      inst = *made;
      created.push_back(*made);
      claimed.push_back(key);
      spdlog::info("pod {} container {}: created MIG device {} ({} at {}, GPU instance {})",
                   pod.Key(), ctr.name, made->uuid, d.mig_profile, Placement(d.mig_placement),
                   made->gpu_instance_id);
    }
    mig_owners_[key] = MigOwner{pod.uid, ctr.index, *inst};
    uuids.push_back(inst->uuid);
    identities.push_back(core::MigAllocation{ctr.index, static_cast<int>(i), d.uuid, d.mig_profile,
                                             d.mig_placement, inst->uuid, inst->gpu_instance_id,
                                             inst->compute_instance_id});
  }
  // Best effort: the in-memory owners already cover retries; the record covers a plugin restart.
  if (Status s = pending_->RecordMig(pod, identities); !s.ok())
    spdlog::warn("pod {}: cannot record its MIG devices on {}: {}", pod.Key(),
                 core::kMigAllocations, std::string(s.message()));
  return uuids;
}

StatusOr<int> DevicePlugin::ReclaimMigInstances() {
  if (config_.mode != core::kModeMig || mig_ == nullptr) return 0;
  MutexLock l(alloc_mu_);  // never between an Allocate's create and its record
  auto grants = pending_->ActiveMigGrants();
  if (!grants.ok())
    return Annotate(grants.status(), "MIG reclaim skipped: the pods' MIG grants are unknown");
  std::vector<std::string> gpus;
  {
    MutexLock m(mu_);
    for (const auto& d : BuildNodeDevices(gpus_, healthy_, config_))
      if (d.mode == core::kModeMig) gpus.push_back(d.uuid);
  }
  std::set<std::string> unclaimed;
  int destroyed = 0;
  for (const auto& gpu : gpus) {
    auto listed = mig_->ListMigInstances(gpu);
    if (!listed.ok()) {
      spdlog::warn("MIG reclaim: {}", std::string(listed.status().message()));
      continue;
    }
    for (const auto& inst : *listed) {
      const core::MigPlacement at{inst.placement.start, inst.placement.size};
      // Held: a grant names this very instance (its GPU, placement and profile, and its MIG UUID
      // once recorded). A GPU instance without a compute instance serves no container.
      const bool used =
          !inst.uuid.empty() && std::any_of(grants->begin(), grants->end(), [&](const auto& g) {
            return g.gpu_uuid == gpu && g.placement == at && g.profile == inst.profile &&
                   (!g.HasRuntime() || g.mig_uuid == inst.uuid);
          });
      if (used) continue;
      const std::string key = StrCat(gpu, "/", inst.gpu_instance_id, "/", inst.uuid);
      if (!mig_unclaimed_.count(key)) {
        unclaimed.insert(key);  // destroyed if still unclaimed on the next pass
        continue;
      }
      if (Status s = mig_->DestroyMigInstance(gpu, inst.gpu_instance_id); !s.ok()) {
        spdlog::warn("MIG reclaim: {}", std::string(s.message()));
        unclaimed.insert(key);
        continue;
      }
      mig_owners_.erase({gpu, at.start});
      ++destroyed;
      spdlog::info("reclaimed MIG device {} ({} at {} on GPU {}): no pod holds it any more",
                   inst.uuid.empty() ? "(no compute instance)" : inst.uuid, inst.profile,
                   Placement(at), gpu);
    }
  }
  mig_unclaimed_ = std::move(unclaimed);
  return destroyed;
}

}  // namespace hami::deviceplugin
