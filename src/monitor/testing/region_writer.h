#pragma once
// Writes container regions exactly as libvgpu does: through libvgpu's own region code (vgpu_core:
// vgpu_region_attach / _device / _reserve), so the exporter is tested against the real writer, slot
// liveness (OFD locks) included. For tests and benchmarks only.
#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "vgpu/vgpu_core.h"

namespace hami::monitor::testing {

// Text exposition -> {"name{labels}": value} (comment lines skipped).
std::map<std::string, double> ParseExposition(const std::string& text);

// Starts argv[0] with exactly `env` (execve; stdout to /dev/null): a container's process in the
// end-to-end tests. Returns its pid, -1 when fork fails (127 exit status when exec fails).
pid_t SpawnQuiet(std::vector<std::string> argv, std::vector<std::string> env);

// A fresh directory under /tmp, removed with everything in it on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

struct FakeDevice {
  std::string uuid;
  uint64_t limit_bytes = 0;
  uint32_t sm_limit_pct = 100;
  int32_t container_index = 0;
  uint64_t total_bytes = 80ull << 30;
  uint32_t sm_count = 108;
};

// One "process" of a container attached to the container's region, living in this test process (its
// own open file description, hence its own slot and liveness lock).
class FakeContainerProcess {
 public:
  // Creates <root>/<pod_uid>_<container>/<file> (directories included) and attaches to it.
  static StatusOr<std::unique_ptr<FakeContainerProcess>> Attach(
      const std::string& root, const std::string& pod_uid, const std::string& container,
      uint32_t policy = 0, int32_t priority = 1, const std::string& file = "vgpu.cache");
  ~FakeContainerProcess();  // detaches like a process exiting normally

  // Registers a device entry (libvgpu does this when the process first uses the device). Returns
  // entry.
  int Device(const FakeDevice& d);
  // Charges `bytes` to this process (0 = ok, 1 = over the limit).
  int Reserve(int entry, uint64_t bytes);
  void Release(int entry, uint64_t bytes);
  // Charges a CUDA context of `bytes` as libvgpu does (forced, and noted in the slot's
  // context_kib).
  void ChargeContext(int entry, uint64_t bytes);
  // What libvgpu's limiter stores after a launch.
  void StampLaunch(int entry, uint64_t mono_ns, uint64_t throttled_ns = 0, uint32_t busy_ms = 0);
  vgpu_region* region() { return ctx_.r; }
  const std::string& path() const { return path_; }
  int slot() const { return ctx_.slot; }

 private:
  FakeContainerProcess() = default;
  vgpu_region_ctx ctx_{};
  std::string path_;
};

// A real child process that attaches to a region, registers `device`, reserves `bytes` and then
// either waits to be killed (Kill() = SIGKILL, leaving its slot for reclaim) or exits on Finish().
class ChildProcess {
 public:
  static StatusOr<std::unique_ptr<ChildProcess>> Start(const std::string& region_path,
                                                       const FakeDevice& device, uint64_t bytes);
  ~ChildProcess();
  pid_t pid() const { return pid_; }
  void Kill();  // SIGKILL and reap

 private:
  pid_t pid_ = -1;
};

}  // namespace hami::monitor::testing
