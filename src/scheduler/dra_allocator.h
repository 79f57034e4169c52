#pragma once
// A reference model of stock DRA's structured-parameters allocator with consumable capacity
// (KEP-5075), pure: no transport, no clock. It is what kube-scheduler's DynamicResources plugin
// decides for one claim on one node: the requests in order, each device the FIRST one (pools by
// driver then name, devices in slice order) that matches the class and request selectors and still
// has the capacity the request consumes; a request with firstAvailable takes its subrequests in
// order, the first one that can be met; backtracking when a later request cannot be met. No
// scoring of devices: that is the point of the model (docs/dra-placement.md).
//
// Consumption on a device with allowMultipleAllocations: a capacity the request names costs the
// requested amount rounded up by the capacity's requestPolicy (validValues: the smallest value not
// below; validRange: at least min, min + n*step; above the largest / max = the device does not
// fit); a capacity it does not name costs the policy's default, or the whole value without a
// policy. The device fits while, for every capacity, what allocated claims consume plus this one
// stays within the published value. A device without allowMultipleAllocations is exclusive (one
// result in the whole cluster); capacity requests only filter it. The `count` devices of one
// request are distinct devices (two requests of one claim may share a device).
//
// Used by `hami sim --policy dra-stock` (sim/dra_stock.h), the extender's DRA placement
// (scheduler/dra_placement.h) and by tests that need what stock DRA
// would write into a claim's status.allocation (AllocateClaimJson).
#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "common/rng.h"
#include "common/status.h"

namespace hami::scheduler::dra {

struct RequestPolicy {
  std::optional<int64_t> default_value;
  std::vector<int64_t> valid_values;  // ascending
  struct Range {
    int64_t min = 0;
    std::optional<int64_t> max, step;
  };
  std::optional<Range> valid_range;
};

struct Capacity {
  int64_t value = 0;  // base units (bytes, cores, ...), rounded down
  std::optional<RequestPolicy> policy;
};

using Attribute = std::variant<int64_t, bool, std::string>;  // versions as strings

struct Device {
  std::string name;
  std::map<std::string, Attribute> attributes;  // keys as published ("type", "dom.io/x")
  std::map<std::string, Capacity> capacity;
  bool allow_multiple_allocations = false;
};

// A pool as the allocator sees it: the slices of its highest generation, devices in slice order.
struct Pool {
  std::string driver, name;
  std::string node_name;  // "" with all_nodes
  bool all_nodes = false;
  bool incomplete = false;  // fewer slices than resourceSliceCount: never allocated from
  std::vector<Device> devices;
};

// A selector (the CEL expression a class or a request carries), evaluated on a device of a driver.
using Selector = std::function<bool(const std::string& driver, const Device& device)>;

struct DeviceClass {
  std::vector<Selector> selectors;
};

struct DeviceRequest {
  std::string name;
  std::string device_class;
  int64_t count = 1;
  bool all = false;                         // allocationMode All
  std::map<std::string, int64_t> capacity;  // capacity.requests, base units (rounded up)
  std::vector<Selector> selectors;
  // firstAvailable (the prioritized list): when not empty, the request is met by the first of
  // these subrequests that can be (each a request of its own, named by its subrequest name; the
  // fields above are then unused); a later request that cannot be met makes the search come back
  // and try the next subrequest. Results name "<request>/<subrequest>".
  std::vector<DeviceRequest> first_available;
};

// One entry of status.allocation.devices.results.
struct Result {
  std::string request, driver, pool, device;
  std::optional<std::string> share_id;      // shared devices only
  std::map<std::string, int64_t> consumed;  // shared devices only: every capacity of the device
};

// What allocated claims hold: exclusive devices in use, consumed capacity of shared ones.
class AllocatedState {
 public:
  void Add(const std::vector<Result>& results);
  void Remove(const std::vector<Result>& results);
  bool InUse(const std::string& key) const;
  int64_t Consumed(const std::string& key, const std::string& capacity) const;
  static std::string Key(const std::string& driver, const std::string& pool,
                         const std::string& device);

 private:
  std::map<std::string, int> exclusive_;
  std::map<std::string, std::map<std::string, int64_t>> consumed_;
};

class Allocator {
 public:
  Allocator(std::vector<Pool> pools, std::map<std::string, DeviceClass> classes);

  // The allocation stock DRA makes for a claim's requests on `node`, given what is allocated.
  // NotFound = does not fit on this node (the message says why); InvalidArgument = the claim
  // names an unknown class. `share_ids` draws the shareIDs of shared results.
  StatusOr<std::vector<Result>> Allocate(const std::vector<DeviceRequest>& requests,
                                         const std::string& node, const AllocatedState& state,
                                         Rng& share_ids) const;
  // The complete pools `node` allocates from (its own and all-node ones), in the order Allocate
  // walks them (driver, then pool name).
  std::vector<const Pool*> NodePools(const std::string& node) const;

 private:
  std::vector<Pool> pools_;                     // by driver, then name
  std::vector<std::vector<std::string>> keys_;  // AllocatedState::Key per pool and device
  std::map<std::string, DeviceClass> classes_;
  std::map<std::string, std::vector<size_t>> by_node_;  // node -> pools (all-node pools in all)
  std::vector<size_t> all_nodes_;
};

// What a shared device's capacity costs a request (the rules above); nullopt = does not fit
// (above the policy's largest value / max, or the device lacks a named capacity).
std::optional<std::map<std::string, int64_t>> Consumption(const Device& device,
                                                          const DeviceRequest& request);

// ---- the wire form (resource.k8s.io/v1 JSON) ----

// Pools from ResourceSlice objects: per (driver, pool) the slices of the highest generation,
// in name order; incomplete when fewer than resourceSliceCount.
StatusOr<std::vector<Pool>> PoolsFromSlices(const std::vector<nlohmann::json>& slices);
// A selector from a CEL expression. The subset understood: terms joined by &&, each
// `device.driver == "x"` or `device.attributes["<domain>"].<id>` compared with == / != to a
// string, int or bool literal, or `... in [literals]`, or
// `device.capacity["<domain>"].<id>.compareTo(quantity("<q>")) <op> 0` (op ==, !=, <, <=, >, >=;
// q a whole number of base units), optionally negated as `!(...)`.
// Anything else is Unimplemented (the model must not guess).
StatusOr<Selector> ParseSelector(const std::string& cel);
StatusOr<DeviceClass> ClassFromJson(const nlohmann::json& device_class);
StatusOr<std::vector<DeviceRequest>> RequestsFromClaim(const nlohmann::json& claim);
// The results of a claim's status.allocation (none when it is not allocated).
StatusOr<std::vector<Result>> ResultsOfClaim(const nlohmann::json& claim);
// The results of status.allocation of allocated claims (others are skipped).
StatusOr<AllocatedState> StateFromClaims(const std::vector<nlohmann::json>& claims);
// status.allocation for `claim` on `node` as stock DRA would write it (results with shareID and
// consumedCapacity, and the nodeSelector that pins it to the node).
StatusOr<nlohmann::json> AllocateClaimJson(const std::vector<nlohmann::json>& slices,
                                           const std::vector<nlohmann::json>& classes,
                                           const std::vector<nlohmann::json>& allocated_claims,
                                           const nlohmann::json& claim, const std::string& node,
                                           Rng& share_ids);

}  // namespace hami::scheduler::dra
