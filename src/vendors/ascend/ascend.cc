// Huawei Ascend (docs/upstream-contract.md#resource-model, #vendors): one vendor per `vnpus:` chip.
// Template vNPU (hard split): memory is
// rounded up to the smallest template, a partial-memory request takes one device, `-core` is
// refused. hami-core soft split: pod `huawei.com/vnpu-mode: hami-core` on nodes annotated
// `hami-vnpu-core: "true"`. Node score: share of the granted devices in one NetworkID (910
// SuperPod).
#include "vendors/ascend/ascend.h"

#include <map>
#include <vector>

#include "absl/strings/ascii.h"
#include "common/log.h"
#include "core/annotations.h"
#include "core/text_util.h"
#include "nlohmann/json.hpp"
#include "vendors/config.h"
#include "vendors/generic.h"
#include "yaml-cpp/yaml.h"

namespace hami::vendors {
namespace {

constexpr const char* kVnpuMode = kAscendVnpuModeKey;
constexpr const char kNodeHamiCore[] = "hami-vnpu-core";
constexpr const char kAscend910C[] = "Ascend910C";  // upstream's Ascend910CType
constexpr const char kModeTemplate[] = "template";
constexpr const char kModeEnpu[] = "enpu";

// Upstream's VNPUs.mode(): hamiVnpuMode trimmed and lower-cased, "hamicore" read as hami-core;
// empty = the deprecated boolean hamiVnpuCore (hami-core when true, else template).
StatusOr<std::string> VnpuMode(std::string mode, bool hami_core) {
  mode = std::string(absl::StripAsciiWhitespace(absl::AsciiStrToLower(mode)));
  if (mode.empty()) return std::string(hami_core ? core::kModeHamiCore : kModeTemplate);
  if (mode == "hamicore" || mode == core::kModeHamiCore) return std::string(core::kModeHamiCore);
  if (mode == kModeTemplate || mode == kModeEnpu) return mode;
  return InvalidArgument(StrCat("vnpus.hamiVnpuMode: must be template, hami-core (or hamiCore), ",
                                "or enpu, got \"", mode, "\""));
}

// ENPU pods (upstream's huawei.com/vnpu-mode values for its ENPU backend).
bool EnpuMode(const std::map<std::string, std::string>& a) {
  auto it = a.find("huawei.com/vnpu-mode");
  if (it == a.end()) return false;
  const std::string m = absl::AsciiStrToLower(absl::StripAsciiWhitespace(it->second));
  return m == kModeEnpu || m == "vcann-rt" || m == "ubs-virt";
}

class AscendVendor : public GenericVendor {
 public:
  // `allocatable_mib` / `capacity_mib`: the chip's memoryAllocatable / memoryCapacity (0: not
  // configured), what upstream's trimMemory rounds a request above the largest template to.
  AscendVendor(Spec spec, int64_t allocatable_mib, int64_t capacity_mib)
      : GenericVendor(std::move(spec)),
        allocatable_mib_(allocatable_mib),
        capacity_mib_(capacity_mib) {}

 protected:
  // Ascend 910C in a SuperPod (`superPod: true`; upstream device_910c_pairing_test.go): a module
  // carries two dies, device indices 2k and 2k+1, and a request for several NPUs takes whole
  // modules, both dies of each (lowest module first). Too few whole free modules, or an odd count
  // above one, does not fit. Without superPod (split mode) the dies are taken one by one.
  std::vector<int> ChooseSet(const core::DeviceRequest& r,
                             std::span<const core::DeviceInfo> devices,
                             const std::vector<int>& candidates) const override {
    if (!ModulePairs() || r.nums <= 1) return GenericVendor::ChooseSet(r, devices, candidates);
    if (r.nums % 2 != 0) return {};
    std::map<int, std::vector<int>> modules;  // index / 2 -> free positions
    for (int c : candidates)
      if (devices[c].index >= 0) modules[devices[c].index / 2].push_back(c);
    std::vector<int> out;
    for (const auto& [module, pos] : modules) {
      if (pos.size() != 2) continue;  // one die busy (or not registered)
      out.insert(out.end(), pos.begin(), pos.end());
      if (static_cast<int>(out.size()) == r.nums) return out;
    }
    return {};
  }

