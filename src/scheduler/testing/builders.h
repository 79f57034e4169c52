#pragma once
// Hand-written builders for scheduler tests and benchmarks (Kubernetes' MakePod().Req(...) style).
#include <string>
#include <utility>

#include "core/model.h"

namespace hami::scheduler::testing {

// A node with `gpus` identical devices "<name>-gpu<i>".
class NodeBuilder {
 public:
  explicit NodeBuilder(std::string name) {
    n_.name = std::move(name);
    n_.cpu_milli = 64000;
    n_.memory_mib = 262144;
  }
  NodeBuilder& Cpu(int64_t milli) {
    n_.cpu_milli = milli;
    return *this;
  }
  NodeBuilder& Memory(int64_t mib) {
    n_.memory_mib = mib;
    return *this;
  }
  NodeBuilder& Gpus(int count, int64_t devmem_mib = 16000,
                    const std::string& type = "NVIDIA-Tesla T4", int split = 10,
                    int devcore = 100) {
    for (int i = 0; i < count; ++i) {
      core::DeviceInfo d;
      d.index = static_cast<int>(n_.devices.size());
      d.uuid = n_.name + "-gpu" + std::to_string(d.index);
      d.count = split;
      d.devmem_mib = devmem_mib;
      d.devcore = devcore;
      d.type = type;
      n_.devices.push_back(std::move(d));
    }
    return *this;
  }
  NodeBuilder& Numa(int device, int numa) {
    n_.devices.at(device).numa = numa;
    return *this;
  }
  // The device's index on the node (NVML order); registration order stays the builder's order.
  NodeBuilder& Index(int device, int index) {
    n_.devices.at(device).index = index;
    return *this;
  }
  NodeBuilder& Unhealthy(int device) {
    n_.devices.at(device).health = false;
    return *this;
  }
  NodeBuilder& Cordon(int device) {
    n_.cordoned.push_back(n_.devices.at(device).uuid);
    return *this;
  }
  NodeBuilder& Link(int a, int b, int score) {
    n_.link_scores[n_.devices.at(a).uuid][n_.devices.at(b).uuid] = score;
    n_.link_scores[n_.devices.at(b).uuid][n_.devices.at(a).uuid] = score;
    return *this;
  }
  core::NodeInfo Build() const { return n_; }
  operator core::NodeInfo() const { return n_; }

 private:
  core::NodeInfo n_;
};

class PodBuilder {
 public:
  explicit PodBuilder(std::string uid) {
    p_.uid = uid;
    p_.name = std::move(uid);
    p_.namespace_ = "default";
  }
  // Adds an app container with `nums` GPUs of (mem MiB, cores %) each.
  PodBuilder& Gpu(int nums, int64_t mem_mib, int cores, int64_t cpu = 0, int64_t memory = 0) {
    return Container(core::ContainerKind::kApp, nums, mem_mib, cores, cpu, memory);
  }
  PodBuilder& Init(int nums, int64_t mem_mib, int cores) {
    return Container(core::ContainerKind::kInit, nums, mem_mib, cores, 0, 0);
  }
  PodBuilder& Cpu(int64_t cpu, int64_t memory = 0) {
    return Container(core::ContainerKind::kApp, 0, 0, 0, cpu, memory);
  }
  PodBuilder& Container(core::ContainerKind kind, int nums, int64_t mem_mib, int cores, int64_t cpu,
                        int64_t memory) {
    core::ContainerRequest c;
    c.name = "c" + std::to_string(p_.containers.size());
    c.kind = kind;
    c.cpu_milli = cpu;
    c.memory_mib = memory;
    if (nums > 0) {
      core::DeviceRequest r;
      r.nums = nums;
      r.memreq_mib = mem_mib;
      r.coresreq = cores;
      c.devices.push_back(r);
    }
    p_.containers.push_back(std::move(c));
    return *this;
  }
  PodBuilder& UseType(std::string t) {
    p_.selectors.use_types.push_back(std::move(t));
    return *this;
  }
  PodBuilder& NoUseType(std::string t) {
    p_.selectors.nouse_types.push_back(std::move(t));
    return *this;
  }
  PodBuilder& UseUuid(std::string u) {
    p_.selectors.use_uuids.push_back(std::move(u));
    return *this;
  }
  PodBuilder& NoUseUuid(std::string u) {
    p_.selectors.nouse_uuids.push_back(std::move(u));
    return *this;
  }
  PodBuilder& NumaBind() {
    p_.selectors.numa_bind = true;
    return *this;
  }
  PodBuilder& NodePolicy(std::string p) {
    p_.node_policy = std::move(p);
    return *this;
  }
  PodBuilder& GpuPolicy(std::string p) {
    p_.gpu_policy = std::move(p);
    return *this;
  }
  PodBuilder& Weights(int slot, int core, int mem) {
    p_.has_weights = true;
    p_.weights = {slot, core, mem};
    return *this;
  }
  core::PodRequest Build() const { return p_; }
  operator core::PodRequest() const { return p_; }

 private:
  core::PodRequest p_;
};

}  // namespace hami::scheduler::testing
