#include "deviceplugin/config.h"

#include <cmath>
#include <fstream>
#include <sstream>

#include "k8s/label_selector.h"
#include "nlohmann/json.hpp"
#include "vendors/nvidia/device_list.h"

namespace hami::deviceplugin {

std::string JoinPath(const std::string& dir, const std::string& name) {
  if (!dir.empty() && dir.back() == '/') return dir + name;
  return dir + "/" + name;
}

Status Validate(const PluginConfig& c) {
  if (c.resource_name.find('/') == std::string::npos)
    return InvalidArgument("resource name '", c.resource_name, "' must be <domain>/<name>");
  if (c.scheduler_name.empty()) return InvalidArgument("scheduler name must not be empty");
  if (c.region_group < -1 || c.region_group > 0xfffffffe)
    return InvalidArgument("region group ", c.region_group, " must be a gid or -1");
  if (c.split_count < 1 || c.split_count > 1000)
    return InvalidArgument("split count ", c.split_count, " must be in 1..1000");
  if (!(c.memory_scaling > 0) || !std::isfinite(c.memory_scaling))
    return InvalidArgument("device memory scaling ", c.memory_scaling, " must be > 0");
  if (!(c.core_scaling > 0) || !std::isfinite(c.core_scaling))
    return InvalidArgument("device core scaling ", c.core_scaling, " must be > 0");
  if (c.preconfigured_memory_mib < 0)
    return InvalidArgument("preconfigured device memory ", c.preconfigured_memory_mib,
                           " must be >= 0");
  if (c.mode != "hami-core" && c.mode != "mig" && c.mode != "mps")
    return InvalidArgument("operating mode '", c.mode, "' must be hami-core, mig or mps");
  if (c.mode == "mps") {
    // MPS pins each client's device memory (CUDA_MPS_PINNED_DEVICE_MEM_LIMIT): nothing spills to
    // host memory as libvgpu's oversubscription does, so registered memory must be physical.
    if (c.memory_scaling > 1.0)
      return InvalidArgument("device memory scaling ", c.memory_scaling,
                             " > 1 oversubscribes memory, which operating mode mps cannot: MPS "
                             "pins each container's device memory");
    if (c.mps_pipe_dir.empty() || c.mps_pipe_dir.front() != '/' ||
        c.mps_pipe_dir.find(',') != std::string::npos)
      return InvalidArgument("MPS pipe dir '", c.mps_pipe_dir,
                             "' must be an absolute path without commas");
    if (!c.mps_shm_dir.empty() && c.mps_shm_dir.front() != '/')
      return InvalidArgument("MPS shm dir '", c.mps_shm_dir, "' must be an absolute path or empty");
  }
  // Static MIG strategies (NVIDIA's): pre-created MIG devices handed out whole by kubelet.
  if (c.mig_strategy != "none" && c.mig_strategy != "single" && c.mig_strategy != "mixed")
    return InvalidArgument("MIG strategy '", c.mig_strategy,
                           "' (--mig-strategy, nodeconfig migstrategy) must be none, single or "
                           "mixed");
  // Dynamic MIG creates and destroys instances; a static strategy hands out the admin's: on one
  // node they would fight over the same GPUs.
  if (c.mode == "mig" && c.mig_strategy != "none")
    return InvalidArgument("MIG strategy '", c.mig_strategy,
                           "' cannot be combined with operating mode mig (dynamic MIG): use "
                           "migstrategy none with operatingmode mig, or a static strategy with "
                           "operatingmode hami-core");
  // A MIG device has no NVML index of its own that the runtime reads the same way; its UUID does.
  if ((c.mode == "mig" || c.mig_strategy != "none") && c.device_id_strategy != "uuid")
    return InvalidArgument("--device-id-strategy ", c.device_id_strategy,
                           " cannot name MIG devices (",
                           c.mode == "mig" ? std::string("operating mode mig")
                                           : StrCat("MIG strategy ", c.mig_strategy),
                           "): use uuid");
  if (c.core_policy != "default" && c.core_policy != "force" && c.core_policy != "disable")
    return InvalidArgument("core policy '", c.core_policy, "' must be default, force or disable");
  if (!c.libcuda_log_level.empty() && c.libcuda_log_level != "0" && c.libcuda_log_level != "1" &&
      c.libcuda_log_level != "2" && c.libcuda_log_level != "3" && c.libcuda_log_level != "4")
    return InvalidArgument("libcuda log level '", c.libcuda_log_level, "' must be 0..4");
  if (auto s = vendors::nvidia::ParseDeviceListStrategies(c.device_list_strategy); !s.ok())
    return Annotate(s.status(), "--device-list-strategy");
  HAMI_RETURN_IF_ERROR(Annotate(vendors::nvidia::CheckDeviceIdStrategy(c.device_id_strategy),
                                "--device-id-strategy"));
  HAMI_RETURN_IF_ERROR(Annotate(vendors::nvidia::CheckCdiAnnotationPrefix(c.cdi_annotation_prefix),
                                "--cdi-annotation-prefix"));
  HAMI_RETURN_IF_ERROR(Annotate(vendors::nvidia::CheckCdiKind(c.cdi_kind), "--cdi-kind"));
  for (int i : c.exclude_indices)
    if (i < 0) return InvalidArgument("excluded device index ", i, " must be >= 0");
  if (c.socket_name.empty() || c.socket_name.find('/') != std::string::npos)
    return InvalidArgument("socket name '", c.socket_name, "' must be a plain file name");
  if (c.plugin_dir.empty()) return InvalidArgument("plugin dir must not be empty");
  if (!c.host_pid_broker_dir.empty() && c.host_pid_broker_dir.front() != '/')
    return InvalidArgument("--host-pid-broker-dir '", c.host_pid_broker_dir,
                           "' must be an absolute host path");
  // sockaddr_un.sun_path holds 108 bytes with the terminating NUL.
  for (const std::string& sock : {c.socket_name, c.kubelet_socket}) {
    const std::string path = JoinPath(c.plugin_dir, sock);
    if (path.size() > 107)
      return InvalidArgument("plugin dir: socket path ", path,
                             " is longer than 107 bytes (unix socket limit)");
  }
  return OkStatus();
}

namespace {

using nlohmann::json;

Status ApplyEntry(const json& e, const std::string& where, PluginConfig* c) {
  auto number = [&](const json& v, const std::string& key) -> StatusOr<double> {
    if (!v.is_number())
      return InvalidArgument(where, ": ", key, " must be a number, got ", v.dump());
    return v.get<double>();
  };
  auto integer = [&](const json& v, const std::string& key) -> StatusOr<int64_t> {
    if (!v.is_number_integer())
      return InvalidArgument(where, ": ", key, " must be an integer, got ", v.dump());
    return v.get<int64_t>();
  };
  auto boolean = [&](const json& v, const std::string& key) -> StatusOr<bool> {
    if (!v.is_boolean())
      return InvalidArgument(where, ": ", key, " must be true or false, got ", v.dump());
    return v.get<bool>();
  };
  auto string = [&](const json& v, const std::string& key) -> StatusOr<std::string> {
    if (!v.is_string())
      return InvalidArgument(where, ": ", key, " must be a string, got ", v.dump());
    return v.get<std::string>();
  };
  for (auto it = e.begin(); it != e.end(); ++it) {
    const std::string& key = it.key();
    const json& v = it.value();
    if (key == "name" || key == kNodeLabelSelectorKey) {
      continue;
    } else if (key == "operatingmode") {
      HAMI_ASSIGN_OR_RETURN(c->mode, string(v, key));
    } else if (key == "devicememoryscaling") {
      HAMI_ASSIGN_OR_RETURN(c->memory_scaling, number(v, key));
    } else if (key == "devicecorescaling") {
      HAMI_ASSIGN_OR_RETURN(c->core_scaling, number(v, key));
    } else if (key == "devicesplitcount") {
      HAMI_ASSIGN_OR_RETURN(int64_t n, integer(v, key));
      if (n < 1 || n > 1000)
        return InvalidArgument(where, ": devicesplitcount ", n, " must be in 1..1000");
      c->split_count = static_cast<int>(n);
    } else if (key == "preconfigureddevicememory") {
      HAMI_ASSIGN_OR_RETURN(c->preconfigured_memory_mib, integer(v, key));
    } else if (key == "enablenumatopology") {
      HAMI_ASSIGN_OR_RETURN(c->enable_numa_topology, boolean(v, key));
    } else if (key == "reportnodecapacity") {
      HAMI_ASSIGN_OR_RETURN(c->report_node_capacity, boolean(v, key));
    } else if (key == "enablegetpreferredallocation") {
      HAMI_ASSIGN_OR_RETURN(c->enable_preferred_allocation, boolean(v, key));
    } else if (key == "libcudaloglevel") {
      // Upstream writes a string ("1"); accept an integer too.
      if (v.is_number_integer()) {
        c->libcuda_log_level = std::to_string(v.get<int64_t>());
      } else {
        HAMI_ASSIGN_OR_RETURN(c->libcuda_log_level, string(v, key));
      }
    } else if (key == "migstrategy") {
      HAMI_ASSIGN_OR_RETURN(c->mig_strategy, string(v, key));
      if (c->mig_strategy != "none" && c->mig_strategy != "single" && c->mig_strategy != "mixed")
        return InvalidArgument(where, ": migstrategy '", c->mig_strategy,
                               "' must be none, single or mixed");
    } else if (key == "filterdevices") {
      if (!v.is_object()) return InvalidArgument(where, ": filterdevices must be an object");
      // An entry's filter replaces what an earlier one chose (several selector entries apply).
      c->exclude_uuids.clear();
      c->exclude_indices.clear();
      for (auto f = v.begin(); f != v.end(); ++f) {
        if (!f.value().is_array())
          return InvalidArgument(where, ": filterdevices.", f.key(), " must be an array");
        if (f.key() == "uuid") {
          for (const auto& u : f.value()) {
            if (!u.is_string())
              return InvalidArgument(where, ": filterdevices.uuid entries must be strings");
            c->exclude_uuids.push_back(u.get<std::string>());
          }
        } else if (f.key() == "index") {
          for (const auto& i : f.value()) {
            if (!i.is_number_integer() || i.get<int64_t>() < 0 || i.get<int64_t>() > 1'000'000)
              return InvalidArgument(
                  where, ": filterdevices.index entries must be integers >= 0, got ", i.dump());
            c->exclude_indices.push_back(static_cast<int>(i.get<int64_t>()));
          }
        } else {
          return InvalidArgument(where, ": unknown key filterdevices.", f.key(),
                                 " (expected uuid, index)");
        }
      }
    } else {
      return InvalidArgument(where, ": unknown key '", key, "'");
    }
  }
  return Annotate(Validate(*c), where);
}

}  // namespace

Status ApplyNodeConfig(std::string_view text, std::string_view node_name, PluginConfig* config,
                       std::string_view source, const NodeLabelsFn& node_labels) {
  json doc = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return InvalidArgument(source, ": not valid JSON");
  if (!doc.is_object()) return InvalidArgument(source, ": top level must be an object");
  auto nc = doc.find("nodeconfig");
  if (nc == doc.end()) return OkStatus();  // nothing per node
  if (!nc->is_array()) return InvalidArgument(source, ": nodeconfig must be an array");
  // Upstream's selectNodeConfigs (#3173): the entry naming this node; else every entry whose
  // nodelabelselector matches the node's labels, in list order (a later one overrides what it
  // sets); else the entry named "*".
  std::vector<size_t> named, with_selector, fallback;
  std::vector<std::string> wheres;
  for (size_t i = 0; i < nc->size(); ++i) {
    const json& e = (*nc)[i];
    std::string where = StrCat(source, ": nodeconfig[", i, "]");
    if (!e.is_object()) return InvalidArgument(where, ": must be an object");
    auto name = e.find("name");
    auto sel = e.find(kNodeLabelSelectorKey);
    const bool has_sel = sel != e.end() && !sel->is_null();
    if (name != e.end() ? !name->is_string() : !has_sel)
      return InvalidArgument(where, ": name must be a string");
    const std::string entry_name = name != e.end() ? name->get<std::string>() : "";
    if (!entry_name.empty()) where = StrCat(where, " (", entry_name, ")");
    // Check every entry, so a broken entry for another node is found on any node.
    PluginConfig scratch = *config;
    HAMI_RETURN_IF_ERROR(ApplyEntry(e, where, &scratch));
    if (has_sel) {
      if (Status s = k8s::LabelSelectorMatches(*sel, json()).status(); !s.ok())
        return InvalidArgument(where, ": ", kNodeLabelSelectorKey, ": ", s.message());
    }
    if (entry_name == node_name) {
      if (!named.empty())
        return InvalidArgument(source, ": node '", node_name, "' has several entries");
      named.push_back(i);
    } else if (has_sel) {
      with_selector.push_back(i);
    } else if (entry_name == kNodeConfigFallbackName) {
      fallback.push_back(i);
    }
    wheres.push_back(std::move(where));
  }
  std::vector<size_t> selected;
  if (named.empty() && !with_selector.empty()) {
    json labels;  // none known: only an empty selector matches
    if (node_labels) {
      HAMI_ASSIGN_OR_RETURN(labels, node_labels());
    }
    for (size_t i : with_selector)
      if (k8s::LabelSelectorMatches((*nc)[i][kNodeLabelSelectorKey], labels).value_or(false))
        selected.push_back(i);
  }
  const std::vector<size_t>& chosen = !named.empty()      ? named
                                      : !selected.empty() ? selected
                                                          : fallback;
  for (size_t i : chosen) HAMI_RETURN_IF_ERROR(ApplyEntry((*nc)[i], wheres[i], config));
  return OkStatus();
}

Status ApplyNodeConfigFile(const std::string& path, std::string_view node_name,
                           PluginConfig* config, const NodeLabelsFn& node_labels) {
  std::ifstream f(path);
  if (!f) return NotFound("cannot read device plugin config ", path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ApplyNodeConfig(ss.str(), node_name, config, path, node_labels);
}

}  // namespace hami::deviceplugin
