#pragma once
// The claim's status.devices entries (KEP-4817) this driver writes once it prepared a claim
// (docs/dra.md#claim-status): one per result of this driver and pool, keyed as the API server
// keys them (driver, pool, device, shareID), with a Ready condition and, in `data`, the GPU and
// what libvgpu was armed with. Pure: the write itself is ClaimSource::WriteDeviceStatus.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "dra/claim.h"
#include "dra/slice.h"
#include "dra/vendor.h"
#include "nlohmann/json.hpp"

namespace hami::dra {

// The entries for `claim` prepared on `devices` (the results in claim order). `data` holds uuid,
// index, `consumed` (this result's share) and `armed` (the claim's shares on that GPU summed:
// libvgpu's limits) in MiB and percent of SMs, and the CDI device the container got. The Ready
// condition's message is the vendor's (null: NVIDIA's, libvgpu). A device named in `unhealthy`
// (device name -> why, from the health board) is Ready False, reason Unhealthy, with the why: the
// claim stays prepared, but the work of its pod on that GPU may fail.
nlohmann::json DeviceStatusEntries(const ClaimAllocation& claim,
                                   const std::vector<DeviceCapacity>& devices,
                                   const std::string& driver, const std::string& pool,
                                   const std::string& cdi_device_id, int64_t now_unix,
                                   const DraVendor* vendor = nullptr,
                                   const std::map<std::string, std::string>& unhealthy = {});

// `current` (a claim's status.devices, possibly null) with the entries of `driver` in `pool`
// replaced by `ours`; other drivers' and pools' entries are kept in place. An entry of ours whose
// conditions only differ in lastTransitionTime keeps the stored times, so writing the same
// entries again changes nothing.
nlohmann::json MergeDeviceStatus(const nlohmann::json& current, const std::string& driver,
                                 const std::string& pool, const nlohmann::json& ours);

}  // namespace hami::dra
