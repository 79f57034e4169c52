#pragma once
// Per-device capacity ledger of the claims prepared on this node: the driver's own check that the
// claims it arms never add up to more than a GPU (the scheduler's accounting lives in the
// scheduler; a force-deleted pod or a replaced claim can make the two disagree). Not thread-safe:
// the driver serializes access.
#include <map>
#include <string>
#include <vector>

#include "common/status.h"
#include "dra/claim.h"
#include "dra/slice.h"

namespace hami::dra {

class CapacityLedger {
 public:
  explicit CapacityLedger(std::vector<DeviceCapacity> devices);

  // Books `usage` (per device name) for `claim_uid`. Refused (ResourceExhausted, naming the device
  // and the amounts) when any device would pass its memory or cores with the claims already
  // booked; an unknown device is NotFound. A refusal changes nothing. Booking a uid again replaces
  // its earlier booking (checked without it).
  Status Book(const std::string& claim_uid, const std::map<std::string, Usage>& usage);
  // Releases a claim's booking; unknown uids are fine.
  void Release(const std::string& claim_uid);

  // What all booked claims take from `device`.
  Usage Used(const std::string& device) const;
  bool Has(const std::string& claim_uid) const { return booked_.count(claim_uid) > 0; }
  size_t claims() const { return booked_.size(); }

 private:
  std::map<std::string, DeviceCapacity> devices_;
  std::map<std::string, std::map<std::string, Usage>> booked_;  // claim uid -> device -> usage
};

}  // namespace hami::dra
