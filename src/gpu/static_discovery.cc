#include "gpu/static_discovery.h"

#include <utility>

namespace hami::gpu {

class StaticDiscovery::Watch final : public HealthWatch {
 public:
  Watch(StaticDiscovery* owner, int id) : owner_(owner), id_(id) {}
  ~Watch() override { owner_->Unregister(id_); }

 private:
  StaticDiscovery* owner_;
  int id_;
};

StaticDiscovery::StaticDiscovery(std::vector<GpuInfo> devices, std::vector<GpuLink> links)
    : devices_(std::move(devices)), links_(std::move(links)) {}

StaticDiscovery::~StaticDiscovery() = default;

StatusOr<std::vector<GpuInfo>> StaticDiscovery::ListDevices() {
  MutexLock l(mu_);
  if (!list_error_.ok()) return list_error_;
  return devices_;
}

StatusOr<std::vector<GpuLink>> StaticDiscovery::Topology() {
  MutexLock l(mu_);
  return links_;
}

StatusOr<std::unique_ptr<HealthWatch>> StaticDiscovery::WatchHealth(HealthCallback cb) {
  MutexLock l(mu_);
  int id = next_id_++;
  callbacks_[id] = std::move(cb);
  return std::unique_ptr<HealthWatch>(std::make_unique<Watch>(this, id));
}

void StaticDiscovery::SetHealth(const HealthEvent& event) {
  MutexLock d(deliver_mu_);
  std::vector<HealthCallback> cbs;
  {
    MutexLock l(mu_);
    for (auto& [id, cb] : callbacks_) cbs.push_back(cb);
  }
  for (auto& cb : cbs) cb(event);
}

void StaticDiscovery::SetDevices(std::vector<GpuInfo> devices) {
  MutexLock l(mu_);
  devices_ = std::move(devices);
}

void StaticDiscovery::SetListError(Status status) {
  MutexLock l(mu_);
  list_error_ = std::move(status);
}

void StaticDiscovery::Unregister(int id) {
  MutexLock d(deliver_mu_);
  MutexLock l(mu_);
  callbacks_.erase(id);
}

GpuInfo MakeGpu(int index, std::string uuid, std::string model, int64_t memory_mib, int numa) {
  GpuInfo g;
  g.index = index;
  g.uuid = std::move(uuid);
  g.model = std::move(model);
  g.memory_mib = memory_mib;
  g.numa_node = numa;
  return g;
}

}  // namespace hami::gpu
