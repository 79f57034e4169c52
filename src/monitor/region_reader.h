#pragma once
// Read side of libvgpu's shared region (vgpu/shared_region.h): maps one container's region file and
// takes consistent-enough snapshots of it with atomic loads, following the header's contract:
//  - the exporter never writes, except the two monitor-feedback fields of the header;
//  - a slot counts only while its owner is alive (the owner holds an OFD lock on its liveness
//  byte), so
//    usage of a SIGKILLed process that nobody reclaimed yet is not reported;
//  - a file that shrinks under us (a container may truncate its own region file) must not crash the
//    daemon: every access to the mapping runs under a SIGBUS guard and fails with a Status instead;
//  - the file is the container's: it is opened without following links and without blocking, used
//  only
//    when regular, and only sizeof(vgpu_region) bytes of it are ever mapped; a snapshot whose
//    device UUIDs are not printable ASCII or repeat is an error (that region's series only are
//    dropped).
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"

namespace hami::monitor {

struct RegionDevice {
  std::string uuid;
  int entry = 0;                   // index in the region's device table
  int container_index = -1;        // i of CUDA_DEVICE_MEMORY_LIMIT_<i>, -1 unknown
  uint64_t limit_bytes = 0;        // 0 = unlimited
  uint64_t used_bytes = 0;         // sum over live processes' slots (not the lock-protected cache)
  uint64_t context_bytes = 0;      // of used_bytes, what CUDA contexts were charged (live slots)
  uint64_t cached_used_bytes = 0;  // the region's own cache (includes not-yet-reclaimed dead slots)
  uint64_t total_bytes = 0;
  uint32_t sm_limit_pct = 0;    // 1..100, 100 = unlimited
  uint64_t last_launch_ns = 0;  // CLOCK_MONOTONIC, 0 = none through the limiter yet
  uint64_t waves_launched = 0;
  uint64_t throttled_ns = 0;
  uint32_t busy_ms = 0;  // libvgpu's measured busy time, ms, wrapping at 2^32 (0 before layout v3)
  uint64_t peak_bytes = 0;  // the container's highest usage, rounded up to MiB (0 before v4)
  // busy_ms counts every window of this device (hdr.metered_mask, layout v5): armed containers
  // with or without SM limit. Before v5 only a device with an SM limit was metered.
  bool metered = false;
  uint64_t meter_us = 0;  // CLOCK_REALTIME us where the meter's last closed window ended (calib_us)
};

struct RegionProcess {
  int slot = 0;
  uint32_t pid = 0;       // in the container's PID namespace
  uint32_t host_pid = 0;  // 0 = unknown
  uint32_t generation = 0;
};

struct RegionSnapshot {
  uint32_t policy = 0;   // VGPU_POLICY_*
  int32_t priority = 1;  // 0 = high
  int32_t utilization_switch = 1;
  int32_t recent_kernel = 0;
  uint32_t recoveries = 0;
  uint64_t created_ns = 0;  // CLOCK_REALTIME
  std::vector<RegionDevice> devices;
  std::vector<RegionProcess> processes;  // live processes only
  int dead_slots = 0;                    // active slots whose owner is gone (not yet reclaimed)
};

class MappedRegion {
 public:
  // Opens and maps `path` read-write (needed for the feedback fields). Fails with a message naming
  // the file when it is too small, not initialised yet, or of another layout version.
  static StatusOr<std::unique_ptr<MappedRegion>> Open(const std::string& path);
  ~MappedRegion();
  MappedRegion(const MappedRegion&) = delete;
  MappedRegion& operator=(const MappedRegion&) = delete;

  StatusOr<RegionSnapshot> Snapshot() const;
  // Stores the monitor-feedback fields (only when they differ, to keep cache lines clean).
  Status WriteFeedback(int32_t utilization_switch, int32_t recent_kernel);

  const std::string& path() const { return path_; }
  // Identity of the mapped file: a region file replaced under the same name is a new region.
  uint64_t inode() const { return inode_; }
  uint64_t device() const { return device_; }  // st_dev of the file

 private:
  MappedRegion(std::string path, int fd, void* map, uint64_t inode, uint64_t device);
  bool SlotAlive(int slot) const;

  std::string path_;
  int fd_;
  void* map_;
  uint64_t inode_;
  uint64_t device_;
};

}  // namespace hami::monitor