 public:
  StatusOr<Mutation> Mutate(const nlohmann::json& given,
                            const std::map<std::string, std::string>& a) const override {
    HAMI_ASSIGN_OR_RETURN(const nlohmann::json resources, ModuleRounded(given));
    HAMI_ASSIGN_OR_RETURN(Mutation m, GenericVendor::Mutate(resources, a));
    if (EnpuMode(a) && ReadResource(resources, spec_.resources.count).value_or(std::nullopt)) {
      m.denials.push_back(
          StrCat(kVnpuMode, ": ", a.at(kVnpuMode),
                 " (Ascend's ENPU soft split) is not supported by hami-cpp yet; use "
                 "template vNPU or hami-core"));
      return m;
    }
    if (resources != given) m.add_limits[spec_.resources.count] = 2;
    HAMI_ASSIGN_OR_RETURN(auto count, ReadResource(resources, spec_.resources.count));
    if (ModulePairs() && count && *count > 1 && *count % 2 != 0)
      m.denials.insert(m.denials.begin(),
                       StrCat(spec_.resources.count, "=", *count, ": ", kAscend910C,
                              " takes whole modules (2 NPUs): ask "
                              "for 1 or an even number"));
    HAMI_ASSIGN_OR_RETURN(auto cores, ReadResource(resources, spec_.resources.cores));
    if (HamiCore(a)) {
      m.denials.clear();  // soft split: no templates, no single-device limit
    } else {
      // Memory above the largest template takes the whole card (Fit checks the card's size).
      std::erase_if(m.denials, [&](const std::string& d) {
        return d.find("larger than the largest") != std::string::npos;
      });
      m.add_limits.erase(spec_.resources.cores);
      if (cores)
        m.denials.push_back(StrCat(spec_.resources.cores,
                                   ": template vNPU takes the cores of its template; remove it, "
                                   "or set ",
                                   kVnpuMode, ": hami-core to use soft-split cores"));
      HAMI_RETURN_IF_ERROR(WriteBackTemplate(resources, &m));
    }
    return m;
  }
  StatusOr<std::optional<core::DeviceRequest>> ParseRequest(
      const nlohmann::json& given, const std::map<std::string, std::string>& a) const override {
    HAMI_ASSIGN_OR_RETURN(const nlohmann::json resources, ModuleRounded(given));
    HAMI_ASSIGN_OR_RETURN(auto r, GenericVendor::ParseRequest(resources, a));
    if (r && EnpuMode(a))
      return InvalidArgument(StrCat(kVnpuMode, ": ", a.at(kVnpuMode), " (ENPU) is not supported"));
    if (r && !HamiCore(a)) {
      HAMI_ASSIGN_OR_RETURN(auto cores, ReadResource(resources, spec_.resources.cores));
      if (cores)
        return InvalidArgument(StrCat(spec_.resources.cores, ": not supported for template vNPU"));
      // The request is what will be allocated (upstream's GenerateResourceRequests trims it the
      // same way), so the spec the webhook rewrote parses as the spec it was given.
      if (r->memreq_mib > 0) {
        if (const Template* t = SmallestTemplate(spec_.rules.templates, r->memreq_mib)) {
          r->memreq_mib = t->memory_mib;
        } else if (WholeCardFits(r->memreq_mib)) {
          r->memreq_mib = 0;
          r->mem_percentage = 100;
          r->coresreq = 100;
        }
      }
    }
    return r;
  }
  StatusOr<core::DeviceSelectors> ParseSelectors(
      const std::map<std::string, std::string>& a) const override {
    HAMI_ASSIGN_OR_RETURN(auto s, GenericVendor::ParseSelectors(a));
    if (HamiCore(a)) s.vgpu_mode = core::kModeHamiCore;
    return s;
  }
  StatusOr<std::vector<core::DeviceInfo>> DecodeNode(const NodeView& node) const override {
    HAMI_ASSIGN_OR_RETURN(auto devs, GenericVendor::DecodeNode(node));
    // An NPU has no MIG: a registration that says so is not an Ascend device plugin's (and the
    // hami-core annotation below would turn it into a hami-core device with MIG profiles, which
    // no encoding can carry).
    for (const auto& d : devs)
      if (d.mode == core::kModeMig || !d.mig_profiles.empty())
        return InvalidArgument(spec_.keys.node_register, ": device ", core::text::Quote(d.uuid),
                               ": MIG mode or profiles on an Ascend NPU");
    auto it = node.annotations.find(kNodeHamiCore);
    if (it != node.annotations.end() && it->second == "true")
      for (auto& d : devs) d.mode = core::kModeHamiCore;
    return devs;
  }
  Status EncodeNode(const std::vector<core::DeviceInfo>& devices, NodeView* node) const override {
    std::vector<core::DeviceInfo> plain = devices;
    bool hami_core = false;
    for (auto& d : plain) {
      hami_core = hami_core || d.mode == core::kModeHamiCore;
      d.mode.clear();
    }
    if (hami_core) node->annotations[kNodeHamiCore] = "true";
    return GenericVendor::EncodeNode(plain, node);
  }
  std::optional<Refusal> CheckDevice(const core::DeviceRequest& r, const core::DeviceInfo& d,
                                     const core::DeviceUsage& u,
                                     const core::DeviceSelectors& s) const override {
    const bool want = s.vgpu_mode == core::kModeHamiCore, have = d.mode == core::kModeHamiCore;
    if (want != have)
      return Refusal{scheduler::Reason::kCardTypeMismatch,
                     StrCat(d.uuid, want ? ": node does not run hami-core vNPU"
                                         : ": node runs hami-core vNPU only"),
                     true};
    return GenericVendor::CheckDevice(WholeCardAboveTemplates(r, d), d, u, s);
  }
  core::ContainerDevice Grant(const core::DeviceRequest& r,
                              const core::DeviceInfo& d) const override {
    return GenericVendor::Grant(WholeCardAboveTemplates(r, d), d);
  }
  // NetworkID per device from the registration's customInfo (910 SuperPod).
  int ScoreNode(std::span<const core::DeviceInfo> devices, std::span<const int> granted,
                const NodeView& node) const override {
    auto it = node.annotations.find(spec_.keys.node_register);
    if (granted.empty() || it == node.annotations.end()) return 0;
    const auto j = nlohmann::json::parse(it->second, nullptr, false);
    if (!j.is_array()) return 0;
    std::map<std::string, int64_t> net;
    for (const auto& e : j) {
      if (!e.is_object() || !e.contains("id") || !e["id"].is_string()) continue;
      auto ci = e.find("customInfo");
      if (ci == e.end() || !ci->is_object()) continue;
      auto n = ci->find("NetworkID");
      if (n != ci->end() && n->is_number_integer())
        net[e["id"].get<std::string>()] = n->get<int64_t>();
    }
    std::map<int64_t, int> per;
    int best = 0;
    for (int g : granted) {
      auto n = net.find(devices[g].uuid);
      if (n != net.end()) best = std::max(best, ++per[n->second]);
    }
    return static_cast<int>(100 * best / static_cast<int>(granted.size()));
  }

