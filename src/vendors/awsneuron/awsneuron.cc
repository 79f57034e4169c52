// AWS Neuron (docs/vendors.md#aws-neuron), as upstream's scheduler models it, with one deliberate
// difference (one pod per Neuron device, below):
//  - devices from node capacity: aws.amazon.com/neuron devices, id `<node>-AWSNeuron-<i>`, each
//  with
//    capacity(aws.amazon.com/neuroncore) / capacity(neuron) NeuronCores (Inf1 4, Inf2/Trn1 2) as
//    its devcore, no memory; the instance type label node.kubernetes.io/instance-type is kept in
//    the type (`AWSNeuron-<instance type>`) for the topology rule;
//  - a container asks aws.amazon.com/neuron: n (n whole devices) or aws.amazon.com/neuroncore: c
//    (c <= cores per device: c cores of one device; else a multiple of it: whole devices); other
//    core counts, 0 and negative values are denied by the webhook with upstream's messages;
//  - several devices: on Inferentia (instance type containing "inf") any run of consecutive free
//    devices, lowest first; elsewhere only 1, 4, 8 or 16 devices, aligned on their count; one
//    device: the last free one (upstream walks the devices backwards);
//  - decision: hami.io/aws-neuron-devices-allocated (no to-allocate key) plus what the Neuron
//    device plugin reads: AWS_NEURON_IDS (device indices, or NeuronCore ids `cores*i + k` for a
//    part of a device, then NEURON_RESOURCE_TYPE names the core resource), NEURON_ALLOC_TIME
//    (nanoseconds), NEURON_ALLOCATED=false and aws.amazon.com/predicate-node. `cores` is the
//    section's coresPerDevice, so a part of a device is granted only on devices with that many
//    cores; elsewhere a core request takes the whole device, and devices with fewer are refused;
//  - a node whose neuroncore capacity does not divide evenly among its devices registers none.
// Upstream packs several NeuronCore pods onto one device by a core bit mask that only its own
// scheduler process holds; our usage is rebuilt from pod annotations, where the mask is not
// recoverable, so a device hosts one pod (its core ids are then always 0..c-1 of the device).
#include "vendors/awsneuron/awsneuron.h"

#include <algorithm>
#include <map>
#include <optional>

#include "nlohmann/json.hpp"
#include "vendors/config.h"
#include "vendors/generic.h"

namespace hami::vendors {
namespace {

constexpr const char kWord[] = "AWSNeuron";
constexpr const char kInstanceType[] = "node.kubernetes.io/instance-type";
constexpr int64_t kMaxDevices = 1024;
constexpr int kAlignedCounts[] = {1, 4, 8, 16};

class AwsNeuron : public GenericVendor {
 public:
  AwsNeuron(Spec spec, int cores_per_device)
      : GenericVendor(std::move(spec)), cores_per_device_(cores_per_device) {}

  StatusOr<std::optional<core::DeviceRequest>> ParseRequest(
      const nlohmann::json& resources, const std::map<std::string, std::string>&) const override {
    HAMI_ASSIGN_OR_RETURN(auto shape, Shape(resources));
    if (!shape.request) return std::optional<core::DeviceRequest>();
    if (!shape.denial.empty()) return InvalidArgument(shape.denial);
    return shape.request;
  }

  StatusOr<Mutation> Mutate(const nlohmann::json& resources,
                            const std::map<std::string, std::string>&) const override {
    HAMI_ASSIGN_OR_RETURN(auto shape, Shape(resources));
    Mutation m;
    if (!shape.denial.empty()) m.denials.push_back(shape.denial);
    return m;
  }

