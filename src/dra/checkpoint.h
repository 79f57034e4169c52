#pragma once
// The plugin's own record of prepared claims (docs/dra.md#what-prepare-does): two-phase per claim
// (PrepareStarted before any file is written, PrepareCompleted after), with the node's boot id, so
// that a restarted plugin rebuilds its ledger and can unprepare a claim whose object is gone.
// Files are replaced atomically: a reader sees the old file or the new one, never half of one.
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "dra/claim.h"

namespace hami::dra {

// A device answered to the kubelet for a prepared claim (the Device message).
struct PreparedDevice {
  std::vector<std::string> request_names;
  std::string pool;
  std::string device;
  std::vector<std::string> cdi_device_ids;
  std::string share_id;  // empty: none
  bool operator==(const PreparedDevice&) const = default;
};

enum class PrepareState { kStarted, kCompleted };

struct PreparedClaim {
  PrepareState state = PrepareState::kStarted;
  ClaimAllocation claim;
  std::vector<PreparedDevice> devices;
  // What Unprepare removes (absolute host paths).
  std::vector<std::string> files;
  std::vector<std::string> dirs;
  bool operator==(const PreparedClaim&) const = default;
};

struct Checkpoint {
  std::string boot_id;
  std::map<std::string, PreparedClaim> claims;  // by claim uid
  bool operator==(const Checkpoint&) const = default;
};

std::string EncodeCheckpoint(const Checkpoint& cp);
// Errors (InvalidArgument, naming the field): not JSON, an unknown version, a malformed entry.
StatusOr<Checkpoint> DecodeCheckpoint(std::string_view text);

// Writes `contents` to a temporary file next to `path` (O_EXCL, unique name), fsyncs it, sets
// `mode` and renames it over `path`. On error nothing is left behind and `path` is unchanged.
Status WriteFileAtomic(const std::string& path, std::string_view contents, unsigned mode = 0644);
// NotFound when the file does not exist.
StatusOr<std::string> ReadWholeFile(const std::string& path);
// The kernel's boot id (/proc/sys/kernel/random/boot_id), "" when it cannot be read.
std::string ReadBootId(const std::string& path = "/proc/sys/kernel/random/boot_id");

}  // namespace hami::dra
