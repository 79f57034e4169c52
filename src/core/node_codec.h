#pragma once
// Codecs of the node annotations upstream HAMi writes and reads
// (docs/upstream-contract.md#node-registration-and-handshake, #resource-model, #topology-and-numa):
// device registration (hami.io/node-nvidia-register, JSON or legacy CSV), pairwise link
// scores (hami.io/node-nvidia-score) and the cordon list (hami.io/device-cordon).
// Encoders produce the exact text upstream writes, so an unchanged inventory yields an unchanged
// annotation (the device plugin patches only on change). Decoders accept everything upstream
// writes and reject the rest with an error naming the device and field.
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "core/model.h"

namespace hami::core {

// JSON array of DeviceInfo with Go `omitempty` semantics: fields equal to 0 / "" / false / empty
// are left out. Keys in upstream order: id, index, count, devmem, devcore, type, numa, health,
// mode, migProfiles ({name, memoryMB, core, sliceCount, placements:[{start,size}]}). The vendor
// is not encoded (it is implied by the annotation key). Example:
// [{"id":"GPU-0fc3...","index":1,"count":10,"devmem":32768,"devcore":100,"type":"NVIDIA-Tesla
// V100-PCIE-32GB","numa":1,"health":true,"mode":"hami-core"}]
std::string EncodeNodeDevicesJson(const std::vector<DeviceInfo>& devices);

// Legacy CSV: `id,count,devmem,devcore,type,numa,health,index,mode:` per device (each device
// terminated by ':'). Errors when a text field holds ',' or ':' or a device has MIG profiles
// (the CSV cannot carry them).
StatusOr<std::string> EncodeNodeDevicesCsv(const std::vector<DeviceInfo>& devices);

// The most devices one node registration may declare (a node has 8-16 GPUs; the largest
// vendor boards list 64 chips). More is refused as a whole with an error saying so: every /filter
// walks each device of each node.
inline constexpr size_t kMaxNodeDevices = 128;

// Decodes either format, chosen by the first non-blank character ('[' = JSON, else CSV).
// Absent JSON fields take Go's zero values (so a missing "health" means unhealthy and a missing
// "devcore" means 0). CSV entries have 7 fields (index 0, mode "") or 9; empty entries are
// skipped. JSON keys match field names case-insensitively, as Go's encoding/json does
// ({"ID":..,"Devmem":..} is id and devmem). Every device gets `vendor`. Errors: malformed JSON or
// CSV, wrong JSON types, fractional or negative numbers where Go has unsigned/counted fields,
// numbers beyond int32, an empty or repeated id, more than kMaxNodeDevices devices. An empty text
// decodes to no devices.
StatusOr<std::vector<DeviceInfo>> DecodeNodeDevices(std::string_view text,
                                                    std::string_view vendor = kNvidiaVendor);

// hami.io/node-nvidia-score: [{"uuid":"GPU-a","score":{"GPU-b":600,"GPU-c":10}},...], ordered by
// uuid (Go sorts map keys the same way).
using LinkScores = std::map<std::string, std::map<std::string, int>>;
std::string EncodeLinkScores(const LinkScores& scores);
// Errors: malformed JSON, non-integer or negative scores, an empty or repeated uuid.
StatusOr<LinkScores> DecodeLinkScores(std::string_view text);

// hami.io/device-cordon: comma list of UUIDs. Decoding trims blanks and drops empty items.
std::string EncodeDeviceCordon(const std::vector<std::string>& uuids);
std::vector<std::string> DecodeDeviceCordon(std::string_view text);

}  // namespace hami::core
