#include "dra/health.h"

#include <ctime>

#include "common/status.h"

namespace hami::dra {

namespace {

// The kubelet keeps at most 1024 characters of a device's health message.
constexpr size_t kMaxMessage = 1024;

}  // namespace

HealthBoard::HealthBoard(std::string pool, std::vector<Device> devices)
    : pool_(std::move(pool)), devices_(std::move(devices)) {
  const int64_t now = static_cast<int64_t>(std::time(nullptr));
  MutexLock l(mu_);
  for (const auto& d : devices_) entries_.push_back({d.name, true, now, ""});
}

bool HealthBoard::Apply(const gpu::HealthEvent& ev) {
  const int64_t now = static_cast<int64_t>(std::time(nullptr));
  std::string message;
  if (!ev.healthy) {
    message = ev.reason.empty() ? "NVML reports the GPU failed" : ev.reason;
    if (ev.xid != 0 && message.find("Xid") == std::string::npos)
      message = StrCat(message, " (Xid ", ev.xid, ")");
    if (message.size() > kMaxMessage) message.resize(kMaxMessage);
  }
  bool changed = false;
  MutexLock l(mu_);
  for (size_t i = 0; i < devices_.size(); ++i) {
    if (!ev.uuid.empty() && devices_[i].uuid != ev.uuid) continue;
    Entry& e = entries_[i];
    if (e.healthy == ev.healthy && e.message == message) continue;
    e.healthy = ev.healthy;
    e.message = message;
    e.updated_unix = now;
    changed = true;
  }
  if (changed) {
    ++version_;
    cv_.NotifyAll();
  }
  return changed;
}

std::vector<HealthBoard::Entry> HealthBoard::Snapshot(uint64_t* version) const {
  MutexLock l(mu_);
  if (version != nullptr) *version = version_;
  return entries_;
}

uint64_t HealthBoard::WaitChange(uint64_t seen, std::chrono::milliseconds timeout) const {
  MutexLock l(mu_);
  cv_.WaitFor(mu_, timeout,
              [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return shut_down_ || version_ != seen; });
  return version_;
}

void HealthBoard::Shutdown() {
  MutexLock l(mu_);
  shut_down_ = true;
  cv_.NotifyAll();
}

bool HealthBoard::shut_down() const {
  MutexLock l(mu_);
  return shut_down_;
}

}  // namespace hami::dra