 protected:
  // huawei.com/<CommonWord>: [{"UUID","temp","memory","core"}] for every granted device.
  Status AddDecisionExtras(const core::PodAllocation& a, int64_t,
                           std::map<std::string, std::string>* out) const override {
    nlohmann::json arr = nlohmann::json::array();
    for (const auto& c : a.containers)
      for (const auto& d : c) {
        std::string temp;
        for (const auto& t : spec_.rules.templates)
          if (t.memory_mib == d.usedmem_mib) temp = t.name;
        arr.push_back(
            {{"UUID", d.uuid}, {"temp", temp}, {"memory", d.usedmem_mib}, {"core", d.usedcores}});
      }
    (*out)[StrCat("huawei.com/", spec_.common_word)] = arr.dump();
    return OkStatus();
  }

 private:
  // Upstream rounds template-vNPU memory above the largest template, up to the card's memory, to
  // the whole card (cores included).
  core::DeviceRequest WholeCardAboveTemplates(const core::DeviceRequest& r,
                                              const core::DeviceInfo& d) const {
    if (!UsesTemplate(r, d) || r.memreq_mib <= 0 || r.memreq_mib > d.devmem_mib ||
        SmallestTemplate(spec_.rules.templates, r.memreq_mib))
      return r;
    core::DeviceRequest whole = r;
    whole.memreq_mib = 0;
    whole.mem_percentage = 100;
    whole.coresreq = 100;
    return whole;
  }
  // Upstream's 910C SuperPod admission (Test_MutateAdmission910C): the smallest unit is a module
  // of two NPUs, so a count of 1 becomes 2 (limits, and requests where present). The scheduler
  // reads a pod that skipped the webhook the same way.
  StatusOr<nlohmann::json> ModuleRounded(const nlohmann::json& resources) const {
    if (!ModulePairs()) return resources;
    HAMI_ASSIGN_OR_RETURN(auto count, ReadResource(resources, spec_.resources.count));
    if (!count || *count != 1) return resources;
    nlohmann::json out = resources;
    for (const char* part : {"limits", "requests"})
      if (out.contains(part) && out[part].is_object() && out[part].contains(spec_.resources.count))
        out[part][spec_.resources.count] = 2;
    return out;
  }

