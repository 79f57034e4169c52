#pragma once
// The host PID broker of upstream HAMi (chart value devicePlugin.hostPIDBroker.enabled, protocol
// version 1; docs/upstream-contract.md, "Host PID broker"). NVML names processes by their host PID,
// which a process in a container's own PID namespace cannot see; the broker, running in the node
// agent's pod (hostPID), tells each caller its own PID as the kernel reports the connection's peer
// there (SO_PEERCRED). A caller can learn nothing but its own PID, and sends none. libvgpu asks it
// once per process when it claims its region slot (vgpu/vgpu_region.c), so that it finds its own
// processes in NVML's lists (context memory, SM calibration, process lists).
//
// Wire format (integers big-endian), one request and one answer per connection:
//   request  "HPID" | version u16 = 1 | command u16 = 1 (the caller's host PID)
//   answer   "HPID" | version u16 = 1 | status u16 (0 ok, 1 invalid request) | pid u32 (0 unless
//   ok)
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "common/status.h"

namespace hami::deviceplugin {

inline constexpr char kHostPidBrokerSocketName[] = "broker.sock";
// Where containers see the broker directory (read-only, inside the writable /tmp/vgpulock).
inline constexpr char kHostPidBrokerContainerDir[] = "/tmp/vgpulock/hostpid";
// The gate libvgpu (and upstream's HAMi-core) reads: only "1" turns the client on.
inline constexpr char kEnvHostPidBroker[] = "LIBVGPU_HOSTPID_BROKER";

class HostPidBroker {
 public:
  // Serves <dir>/broker.sock (dir created 0711 when missing; the socket 0666 so that a container's
  // user of any uid can connect). A stale socket from an earlier run is replaced; any other file
  // there is an error, as is a path too long for a unix socket.
  static StatusOr<std::unique_ptr<HostPidBroker>> Start(const std::string& dir);
  // Stops serving and removes the socket.
  ~HostPidBroker();
  HostPidBroker(const HostPidBroker&) = delete;
  HostPidBroker& operator=(const HostPidBroker&) = delete;

  const std::string& socket_path() const { return path_; }
  // Answers served so far (successful or not).
  int answered() const { return answered_.load(); }

 private:
  HostPidBroker(std::string path, int fd);
  void Serve();
  void Answer(int conn);

  std::string path_;
  int fd_;
  std::atomic<bool> stop_{false};
  std::atomic<int> answered_{0};
  std::thread thread_;
};

}  // namespace hami::deviceplugin
