#include "core/node_codec.h"

#include <algorithm>
#include <cctype>
#include <limits>
#include <set>

#include "core/json_util.h"
#include "core/mig.h"
#include "core/text_util.h"
#include "nlohmann/json.hpp"

namespace hami::core {
namespace {

using jsonutil::GetBool;
using jsonutil::GetInt;
using jsonutil::GetString;
using nlohmann::json;
using nlohmann::ordered_json;

constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();
constexpr int64_t kInt32Min = std::numeric_limits<int32_t>::min();

// Go's omitempty: set the key only for non-zero values.
template <typename T>
void PutNonZero(ordered_json& o, const char* key, const T& v) {
  if (v != T{}) o[key] = v;
}

bool EqualFold(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

// Go's encoding/json matches object keys to field names case-insensitively ({"ID":..,"Devmem":..}
// fills id and devmem): a copy of `obj` whose keys that fold to one of `fields` are spelled as the
// field. An exact spelling wins over folded ones; among folded spellings of one field (Go: the last
// in the document) the last in byte order. Other keys are kept as they are.
json FoldKeys(const json& obj, std::initializer_list<const char*> fields) {
  json out = json::object();
  for (const auto& [key, value] : obj.items()) {
    std::string name = key;
    for (const char* f : fields)
      if (EqualFold(key, f)) name = f;
    if (name != key && obj.contains(name)) continue;  // the exact spelling is there
    out[name] = value;
  }
  return out;
}

Status DecodeMigProfile(const json& raw, std::string_view where, MigProfile* out) {
  if (!raw.is_object())
    return InvalidArgument(where, "expected a JSON object, got ", raw.type_name());
  const json p = FoldKeys(raw, {"name", "memoryMB", "core", "sliceCount", "placements"});
  int64_t v = 0;
  HAMI_RETURN_IF_ERROR(GetString(p, "name", where, &out->name));
  HAMI_RETURN_IF_ERROR(GetInt(p, "memoryMB", 0, kInt32Max, where, &v));
  out->memory_mib = v;
  v = 0;
  HAMI_RETURN_IF_ERROR(GetInt(p, "core", 0, kInt32Max, where, &v));
  out->core = static_cast<int>(v);
  v = 0;
  HAMI_RETURN_IF_ERROR(GetInt(p, "sliceCount", 0, kInt32Max, where, &v));
  out->slice_count = static_cast<int>(v);
  if (const auto it = p.find("placements"); it != p.end() && !it->is_null()) {
    if (!it->is_array())
      return InvalidArgument(where, "placements: expected a JSON array, got ", it->type_name());
    for (size_t i = 0; i < it->size(); ++i) {
      const std::string w = StrCat(where, "placements[", i, "].");
      if (!(*it)[i].is_object())
        return InvalidArgument(w, "expected a JSON object, got ", (*it)[i].type_name());
      const json pl = FoldKeys((*it)[i], {"start", "size"});
      int64_t start = 0, size = 0;
      HAMI_RETURN_IF_ERROR(GetInt(pl, "start", 0, kInt32Max, w, &start));
      HAMI_RETURN_IF_ERROR(GetInt(pl, "size", 0, kInt32Max, w, &size));
      out->placements.push_back(MigPlacement{static_cast<int>(start), static_cast<int>(size)});
    }
  }
  return OkStatus();
}

Status DecodeDeviceJson(const json& raw, std::string_view where, DeviceInfo* out) {
  if (!raw.is_object())
    return InvalidArgument(where, "expected a JSON object, got ", raw.type_name());
  const json d = FoldKeys(raw, {"id", "index", "count", "devmem", "devcore", "type", "numa",
                                "health", "mode", "migProfiles"});
  // Go zero values for everything absent.
  out->health = false;
  out->devcore = 0;
  int64_t v = 0;
  HAMI_RETURN_IF_ERROR(GetString(d, "id", where, &out->uuid));
  HAMI_RETURN_IF_ERROR(GetInt(d, "index", 0, kInt32Max, where, &v));
  out->index = static_cast<int>(v);
  v = 0;
  HAMI_RETURN_IF_ERROR(GetInt(d, "count", 0, kInt32Max, where, &v));
  out->count = static_cast<int>(v);
  v = 0;
  HAMI_RETURN_IF_ERROR(GetInt(d, "devmem", 0, kInt32Max, where, &v));
  out->devmem_mib = v;
  v = 0;
  HAMI_RETURN_IF_ERROR(GetInt(d, "devcore", 0, kInt32Max, where, &v));
  out->devcore = static_cast<int>(v);
  HAMI_RETURN_IF_ERROR(GetString(d, "type", where, &out->type));
  v = 0;
  HAMI_RETURN_IF_ERROR(GetInt(d, "numa", kInt32Min, kInt32Max, where, &v));
  out->numa = static_cast<int>(v);
  HAMI_RETURN_IF_ERROR(GetBool(d, "health", where, &out->health));
  HAMI_RETURN_IF_ERROR(GetString(d, "mode", where, &out->mode));
  if (const auto it = d.find("migProfiles"); it != d.end() && !it->is_null()) {
    if (!it->is_array())
      return InvalidArgument(where, "migProfiles: expected a JSON array, got ", it->type_name());
    for (size_t i = 0; i < it->size(); ++i) {
      MigProfile p;
      HAMI_RETURN_IF_ERROR(DecodeMigProfile((*it)[i], StrCat(where, "migProfiles[", i, "]."), &p));
      out->mig_profiles.push_back(std::move(p));
    }
  }
  return OkStatus();
}

StatusOr<std::vector<DeviceInfo>> DecodeJson(std::string_view text, std::string_view vendor) {
  HAMI_ASSIGN_OR_RETURN(json arr, jsonutil::Parse(text, "node devices"));
  if (!arr.is_array())
    return InvalidArgument("node devices: expected a JSON array, got ", arr.type_name());
  if (arr.size() > kMaxNodeDevices)
    return InvalidArgument("node devices: ", arr.size(), " devices declared, more than the ",
                           kMaxNodeDevices, " a node may register");
  std::vector<DeviceInfo> out;
  for (size_t i = 0; i < arr.size(); ++i) {
    DeviceInfo d;
    d.vendor = std::string(vendor);
    HAMI_RETURN_IF_ERROR(DecodeDeviceJson(arr[i], StrCat("node devices[", i, "]: "), &d));
    out.push_back(std::move(d));
  }
  return out;
}

StatusOr<int64_t> CsvInt(std::string_view field, const char* name, int64_t min, size_t entry) {
  const auto v = text::ParseInt(field);
  if (!v || *v < min || *v > kInt32Max) {
    return InvalidArgument("node devices entry ", entry, ": ", name, " ", text::Quote(field),
                           " is not an integer in ", min, "..", kInt32Max);
  }
  return *v;
}

StatusOr<std::vector<DeviceInfo>> DecodeCsv(std::string_view text, std::string_view vendor) {
  std::vector<DeviceInfo> out;
  size_t entry = 0;
  for (std::string_view item : text::Split(text, ':')) {
    item = text::Trim(item);
    if (item.empty()) continue;
    if (out.size() == kMaxNodeDevices)
      return InvalidArgument("node devices: more than the ", kMaxNodeDevices,
                             " devices a node may register");
    const auto f = text::Split(item, ',');
    if (f.size() != 7 && f.size() != 9) {
      return InvalidArgument(
          "node devices entry ", entry, " ", text::Quote(item), ": has ", f.size(),
          " fields, expected 7 (id,count,devmem,devcore,type,numa,health) or 9 (+index,mode)");
    }
    DeviceInfo d;
    d.vendor = std::string(vendor);
    d.uuid = std::string(f[0]);
    HAMI_ASSIGN_OR_RETURN(int64_t count, CsvInt(f[1], "count", 0, entry));
    HAMI_ASSIGN_OR_RETURN(d.devmem_mib, CsvInt(f[2], "devmem", 0, entry));
    HAMI_ASSIGN_OR_RETURN(int64_t devcore, CsvInt(f[3], "devcore", 0, entry));
    d.type = std::string(f[4]);
    if (!text::IsValidUtf8(d.uuid) || !text::IsValidUtf8(d.type)) {
      return InvalidArgument("node devices entry ", entry, ": id and type must be valid UTF-8");
    }
    HAMI_ASSIGN_OR_RETURN(int64_t numa, CsvInt(f[5], "numa", kInt32Min, entry));
    const auto health = text::ParseBool(f[6]);
    if (!health) {
      return InvalidArgument("node devices entry ", entry, ": health ", text::Quote(f[6]),
                             " is not true or false");
    }
    d.count = static_cast<int>(count);
    d.devcore = static_cast<int>(devcore);
    d.numa = static_cast<int>(numa);
    d.health = *health;
    if (f.size() == 9) {
      HAMI_ASSIGN_OR_RETURN(int64_t index, CsvInt(f[7], "index", 0, entry));
      d.index = static_cast<int>(index);
      d.mode = std::string(f[8]);
      if (!text::IsValidUtf8(d.mode))
        return InvalidArgument("node devices entry ", entry, ": mode must be valid UTF-8");
    }
    out.push_back(std::move(d));
    ++entry;
  }
  return out;
}

bool HasCsvSeparator(std::string_view s) {
  return s.find_first_of(",:") != std::string_view::npos;
}

}  // namespace

std::string EncodeNodeDevicesJson(const std::vector<DeviceInfo>& devices) {
  ordered_json arr = ordered_json::array();
  for (const auto& d : devices) {
    ordered_json o = ordered_json::object();
    PutNonZero(o, "id", d.uuid);
    PutNonZero(o, "index", d.index);
    PutNonZero(o, "count", d.count);
    PutNonZero(o, "devmem", d.devmem_mib);
    PutNonZero(o, "devcore", d.devcore);
    PutNonZero(o, "type", d.type);
    PutNonZero(o, "numa", d.numa);
    PutNonZero(o, "health", d.health);
    PutNonZero(o, "mode", d.mode);
    if (!d.mig_profiles.empty()) {
      ordered_json profiles = ordered_json::array();
      for (const auto& p : d.mig_profiles) {
        ordered_json po = ordered_json::object();
        PutNonZero(po, "name", p.name);
        PutNonZero(po, "memoryMB", p.memory_mib);
        PutNonZero(po, "core", p.core);
        PutNonZero(po, "sliceCount", p.slice_count);
        if (!p.placements.empty()) {
          ordered_json pls = ordered_json::array();
          for (const auto& pl : p.placements)
            pls.push_back(ordered_json{{"start", pl.start}, {"size", pl.size}});
          po["placements"] = std::move(pls);
        }
        profiles.push_back(std::move(po));
      }
      o["migProfiles"] = std::move(profiles);
    }
    arr.push_back(std::move(o));
  }
  // Invalid UTF-8 (only possible from callers, never from our decoders) becomes U+FFFD as in Go.
  return arr.dump(-1, ' ', false, ordered_json::error_handler_t::replace);
}

StatusOr<std::string> EncodeNodeDevicesCsv(const std::vector<DeviceInfo>& devices) {
  std::string out;
  for (const auto& d : devices) {
    if (HasCsvSeparator(d.uuid) || HasCsvSeparator(d.type) || HasCsvSeparator(d.mode)) {
      return InvalidArgument("device ", text::Quote(d.uuid),
                             ": id, type and mode must not contain ',' or ':' in the CSV format");
    }
    if (!d.mig_profiles.empty()) {
      return InvalidArgument("device ", text::Quote(d.uuid),
                             ": MIG profiles cannot be encoded in the CSV format; use JSON");
    }
    out += StrCat(d.uuid, ",", d.count, ",", d.devmem_mib, ",", d.devcore, ",", d.type, ",", d.numa,
                  ",", d.health ? "true" : "false", ",", d.index, ",", d.mode, ":");
  }
  return out;
}

StatusOr<std::vector<DeviceInfo>> DecodeNodeDevices(std::string_view text,
                                                    std::string_view vendor) {
  const std::string_view t = text::Trim(text);
  StatusOr<std::vector<DeviceInfo>> out =
      !t.empty() && t.front() == '[' ? DecodeJson(t, vendor) : DecodeCsv(t, vendor);
  if (!out.ok()) return out;
  std::set<std::string> seen;
  for (size_t i = 0; i < out->size(); ++i) {
    const std::string& id = (*out)[i].uuid;
    if (id.empty()) return InvalidArgument("node devices[", i, "]: id is empty");
    if (!seen.insert(id).second)
      return InvalidArgument("node devices[", i, "]: id ", text::Quote(id), " appears twice");
    if (Status st = ValidateMigRegistration((*out)[i]); !st.ok())
      return InvalidArgument("node devices[", i, "]: ", st.message());
  }
  return out;
}

std::string EncodeLinkScores(const LinkScores& scores) {
  ordered_json arr = ordered_json::array();
  for (const auto& [uuid, peers] : scores) {
    ordered_json s = ordered_json::object();
    for (const auto& [peer, score] : peers) s[peer] = score;
    arr.push_back(ordered_json{{"uuid", uuid}, {"score", std::move(s)}});
  }
  // Invalid UTF-8 (only possible from callers, never from our decoders) becomes U+FFFD as in Go.
  return arr.dump(-1, ' ', false, ordered_json::error_handler_t::replace);
}

StatusOr<LinkScores> DecodeLinkScores(std::string_view text) {
  HAMI_ASSIGN_OR_RETURN(json arr, jsonutil::Parse(text, "link scores"));
  if (!arr.is_array())
    return InvalidArgument("link scores: expected a JSON array, got ", arr.type_name());
  LinkScores out;
  for (size_t i = 0; i < arr.size(); ++i) {
    const json& e = arr[i];
    const std::string where = StrCat("link scores[", i, "].");
    if (!e.is_object())
      return InvalidArgument(where, " expected a JSON object, got ", e.type_name());
    std::string uuid;
    HAMI_RETURN_IF_ERROR(GetString(e, "uuid", where, &uuid));
    if (uuid.empty()) return InvalidArgument(where, "uuid is empty");
    if (out.count(uuid))
      return InvalidArgument(where, "uuid ", text::Quote(uuid), " appears twice");
    auto& peers = out[uuid];
    const auto it = e.find("score");
    if (it == e.end() || it->is_null()) continue;
    if (!it->is_object())
      return InvalidArgument(where, "score: expected a JSON object, got ", it->type_name());
    for (const auto& [peer, value] : it->items()) {
      int64_t v = 0;
      // Signed, as upstream's Go int: negative scores are links to avoid.
      HAMI_RETURN_IF_ERROR(jsonutil::ToInt(value, kInt32Min, kInt32Max,
                                           StrCat(where, "score[", text::Quote(peer), "]"), &v));
      peers[peer] = static_cast<int>(v);
    }
  }
  return out;
}

std::string EncodeDeviceCordon(const std::vector<std::string>& uuids) {
  std::string out;
  for (size_t i = 0; i < uuids.size(); ++i) out += (i ? "," : "") + uuids[i];
  return out;
}

std::vector<std::string> DecodeDeviceCordon(std::string_view text) {
  return text::SplitList(text);
}

}  // namespace hami::core