  // Upstream's trimMemory beyond the templates: a request up to the card's capacity takes the
  // whole card (its allocatable memory). Only when both are configured.
  bool WholeCardFits(int64_t mem_mib) const {
    return allocatable_mib_ > 0 && capacity_mib_ > 0 && mem_mib <= capacity_mib_ &&
           !SmallestTemplate(spec_.rules.templates, allocatable_mib_);
  }

  // Upstream's MutateAdmission: the container's memory becomes the template that will be
  // allocated (limits, and requests where present), the whole card's allocatable memory for a
  // count alone or memory beyond every template; memory beyond the card's capacity is refused.
  // Several vNPUs only as whole cards (the generic single-device denial stays otherwise).
  Status WriteBackTemplate(const nlohmann::json& resources, Mutation* m) const {
    const ResourceNames& n = spec_.resources;
    HAMI_ASSIGN_OR_RETURN(auto count, ReadResource(resources, n.count));
    HAMI_ASSIGN_OR_RETURN(auto mem, ReadResource(resources, n.memory));
    if (!count && !mem) return OkStatus();
    if (count && *count == 0) return OkStatus();
    const int64_t unit = spec_.memory_unit_mib;
    int64_t target_mib = 0;
    if (mem && *mem > 0) {
      const int64_t mib = *mem * unit;
      if (const Template* t = SmallestTemplate(spec_.rules.templates, mib)) {
        target_mib = t->memory_mib;
      } else if (capacity_mib_ > 0 && mib > capacity_mib_) {
        // First: upstream refuses it before it looks at the count.
        m->denials.insert(m->denials.begin(),
                          StrCat(n.memory, "=", *mem, ": more than a whole ", spec_.common_word,
                                 " (", capacity_mib_, " MiB)"));
        return OkStatus();
      } else if (WholeCardFits(mib)) {
        target_mib = allocatable_mib_;
      }
    } else if (WholeCardFits(0)) {
      target_mib = allocatable_mib_;  // a count alone is the whole card
    }
    if (target_mib == allocatable_mib_ && target_mib > 0)  // whole cards: any count
      std::erase_if(m->denials, [](const std::string& d) {
        return d.find("cannot split memory") != std::string::npos;
      });
    // A value the memory resource's unit cannot express exactly is left as it is.
    if (target_mib <= 0 || !m->denials.empty() || target_mib % unit != 0) return OkStatus();
    if (!mem || *mem * unit != target_mib) m->add_limits[n.memory] = target_mib / unit;
    return OkStatus();
  }

  // Whole 910C modules (superPod: true): ChipSpec sets group_rules for exactly that chip.
  bool ModulePairs() const { return spec_.rules.group_rules; }

  static bool HamiCore(const std::map<std::string, std::string>& a) {
    auto it = a.find(kVnpuMode);
    return it != a.end() && it->second == core::kModeHamiCore;
  }

