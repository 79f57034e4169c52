#include "dra/ledger.h"

namespace hami::dra {

CapacityLedger::CapacityLedger(std::vector<DeviceCapacity> devices) {
  for (auto& d : devices) devices_.emplace(d.name, std::move(d));
}

Usage CapacityLedger::Used(const std::string& device) const {
  Usage total;
  for (const auto& [uid, per_device] : booked_) {
    auto it = per_device.find(device);
    if (it == per_device.end()) continue;
    total.memory_mib += it->second.memory_mib;
    total.cores += it->second.cores;
  }
  return total;
}

Status CapacityLedger::Book(const std::string& claim_uid,
                            const std::map<std::string, Usage>& usage) {
  for (const auto& [name, u] : usage) {
    auto dev = devices_.find(name);
    if (dev == devices_.end()) return NotFound("device ", name, " is not on this node");
    Usage others = Used(name);
    if (auto mine = booked_.find(claim_uid); mine != booked_.end()) {
      if (auto it = mine->second.find(name); it != mine->second.end()) {
        others.memory_mib -= it->second.memory_mib;
        others.cores -= it->second.cores;
      }
    }
    if (others.memory_mib + u.memory_mib > dev->second.memory_mib ||
        others.cores + u.cores > dev->second.cores)
      return ResourceExhausted("device ", name, " (", dev->second.uuid, "): the claim takes ",
                               u.memory_mib, " MiB / ", u.cores, " cores, prepared claims hold ",
                               others.memory_mib, " MiB / ", others.cores, " cores of ",
                               dev->second.memory_mib, " MiB / ", dev->second.cores);
  }
  booked_[claim_uid] = usage;
  return OkStatus();
}

void CapacityLedger::Release(const std::string& claim_uid) {
  booked_.erase(claim_uid);
}

}  // namespace hami::dra