  StatusOr<std::vector<core::DeviceInfo>> DecodeNode(const NodeView& node) const override {
    const ResourceNames& n = spec_.resources;
    auto it = node.capacity.find(n.count);
    if (it == node.capacity.end() || it->second <= 0) return std::vector<core::DeviceInfo>();
    if (it->second > kMaxDevices)
      return InvalidArgument(
          StrCat("capacity ", n.count, "=", it->second, ": more than ", kMaxDevices, " devices"));
    auto c = node.capacity.find(n.cores);
    const int64_t cores = c == node.capacity.end() ? 0 : c->second;
    if (cores < 0 || cores > kMaxDevices * 1024)
      return InvalidArgument(StrCat("capacity ", n.cores, "=", cores, ": out of range"));
    // Upstream's geometry check (device_geometry_test.go): every device has the same cores.
    if (cores % it->second != 0)
      return InvalidArgument(StrCat("capacity ", n.cores, "=", cores, " is not divisible by ",
                                    n.count, "=", it->second));
    const int per_device = static_cast<int>(cores / it->second);
    auto label = node.labels.find(kInstanceType);
    std::vector<core::DeviceInfo> out;
    for (int64_t i = 0; i < it->second; ++i) {
      core::DeviceInfo d;
      d.uuid = StrCat(node.name, "-", kWord, "-", i);
      d.index = static_cast<int>(i);
      d.count = per_device > 0 ? 1 : 0;  // one pod per device; a device without cores takes none
      d.devmem_mib = 0;
      d.devcore = per_device;
      d.type = label == node.labels.end() ? kWord : StrCat(kWord, "-", label->second);
      d.vendor = kWord;
      d.health = true;
      out.push_back(d);
    }
    return out;
  }

  Status EncodeNode(const std::vector<core::DeviceInfo>& devices, NodeView* node) const override {
    int64_t cores = 0;
    for (const auto& d : devices) cores += d.devcore;
    node->capacity[spec_.resources.count] = static_cast<int64_t>(devices.size());
    node->capacity[spec_.resources.cores] = cores;
    return OkStatus();
  }

  // A device with fewer NeuronCores than coresPerDevice: a grant of it cannot be told from a part
  // of a coresPerDevice device in the decision (AddDecisionExtras), so its core ids would be
  // wrong; refused for good (the section's coresPerDevice must not exceed any node's).
  std::optional<Refusal> CheckDevice(const core::DeviceRequest& r, const core::DeviceInfo& d,
                                     const core::DeviceUsage& u,
                                     const core::DeviceSelectors& s) const override {
    if (d.vendor == kWord && d.devcore > 0 && d.devcore < cores_per_device_)
      return Refusal{scheduler::Reason::kCardTypeMismatch,
                     StrCat(d.uuid, ": ", d.devcore, " NeuronCores a device, fewer than ",
                            "awsneuron.coresPerDevice ", cores_per_device_,
                            ": its core ids cannot be written"),
                     true};
    return GenericVendor::CheckDevice(r, d, u, s);
  }

  core::ContainerDevice Grant(const core::DeviceRequest& r,
                              const core::DeviceInfo& d) const override {
    core::ContainerDevice g;
    g.uuid = d.uuid;
    g.vendor = kWord;
    g.index = d.index;
    // A whole device (count request, or cores spanning several devices) takes all its cores. So
    // does a core request on a device whose cores differ from coresPerDevice: the ids of a part
    // (`coresPerDevice x index + k`) would name another device's cores there, the device's index
    // names its own (upstream strides by each node's cores, device_geometry_test.go).
    const bool whole = r.mem_percentage == 100 || r.nums > 1 || d.devcore != cores_per_device_;
    g.usedcores = whole ? d.devcore : r.coresreq;
    return g;
  }

 protected:
  std::vector<int> ChooseSet(const core::DeviceRequest& r,
                             std::span<const core::DeviceInfo> devices,
                             const std::vector<int>& candidates) const override {
    if (candidates.empty() || static_cast<int>(candidates.size()) < r.nums) return {};
    if (r.nums == 1) return {candidates.back()};
    std::map<int, int> free;  // device index -> position
    for (int c : candidates) free.emplace(devices[c].index, c);
    const std::string& type = devices[candidates.front()].type;
    const bool ring =
        type.find("inf") != std::string::npos || type.find("Inf") != std::string::npos;
    if (!ring && std::find(std::begin(kAlignedCounts), std::end(kAlignedCounts), r.nums) ==
                     std::end(kAlignedCounts))
      return {};
    const int last = free.rbegin()->first;
    for (int start = 0; start + r.nums - 1 <= last; start += ring ? 1 : r.nums) {
      std::vector<int> run;
      for (int i = start; i < start + r.nums && free.count(i); ++i) run.push_back(free.at(i));
      if (static_cast<int>(run.size()) == r.nums) return run;
    }
    return {};
  }