  int64_t allocatable_mib_ = 0;
  int64_t capacity_mib_ = 0;
};

struct Chip {
  std::string chip, common_word;
  int64_t memory_mib, ai_core;                                       // memory_mib: memoryCapacity
  std::vector<std::tuple<std::string, int64_t, int64_t>> templates;  // name, MiB, aiCore
  std::string resource, memory_resource,
      core_resource;            // renames (empty: huawei.com/<CommonWord>[-memory|-core])
  int64_t memory_factor = 1;    // MiB per unit of the memory resource (upstream memoryFactor)
  int64_t allocatable_mib = 0;  // memoryAllocatable (0: memoryCapacity)
  bool super_pod = false;       // superPod: 910C modules are taken whole (upstream v2.11)
};

// Defaults when `vnpus:` lists nothing (values of upstream's chart device-config.yaml).
std::vector<Chip> DefaultChips() {
  return {{"910B3",
           "Ascend910B3",
           65536,
           20,
           {{"vir05_1c_16g", 16384, 5}, {"vir10_3c_32g", 32768, 10}},
           "",
           "",
           ""},
          {"310P3",
           "Ascend310P",
           24576,
           8,
           {{"vir01", 3072, 1}, {"vir02", 6144, 2}, {"vir04", 12288, 4}},
           "",
           "",
           "",
           1,
           21527}};
}

Spec ChipSpec(const Chip& c) {
  Spec s;
  s.name = "ascend";
  s.common_word = c.common_word;
  const std::string res = StrCat("huawei.com/", c.common_word);
  s.resources = {c.resource.empty() ? res : c.resource,
                 c.memory_resource.empty() ? StrCat(res, "-memory") : c.memory_resource, "",
                 c.core_resource.empty() ? StrCat(res, "-core") : c.core_resource, ""};
  s.keys = {StrCat("hami.io/node-register-", c.common_word),
            StrCat("hami.io/node-handshake-", c.common_word),
            StrCat("hami.io/", c.common_word, "-devices-to-allocate"),
            StrCat("hami.io/", c.common_word, "-devices-allocated"),
            "",
            "",
            StrCat("hami.io/use-", c.common_word, "-uuid"),
            StrCat("hami.io/no-use-", c.common_word, "-uuid")};
  s.rules.max_devices_per_container = 1;
  // 910C modules pair their dies: the scheduler lets Fit (ChooseSet) pick a multi-NPU set.
  s.rules.group_rules = c.common_word == kAscend910C && c.super_pod;
  for (const auto& [name, mem, core] : c.templates)
    s.rules.templates.push_back(
        {name, mem, static_cast<int>(core * 100 / std::max<int64_t>(c.ai_core, 1))});
  s.polarity = ScorePolarity::kTopologyCohesion;
  s.registration = Registration::kJson;
  s.memory_unit_mib = c.memory_factor;
  return s;
}

}  // namespace

std::optional<std::string> ImpliedVnpuMode(std::span<const std::unique_ptr<Vendor>> vendors,
                                           const nlohmann::json& pod_spec,
                                           const std::map<std::string, std::string>& annotations) {
  if (annotations.count(kVnpuMode) != 0 || !pod_spec.is_object()) return std::nullopt;
  for (const char* list : {"initContainers", "containers"}) {
    auto arr = pod_spec.find(list);
    if (arr == pod_spec.end() || !arr->is_array()) continue;
    for (const nlohmann::json& c : *arr) {
      if (!c.is_object() || !c.contains("resources") || !c["resources"].is_object()) continue;
      const nlohmann::json& res = c["resources"];
      if (!res.contains("limits")) continue;
      const nlohmann::json limits_only = {{"limits", res["limits"]}};  // upstream reads limits
      for (const auto& v : vendors) {
        if (v->name() != "ascend" || v->resources().cores.empty()) continue;
        auto cores = ReadResource(limits_only, v->resources().cores);
        if (cores.ok() && cores->value_or(0) > 0) return std::string(core::kModeHamiCore);
      }
    }
  }
  return std::nullopt;
}

StatusOr<std::vector<std::unique_ptr<Vendor>>> MakeAscend(const YAML::Node& section) {
  std::vector<Chip> chips;
  YAML::Node list = section;
  std::string where = "vnpus";
  if (section.IsMap()) {  // current upstream: {hamiVnpuMode, ..., configs: [chips]}; older: the
                          // list itself
    SectionReader top(section, "vnpus");
    bool hami_core = false;
    std::string mode;
    int64_t split_count = 0;  // the Ascend device plugin's: checked (>= 0; 0 = its default), unused
    HAMI_RETURN_IF_ERROR(top.Bool("hamiVnpuCore", &hami_core));
    HAMI_RETURN_IF_ERROR(top.String("hamiVnpuMode", &mode));
    HAMI_RETURN_IF_ERROR(top.Int("vnpuDeviceSplitCount", &split_count));
    // LoadVendors reads `enabled`; the others are upstream v2.11's, for its Ascend device plugin
    // and webhook (enpuPolicy only means something in ENPU mode, refused below).
    top.Ignore({"enabled", "enpuPolicy", "overwriteEnv", "runtimeClassName"});
    list.reset(top.Child("configs"));  // reset rebinds; operator= would write into `section`
    HAMI_RETURN_IF_ERROR(top.CheckKeys());
    HAMI_ASSIGN_OR_RETURN(mode, VnpuMode(mode, hami_core));
    if (mode == kModeEnpu)
      return InvalidArgument(
          "vnpus.hamiVnpuMode: enpu (Ascend's ENPU soft split) is not supported by hami-cpp yet; "
          "use template or hami-core (docs/migration.md)");
    if (mode == core::kModeHamiCore)
      spdlog::info(
          "vendor config: vnpus hami-core default ignored: hami-core mode is chosen per node by "
          "the hami-vnpu-core node annotation");
    where = "vnpus.configs";
  }
  if (list.IsDefined() && !list.IsNull()) {
    if (!list.IsSequence())
      return InvalidArgument(
          StrCat(where, ": expected a list of chips",
                 section.IsMap() ? "" : " or a mapping {hamiVnpuCore, configs}"));
    for (size_t i = 0; i < list.size(); ++i) {
      SectionReader r(list[i], StrCat(where, "[", i, "]"));
      Chip c;
      int64_t aicpu = 0;
      HAMI_RETURN_IF_ERROR(r.String("chipName", &c.chip));
      c.common_word = StrCat("Ascend", c.chip);
      HAMI_RETURN_IF_ERROR(r.String("commonWord", &c.common_word));
      HAMI_RETURN_IF_ERROR(r.String("resourceName", &c.resource));
      HAMI_RETURN_IF_ERROR(r.String("resourceMemoryName", &c.memory_resource));
      HAMI_RETURN_IF_ERROR(r.String("resourceCoreName", &c.core_resource));
      r.Ignore({"runtimeClassName", "overwriteEnv"});  // upstream, not read
      HAMI_RETURN_IF_ERROR(r.Bool("superPod", &c.super_pod));
      HAMI_RETURN_IF_ERROR(r.Int("memoryFactor", &c.memory_factor));
      if (c.memory_factor < 1 || c.memory_factor > kMaxMemoryUnitMib)
        return InvalidArgument(StrCat(r.where(), ".memoryFactor: ", c.memory_factor,
                                      " must be in 1..", kMaxMemoryUnitMib));
      c.memory_mib = 0;
      c.ai_core = 0;
      HAMI_RETURN_IF_ERROR(r.Int("memoryAllocatable", &c.allocatable_mib));
      HAMI_RETURN_IF_ERROR(r.Int("memoryCapacity", &c.memory_mib));
      HAMI_RETURN_IF_ERROR(r.Int("aiCore", &c.ai_core));
      HAMI_RETURN_IF_ERROR(r.Int("aiCPU", &aicpu));
      if (c.chip.empty() || c.ai_core <= 0)
        return InvalidArgument(StrCat(r.where(), ": chipName and aiCore > 0 are required"));
      const YAML::Node ts = r.Child("templates");
      if (ts.IsDefined() && !ts.IsSequence())
        return InvalidArgument(StrCat(r.where(), ".templates: expected a list"));
      for (size_t k = 0; ts.IsDefined() && k < ts.size(); ++k) {
        SectionReader tr(ts[k], StrCat(r.where(), ".templates[", k, "]"));
        std::string name;
        int64_t mem = 0, core = 0, cpu = 0;
        HAMI_RETURN_IF_ERROR(tr.String("name", &name));
        HAMI_RETURN_IF_ERROR(tr.Int("memory", &mem));
        HAMI_RETURN_IF_ERROR(tr.Int("aiCore", &core));
        HAMI_RETURN_IF_ERROR(tr.Int("aiCPU", &cpu));
        HAMI_RETURN_IF_ERROR(tr.CheckKeys());
        if (name.empty() || mem <= 0)
          return InvalidArgument(StrCat(tr.where(), ": name and memory > 0 are required"));
        c.templates.emplace_back(name, mem, core);
      }
      HAMI_RETURN_IF_ERROR(r.CheckKeys());
      chips.push_back(c);
    }
  }
  std::vector<std::unique_ptr<Vendor>> out;
  if (chips.empty()) chips = DefaultChips();
  out.reserve(chips.size());
  for (const Chip& c : chips)
    out.push_back(std::make_unique<AscendVendor>(
        ChipSpec(c), c.allocatable_mib > 0 ? c.allocatable_mib : c.memory_mib, c.memory_mib));
  return out;
}

}  // namespace hami::vendors
