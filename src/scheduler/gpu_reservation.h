#pragma once
// GPU reservations of the consolidation controller (docs/consolidation.md, "The destination is
// reserved"): when `hami consolidate` moves a replica off GPU A onto GPU B, it first writes on B's
// Node a reservation naming B, the room the replica holds (its grant) and the workload it belongs
// to (namespace + the uid of the pod's controller owner: the ReplicaSet or StatefulSet that will
// re-create it), then evicts the replica. The scheduler holds that room on B against every other
// pod until the reservation expires or is taken, and decides the workload's next pod onto B first.
//
// Trust (docs/security.md, "Consolidation reservations"): the reservation lives in an annotation
// of a Node, which namespace users cannot write (the controller's ClusterRole patches nodes, as
// it does for hami.io/consolidate-free-gpus); nothing on a pod decides it. A pod's owner reference
// only selects *which* workload's reservation applies, within the pod's own namespace, and the
// pod still has to fit B by the scheduler's rules.
//
// Wire format (one annotation value, the controller's only): entries separated by ';', each
//   <id>,<namespace>,<owner-uid>,<gpu-uuid>,<mem-mib>,<cores>,<expires-unix-seconds>
// with id the evicted pod's uid. Validated on read, all or nothing: at most kMaxGpuReservations
// entries, ids and uids of [A-Za-z0-9-] (1..64), a namespace as a DNS label, a UUID of printable
// characters without separators (1..96), memory 1..2^30 MiB, cores 0..100.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace hami::scheduler {

inline constexpr const char kGpuReservationsKey[] = "hami.io/consolidate-reservations";
// Written by the scheduler on the pod it decides onto a reservation's GPU, in the same patch as the
// decision: the reservation's id. Whoever reads the pod later (another scheduler replica that
// becomes leader, the controller's next round) knows from it that the reservation went to that pod
// (docs/consolidation.md, "One replacement per reservation"). It counts only for a pod of the
// reservation's namespace and owner whose decision holds the reserved GPU on its node.
inline constexpr const char kGpuReservationPodKey[] = "hami.io/consolidate-reservation";
inline constexpr size_t kMaxGpuReservations = 64;  // per node
// The scheduler honours a reservation for at most this long past the moment it reads it: a
// reservation that claims a later expiry is refused (a writer cannot hold a GPU indefinitely).
inline constexpr int64_t kMaxGpuReservationS = 3600;

struct GpuReservation {
  std::string id;          // the evicted pod's uid
  std::string namespace_;  // the workload's namespace
  std::string owner_uid;   // uid of the evicted pod's controller owner
  std::string uuid;        // the GPU held (on the node carrying the annotation)
  int64_t mem_mib = 0;
  int cores = 0;
  int64_t expires_s = 0;  // Unix seconds
  bool operator==(const GpuReservation&) const = default;
};

// The annotation value for `entries` (in the order given).
std::string EncodeGpuReservations(const std::vector<GpuReservation>& entries);
// The entries of an annotation value ("" = none); INVALID_ARGUMENT naming the first fault.
StatusOr<std::vector<GpuReservation>> DecodeGpuReservations(std::string_view value);

}  // namespace hami::scheduler