  Status AddDecisionExtras(const core::PodAllocation& a, int64_t now_unix,
                           std::map<std::string, std::string>* out) const override {
    std::string ids;
    bool cores = false;
    for (const auto& c : a.containers)
      for (const auto& d : c) {
        if (d.usedcores > 0 && d.usedcores < cores_per_device_) {
          cores = true;
          for (int k = 0; k < d.usedcores; ++k)
            ids += StrCat(ids.empty() ? "" : ",", cores_per_device_ * d.index + k);
        } else {
          ids += StrCat(ids.empty() ? "" : ",", d.index);
        }
      }
    if (ids.empty()) return OkStatus();
    (*out)["AWS_NEURON_IDS"] = ids;
    if (cores) (*out)["NEURON_RESOURCE_TYPE"] = spec_.resources.cores;
    (*out)["NEURON_ALLOC_TIME"] = StrCat(now_unix * 1000000000LL);
    (*out)["NEURON_ALLOCATED"] = "false";
    (*out)["aws.amazon.com/predicate-node"] = a.node;
    return OkStatus();
  }

 private:
  struct RequestShape {
    std::optional<core::DeviceRequest> request;  // nullopt: not this vendor's container
    std::string denial;                          // set: the request is invalid (upstream's words)
  };
  // Upstream's validation and split of a container's request (count first, then cores).
  StatusOr<RequestShape> Shape(const nlohmann::json& resources) const {
    const ResourceNames& n = spec_.resources;
    RequestShape s;
    core::DeviceRequest r;
    r.vendor = kWord;
    HAMI_ASSIGN_OR_RETURN(auto count, ReadResource(resources, n.count));
    // 0 is no request for the scheduler (upstream's empty request) and a denial at admission.
    if (count && *count == 0) return (s.denial = StrCat(n.count, " must be greater than 0"), s);
    if (count) {
      s.request = r;
      if (*count > kMaxDevices)
        return (s.denial = StrCat(n.count, " must not exceed ", kMaxDevices), s);
      s.request->nums = static_cast<int>(*count);
      s.request->mem_percentage = 100;
      s.request->coresreq = cores_per_device_;
      return s;
    }
    HAMI_ASSIGN_OR_RETURN(auto cores, ReadResource(resources, n.cores));
    if (!cores) return s;
    if (*cores == 0) return (s.denial = StrCat(n.cores, " must be greater than 0"), s);
    s.request = r;
    if (*cores <= cores_per_device_) {
      s.request->nums = 1;
      s.request->coresreq = static_cast<int>(*cores);
      return s;
    }
    if (*cores % cores_per_device_ != 0)
      return (s.denial = StrCat(n.cores, " must be 1 or a multiple of ", cores_per_device_,
                                ", got ", *cores),
              s);
    if (*cores / cores_per_device_ > kMaxDevices)
      return (s.denial = StrCat(n.cores, " needs ", *cores / cores_per_device_,
                                " devices, which exceeds the maximum of ", kMaxDevices),
              s);
    s.request->nums = static_cast<int>(*cores / cores_per_device_);
    s.request->coresreq = cores_per_device_;
    return s;
  }

  int cores_per_device_;
};

}  // namespace

StatusOr<std::vector<std::unique_ptr<Vendor>>> MakeAwsNeuron(const YAML::Node& section) {
  Spec s;
  s.name = "awsneuron";
  s.common_word = kWord;
  s.resources = {"aws.amazon.com/neuron", "", "", "aws.amazon.com/neuroncore", ""};
  s.keys = {"",
            "",
            "",
            "hami.io/aws-neuron-devices-allocated",
            "",
            "",
            "aws.amazon.com/use-neuron-uuid",
            "aws.amazon.com/nouse-neuron-uuid"};
  s.registration = Registration::kCapacity;
  s.capacity_resource = s.resources.count;
  s.rules.group_rules = true;  // the topology rule above chooses the set
  SectionReader r(section, "awsneuron");
  HAMI_RETURN_IF_ERROR(ReadResourceKeys(r, &s.resources));
  // Ours: NeuronCores per device used to split core requests before a node is seen (upstream
  // takes the first node's ratio; 2 = Inf2/Trn1).
  int64_t per_device = 2;
  HAMI_RETURN_IF_ERROR(r.Int("coresPerDevice", &per_device));
  HAMI_RETURN_IF_ERROR(r.CheckKeys());
  if (per_device < 1 || per_device > 64)
    return InvalidArgument(StrCat("awsneuron.coresPerDevice: ", per_device, " not in 1..64"));
  s.capacity_resource = s.resources.count;
  std::vector<std::unique_ptr<Vendor>> out;
  out.push_back(std::make_unique<AwsNeuron>(std::move(s), static_cast<int>(per_device)));
  return out;
}

}  // namespace hami::vendors
