#include "core/pod_codec.h"

#include <limits>

#include "core/json_util.h"
#include "core/text_util.h"
#include "nlohmann/json.hpp"

namespace hami::core {
namespace {

using nlohmann::json;

constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();

// A uuid or vendor the decoder would not read back as written: empty, a separator inside, or
// blanks at either end (the decoder trims each field, as it trims the whole value).
bool BadField(std::string_view s) {
  return s.empty() || s.find_first_of(",:;") != std::string_view::npos || text::Trim(s) != s;
}

}  // namespace

StatusOr<std::string> EncodePodDevices(const PodAllocation& allocation) {
  std::string out;
  for (size_t c = 0; c < allocation.containers.size(); ++c) {
    for (size_t i = 0; i < allocation.containers[c].size(); ++i) {
      const ContainerDevice& d = allocation.containers[c][i];
      const std::string where = StrCat("container ", c, " device ", i, ": ");
      if (BadField(d.uuid))
        return InvalidArgument(where, "uuid ", text::Quote(d.uuid),
                               " is empty, holds ',', ':' or ';', or starts or ends with a blank");
      if (BadField(d.vendor))
        return InvalidArgument(where, "vendor ", text::Quote(d.vendor),
                               " is empty, holds ',', ':' or ';', or starts or ends with a blank");
      if (d.usedmem_mib < 0 || d.usedmem_mib > kInt32Max)
        return InvalidArgument(where, "memory ", d.usedmem_mib, " MiB is outside 0..", kInt32Max);
      if (d.usedcores < 0) return InvalidArgument(where, "cores ", d.usedcores, " is negative");
      out += StrCat(d.uuid, ",", d.vendor, ",", d.usedmem_mib, ",", d.usedcores, ":");
    }
    out += ";";
  }
  return out;
}

StatusOr<PodAllocation> DecodePodDevices(std::string_view text) {
  PodAllocation out;
  std::string_view t = text::Trim(text);
  if (t.empty()) return out;
  if (t.back() == ';') t.remove_suffix(1);  // the last container's terminator
  std::vector<std::string_view> containers = text::Split(t, ';');
  for (size_t c = 0; c < containers.size(); ++c) {
    std::vector<ContainerDevice> devices;
    size_t i = 0;
    for (std::string_view item : text::Split(containers[c], ':')) {
      if (item.empty()) continue;
      const std::string where =
          StrCat("pod devices container ", c, " device ", i, " ", text::Quote(item), ": ");
      const auto f = text::Split(item, ',');
      if (f.size() < 4)
        return InvalidArgument(where, "has ", f.size(), " fields, expected UUID,Type,MemMiB,Cores");
      // Blanks around a field are not part of it (the whole value is trimmed too, so a blank
      // before the first uuid would otherwise be kept or not depending on where it is).
      const std::string_view uuid = text::Trim(f[0]), vendor = text::Trim(f[1]);
      if (uuid.empty()) return InvalidArgument(where, "uuid is empty");
      if (vendor.empty()) return InvalidArgument(where, "type is empty");
      const auto mem = text::ParseInt(f[2]);
      if (!mem || *mem < 0 || *mem > kInt32Max)
        return InvalidArgument(where, "memory ", text::Quote(f[2]), " is not an integer in 0..",
                               kInt32Max);
      const auto cores = text::ParseInt(f[3]);
      if (!cores || *cores < 0 || *cores > kInt32Max)
        return InvalidArgument(where, "cores ", text::Quote(f[3]), " is not an integer in 0..",
                               kInt32Max);
      ContainerDevice d;
      d.uuid = std::string(uuid);
      d.vendor = std::string(vendor);
      d.usedmem_mib = *mem;
      d.usedcores = static_cast<int>(*cores);
      devices.push_back(std::move(d));
      ++i;
    }
    out.containers.push_back(std::move(devices));
  }
  return out;
}

}  // namespace hami::core
