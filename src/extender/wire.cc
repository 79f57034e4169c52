#include "extender/wire.h"

#include <algorithm>
#include <array>
#include <cctype>

#include "core/json_util.h"

namespace hami::extender {
namespace {

bool EqualFold(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i])))
      return false;
  return true;
}

StatusOr<Json> ParseObject(std::string_view body, std::string_view what) {
  HAMI_RETURN_IF_ERROR(core::jsonutil::CheckDepth(body, what));
  Json j = Json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return InvalidArgument(what, ": body is not valid JSON");
  if (!j.is_object())
    return InvalidArgument(what, ": body must be a JSON object, got ", j.type_name());
  return j;
}

Status GetStringFold(const Json& obj, std::string_view key, std::string_view what,
                     std::string* out) {
  const Json* v = FindKeyFold(obj, key);
  if (v == nullptr || v->is_null()) return OkStatus();
  if (!v->is_string())
    return InvalidArgument(what, ": field ", key, " must be a string, got ", v->type_name());
  *out = v->get<std::string>();
  return OkStatus();
}

Status GetStringMap(const Json& obj, std::string_view key, std::string_view what,
                    std::map<std::string, std::string>* out) {
  const Json* v = FindKeyFold(obj, key);
  if (v == nullptr || v->is_null()) return OkStatus();
  if (!v->is_object())
    return InvalidArgument(what, ": field ", key, " must be an object, got ", v->type_name());
  for (const auto& [k, val] : v->items()) {
    if (!val.is_string())
      return InvalidArgument(what, ": field ", key, "[\"", k, "\"] must be a string");
    (*out)[k] = val.get<std::string>();
  }
  return OkStatus();
}

// `nodes`: the value of the Nodes field (nullptr when absent).
Status GetNodeList(const Json* nodes, std::string_view what,
                   std::optional<std::vector<Json>>* out) {
  if (nodes == nullptr || nodes->is_null()) return OkStatus();
  if (!nodes->is_object())
    return InvalidArgument(what, ": field Nodes must be a NodeList object or null");
  std::vector<Json> items;
  auto it = nodes->find("items");
  if (it != nodes->end() && !it->is_null()) {
    if (!it->is_array()) return InvalidArgument(what, ": field Nodes.items must be an array");
    items.reserve(it->size());
    for (size_t i = 0; i < it->size(); ++i) {
      const Json& n = (*it)[i];
      const Json* meta = n.is_object() ? FindKeyFold(n, "metadata") : nullptr;
      const Json* name = meta && meta->is_object() ? FindKeyFold(*meta, "name") : nullptr;
      if (name == nullptr || !name->is_string() || name->get_ref<const std::string&>().empty())
        return InvalidArgument(what, ": Nodes.items[", i, "] has no metadata.name");
      items.push_back(n);
    }
  }
  *out = std::move(items);
  return OkStatus();
}

Status GetNames(const Json& obj, std::string_view what,
                std::optional<std::vector<std::string>>* out) {
  const Json* names = FindKeyFold(obj, "NodeNames");
  if (names == nullptr || names->is_null()) return OkStatus();
  if (!names->is_array())
    return InvalidArgument(what, ": field NodeNames must be an array of strings or null");
  std::vector<std::string> v;
  v.reserve(names->size());
  for (size_t i = 0; i < names->size(); ++i) {
    if (!(*names)[i].is_string())
      return InvalidArgument(what, ": NodeNames[", i, "] must be a string");
    v.push_back((*names)[i].get<std::string>());
  }
  *out = std::move(v);
  return OkStatus();
}

Json NodeListJson(const std::optional<std::vector<Json>>& nodes) {
  if (!nodes) return nullptr;
  Json items = Json::array();
  for (const auto& n : *nodes) items.push_back(n);
  return Json{{"metadata", Json::object()}, {"items", std::move(items)}};
}

Json NamesJson(const std::optional<std::vector<std::string>>& names) {
  if (!names) return nullptr;
  return Json(*names);
}

Json MapJson(const std::map<std::string, std::string>& m) {
  // Go encodes a nil map as null, an empty non-nil one as {}; kube-scheduler accepts both.
  Json out = Json::object();
  for (const auto& [k, v] : m) out[k] = v;
  return out;
}

// ---- Fast ExtenderArgs parse (the hot request: ~70 KB at 5k nodes, nearly all of it NodeNames)
// ----
//
// The top-level object is scanned here; Pod and Nodes are parsed by nlohmann from their own extent,
// NodeNames' strings are copied straight into std::strings, and any other member is only validated
// (Json::accept). Key lookup mirrors FindKeyFold on the parsed object: duplicate keys keep the last
// value, an exact key beats case-folded ones, and among case-folded keys the smallest wins.
// Anything unusual (escapes or non-ASCII in a string, a non-string name, malformed JSON) makes the
// fast path give up so the DOM path produces the result or the worded error: the fast path never
// accepts what the DOM path rejects, and when it accepts, the result is the same (the fuzz target
// checks both). The nesting limit is checked on the parts nlohmann reads (Pod, Nodes, validated
// values), not on the whole body: NodeNames, nearly all of it, is flat when the fast path takes it.

// Bytes a JSON string may hold as they are (no escape): printable ASCII but the quote and the
// backslash. The scanner reads such strings in place; the encoder writes them without nlohmann.
constexpr std::array<bool, 256> kPlain = [] {
  std::array<bool, 256> t{};
  for (int c = 0x20; c < 0x80; ++c) t[static_cast<size_t>(c)] = c != '"' && c != '\\';
  return t;
}();

class Scanner {
 public:
  explicit Scanner(std::string_view s) : s_(s) {}

  void SkipWs() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\r' || s_[i_] == '\t'))
      ++i_;
  }
  bool Eat(char c) {
    SkipWs();
    if (i_ >= s_.size() || s_[i_] != c) return false;
    ++i_;
    return true;
  }
  bool AtEnd() {
    SkipWs();
    return i_ == s_.size();
  }
  // A plain string token (printable ASCII, no escapes) at the cursor; false otherwise.
  bool PlainString(std::string_view* out) {
    SkipWs();
    if (i_ >= s_.size() || s_[i_] != '"') return false;
    const size_t start = ++i_;
    const char* p = s_.data() + i_;
    const char* const end = s_.data() + s_.size();
    while (p != end && kPlain[static_cast<unsigned char>(*p)]) ++p;
    i_ = static_cast<size_t>(p - s_.data());
    if (p == end || *p != '"') return false;  // the end, an escape, a control or non-ASCII byte
    *out = s_.substr(start, i_ - start);
    ++i_;
    return true;
  }
  // An array of plain strings at the cursor: their contents go to *names (views into the text)
  // and *out is the array's extent. Anything else (another value, an escape, malformed text)
  // leaves the cursor where it was, *names empty, and returns false.
  bool PlainStringArray(std::string_view* out, std::vector<std::string_view>* names) {
    SkipWs();
    const size_t start = i_;
    names->clear();
    auto fail = [&] {
      i_ = start;
      names->clear();
      return false;
    };
    if (!Eat('[')) return fail();
    if (!Eat(']')) {
      for (;;) {
        std::string_view name;
        if (!PlainString(&name)) return fail();
        names->push_back(name);
        if (Eat(',')) continue;
        if (Eat(']')) break;
        return fail();
      }
    }
    *out = s_.substr(start, i_ - start);
    return true;
  }
  // The extent of the JSON value at the cursor, found by bracket and string matching only (the
  // caller validates it with nlohmann); false when it runs off the end or is empty.
  bool SkipValue(std::string_view* out) {
    SkipWs();
    const size_t start = i_;
    int depth = 0;
    while (i_ < s_.size()) {
      const char c = s_[i_];
      if (c == '"') {
        for (++i_; i_ < s_.size() && s_[i_] != '"'; ++i_)
          if (s_[i_] == '\\') ++i_;
        if (i_ >= s_.size()) return false;
        ++i_;
      } else if (c == '{' || c == '[') {
        ++depth;
        ++i_;
      } else if (c == '}' || c == ']') {
        if (depth == 0) break;
        --depth;
        ++i_;
      } else if (depth == 0 && !std::isalnum(static_cast<unsigned char>(c)) && c != '-' &&
                 c != '+' && c != '.') {
        break;  // the end of a number or literal (nlohmann would stop at a NUL byte and accept the
                // rest)
      } else {
        ++i_;
      }
      if (depth == 0 && (c == '"' || c == '}' || c == ']')) break;
    }
    if (depth != 0 || i_ == start) return false;
    *out = s_.substr(start, i_ - start);
    return true;
  }

 private:
  std::string_view s_;
  size_t i_ = 0;
};

// NodeNames' value: null or an array of plain strings. `scanned` holds the array's strings when the
// top-level scan has already read it as one (PlainStringArray), so the text is not read again.
bool FastNames(std::string_view v, const std::vector<std::string_view>* scanned,
               std::optional<std::vector<std::string>>* out) {
  if (v == "null") {
    out->reset();
    return true;
  }
  std::vector<std::string_view> local;
  if (scanned == nullptr) {
    Scanner sc(v);
    std::string_view extent;
    if (!sc.PlainStringArray(&extent, &local) || !sc.AtEnd()) return false;
    scanned = &local;
  }
  std::vector<std::string> names;
  names.reserve(scanned->size());
  for (std::string_view name : *scanned) names.emplace_back(name);
  *out = std::move(names);
  return true;
}

// Inside the top-level object: one level less than the whole body may nest.
bool DepthOk(std::string_view value) {
  return core::jsonutil::CheckDepth(value, "", core::jsonutil::kMaxDepth - 1).ok();
}
// A value only validated, never kept. Json::accept builds no tree (its parser keeps one bit per
// level), but the DOM path refuses the nesting, so the fast path must too.
bool Valid(std::string_view value) {
  return DepthOk(value) && Json::accept(value);
}

bool ParseExtenderArgsFast(std::string_view body, ExtenderArgs* args) {
  Scanner sc(body);
  if (!sc.Eat('{')) return false;
  // Per field: the value of the exact key (last occurrence), else of the smallest case-folded key.
  struct Field {
    std::string_view name, exact, folded, folded_key;
    bool has_exact = false, has_folded = false;
  };
  Field fields[] = {{"Pod", {}, {}, {}}, {"Nodes", {}, {}, {}}, {"NodeNames", {}, {}, {}}};
  // NodeNames (nearly all of the body) is read once, as it is scanned: the strings of the exact
  // key's value and of the folded key's value, each while that value is the field's (a value
  // that is not an array of plain strings is scanned as any other and left to FastNames).
  std::vector<std::string_view> scanned, names_exact, names_folded;
  bool scanned_exact = false, scanned_folded = false;
  if (!sc.Eat('}')) {
    for (;;) {
      std::string_view key, value;
      if (!sc.PlainString(&key) || !sc.Eat(':')) return false;
      bool as_names = false;
      if (key.size() == fields[2].name.size() && EqualFold(key, fields[2].name))
        as_names = sc.PlainStringArray(&value, &scanned);
      if (!as_names && !sc.SkipValue(&value)) return false;
      // A value no field will read (unknown key, replaced duplicate) must still be valid JSON.
      bool known = false;
      for (auto& f : fields) {
        const bool is_names = &f == &fields[2];
        if (key == f.name) {
          if (f.has_exact && !Valid(f.exact)) return false;
          f.exact = value;
          f.has_exact = known = true;
          if (is_names) {
            names_exact.swap(scanned);
            scanned_exact = as_names;
          }
        } else if (EqualFold(key, f.name)) {
          if (!f.has_folded || key <= f.folded_key) {
            if (f.has_folded && !Valid(f.folded)) return false;
            f.folded = value;
            f.folded_key = key;
            if (is_names) {
              names_folded.swap(scanned);
              scanned_folded = as_names;
            }
          } else if (!Valid(value)) {
            return false;
          }
          f.has_folded = known = true;
        }
      }
      if (!known && !Valid(value)) return false;
      if (sc.Eat(',')) continue;
      if (sc.Eat('}')) break;
      return false;
    }
  }
  if (!sc.AtEnd()) return false;
  auto chosen = [](const Field& f) -> const std::string_view* {
    if (f.has_exact) return &f.exact;
    if (f.has_folded) return &f.folded;
    return nullptr;
  };
  // Pod.
  const std::string_view* pod = chosen(fields[0]);
  if (pod == nullptr || !DepthOk(*pod)) return false;
  args->pod = Json::parse(pod->begin(), pod->end(), nullptr, /*allow_exceptions=*/false);
  if (!args->pod.is_object()) return false;
  // Nodes (the nodeCacheCapable=false form): rare, parsed as a whole.
  if (const std::string_view* nodes = chosen(fields[1])) {
    if (!DepthOk(*nodes)) return false;
    Json j = Json::parse(nodes->begin(), nodes->end(), nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !GetNodeList(&j, "ExtenderArgs", &args->nodes).ok()) return false;
  }
  // NodeNames.
  if (const std::string_view* names = chosen(fields[2])) {
    const bool exact = names == &fields[2].exact;
    const std::vector<std::string_view>* strings = exact
                                                       ? (scanned_exact ? &names_exact : nullptr)
                                                       : (scanned_folded ? &names_folded : nullptr);
    if (!FastNames(*names, strings, &args->node_names)) return false;
  }
  // A case-folded value the exact key overrides is validated here (the chosen ones were parsed
  // above).
  for (const auto& f : fields) {
    const std::string_view* c = chosen(f);
    if (f.has_folded && c != &f.folded && !Valid(f.folded)) return false;
  }
  return true;
}

// ---- ExtenderFilterResult encoding (byte-identical to ToJson(r).dump()) ----

void AppendJsonString(std::string& out, std::string_view s) {
  if (std::all_of(s.begin(), s.end(),
                  [](char c) { return kPlain[static_cast<unsigned char>(c)]; })) {
    out += '"';
    out.append(s);
    out += '"';
    return;
  }
  // nlohmann's escaping; invalid UTF-8 is replaced instead of throwing.
  out += Json(std::string(s)).dump(-1, ' ', false, Json::error_handler_t::replace);
}

void AppendMap(std::string& out, const std::map<std::string, std::string>& m) {
  out += '{';
  bool first = true;
  for (const auto& [k, v] : m) {
    if (!first) out += ',';
    first = false;
    AppendJsonString(out, k);
    out += ':';
    AppendJsonString(out, v);
  }
  out += '}';
}

}  // namespace

std::string SerializeFilterResult(const ExtenderFilterResult& r) {
  std::string out;
  size_t reserve = 128 + r.error.size();
  for (const auto* m : {&r.failed_nodes, &r.failed_and_unresolvable})
    for (const auto& [k, v] : *m) reserve += k.size() + v.size() + 6;
  if (r.node_names)
    for (const auto& n : *r.node_names) reserve += n.size() + 3;
  out.reserve(reserve);
  // nlohmann orders object keys; the same order here.
  out += "{\"Error\":";
  AppendJsonString(out, r.error);
  out += ",\"FailedAndUnresolvableNodes\":";
  AppendMap(out, r.failed_and_unresolvable);
  out += ",\"FailedNodes\":";
  AppendMap(out, r.failed_nodes);
  out += ",\"NodeNames\":";
  if (!r.node_names) {
    out += "null";
  } else {
    out += '[';
    for (size_t i = 0; i < r.node_names->size(); ++i) {
      if (i) out += ',';
      AppendJsonString(out, (*r.node_names)[i]);
    }
    out += ']';
  }
  out += ",\"Nodes\":";
  out += NodeListJson(r.nodes).dump(-1, ' ', false, Json::error_handler_t::replace);
  out += '}';
  return out;
}

const Json* FindKeyFold(const Json& obj, std::string_view key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(std::string(key));
  if (it != obj.end()) return &*it;
  for (auto i = obj.begin(); i != obj.end(); ++i)
    if (EqualFold(i.key(), key)) return &i.value();
  return nullptr;
}

const Json* PodUidFold(const Json& pod) {
  const Json* meta = FindKeyFold(pod, "metadata");
  const Json* uid = meta != nullptr ? FindKeyFold(*meta, "uid") : nullptr;
  return uid != nullptr && uid->is_string() ? uid : nullptr;
}

std::vector<std::string> ExtenderArgs::CandidateNames() const {
  if (node_names) return *node_names;
  std::vector<std::string> out;
  if (nodes)
    for (const auto& n : *nodes)
      out.push_back(FindKeyFold(*FindKeyFold(n, "metadata"), "name")->get<std::string>());
  return out;
}

StatusOr<ExtenderArgs> ParseExtenderArgsDom(std::string_view body) {
  constexpr std::string_view kWhat = "ExtenderArgs";
  HAMI_ASSIGN_OR_RETURN(Json j, ParseObject(body, kWhat));
  ExtenderArgs args;
  const Json* pod = FindKeyFold(j, "Pod");
  if (pod == nullptr || !pod->is_object())
    return InvalidArgument(kWhat, ": field Pod must be a Pod object");
  args.pod = *pod;
  HAMI_RETURN_IF_ERROR(GetNodeList(FindKeyFold(j, "Nodes"), kWhat, &args.nodes));
  HAMI_RETURN_IF_ERROR(GetNames(j, kWhat, &args.node_names));
  return args;
}

StatusOr<ExtenderArgs> ParseExtenderArgs(std::string_view body) {
  ExtenderArgs args;
  if (ParseExtenderArgsFast(body, &args)) return args;
  return ParseExtenderArgsDom(
      body);  // not the common shape, or an error: the reference path words it
}

Json ToJson(const ExtenderArgs& args) {
  return Json{{"Pod", args.pod},
              {"Nodes", NodeListJson(args.nodes)},
              {"NodeNames", NamesJson(args.node_names)}};
}

Json ToJson(const ExtenderFilterResult& r) {
  return Json{{"Nodes", NodeListJson(r.nodes)},
              {"NodeNames", NamesJson(r.node_names)},
              {"FailedNodes", MapJson(r.failed_nodes)},
              {"FailedAndUnresolvableNodes", MapJson(r.failed_and_unresolvable)},
              {"Error", r.error}};
}

StatusOr<ExtenderFilterResult> ParseExtenderFilterResult(std::string_view body) {
  constexpr std::string_view kWhat = "ExtenderFilterResult";
  HAMI_ASSIGN_OR_RETURN(Json j, ParseObject(body, kWhat));
  ExtenderFilterResult r;
  HAMI_RETURN_IF_ERROR(GetNodeList(FindKeyFold(j, "Nodes"), kWhat, &r.nodes));
  HAMI_RETURN_IF_ERROR(GetNames(j, kWhat, &r.node_names));
  HAMI_RETURN_IF_ERROR(GetStringMap(j, "FailedNodes", kWhat, &r.failed_nodes));
  HAMI_RETURN_IF_ERROR(
      GetStringMap(j, "FailedAndUnresolvableNodes", kWhat, &r.failed_and_unresolvable));
  HAMI_RETURN_IF_ERROR(GetStringFold(j, "Error", kWhat, &r.error));
  return r;
}

StatusOr<ExtenderBindingArgs> ParseExtenderBindingArgs(std::string_view body) {
  constexpr std::string_view kWhat = "ExtenderBindingArgs";
  HAMI_ASSIGN_OR_RETURN(Json j, ParseObject(body, kWhat));
  ExtenderBindingArgs a;
  HAMI_RETURN_IF_ERROR(GetStringFold(j, "PodName", kWhat, &a.pod_name));
  HAMI_RETURN_IF_ERROR(GetStringFold(j, "PodNamespace", kWhat, &a.pod_namespace));
  HAMI_RETURN_IF_ERROR(GetStringFold(j, "PodUID", kWhat, &a.pod_uid));
  HAMI_RETURN_IF_ERROR(GetStringFold(j, "Node", kWhat, &a.node));
  if (a.pod_name.empty()) return InvalidArgument(kWhat, ": field PodName is empty");
  if (a.pod_namespace.empty()) return InvalidArgument(kWhat, ": field PodNamespace is empty");
  if (a.node.empty()) return InvalidArgument(kWhat, ": field Node is empty");
  return a;
}

Json ToJson(const ExtenderBindingArgs& a) {
  return Json{{"PodName", a.pod_name},
              {"PodNamespace", a.pod_namespace},
              {"PodUID", a.pod_uid},
              {"Node", a.node}};
}

Json ToJson(const ExtenderBindingResult& r) {
  return Json{{"Error", r.error}};
}

StatusOr<ExtenderBindingResult> ParseExtenderBindingResult(std::string_view body) {
  constexpr std::string_view kWhat = "ExtenderBindingResult";
  HAMI_ASSIGN_OR_RETURN(Json j, ParseObject(body, kWhat));
  ExtenderBindingResult r;
  HAMI_RETURN_IF_ERROR(GetStringFold(j, "Error", kWhat, &r.error));
  return r;
}

namespace {

Status GetPdbViolations(const Json& obj, std::string_view what, int64_t* out) {
  const Json* v = FindKeyFold(obj, "NumPDBViolations");
  if (v == nullptr || v->is_null()) return OkStatus();
  return core::jsonutil::ToInt(*v, 0, INT64_MAX, StrCat(what, ".NumPDBViolations"), out);
}

// A map field of node name -> per-node object, capped at kMaxPreemptionNodes. `one` parses a
// non-null value; null values are skipped.
template <typename T, typename F>
Status GetNodeMap(const Json& obj, std::string_view key, std::string_view what,
                  std::optional<std::map<std::string, T>>* out, F&& one) {
  const Json* v = FindKeyFold(obj, key);
  if (v == nullptr || v->is_null()) return OkStatus();
  if (!v->is_object())
    return InvalidArgument(what, ": field ", key, " must be an object of node names, got ",
                           v->type_name());
  if (v->size() > kMaxPreemptionNodes)
    return InvalidArgument(what, ": field ", key, " names ", v->size(), " nodes, more than ",
                           kMaxPreemptionNodes);
  std::map<std::string, T> m;
  for (const auto& [node, val] : v->items()) {
    if (node.empty()) return InvalidArgument(what, ": field ", key, " has an empty node name");
    if (val.is_null()) continue;
    const std::string where = StrCat(what, ".", key, "[\"", node, "\"]");
    if (!val.is_object()) return InvalidArgument(where, " must be an object or null");
    T t;
    HAMI_RETURN_IF_ERROR(one(val, where, &t));
    m.emplace(node, std::move(t));
  }
  *out = std::move(m);
  return OkStatus();
}

// The Pods list of a (Meta)Victims object: null or an array of at most kMaxVictimsPerNode.
StatusOr<const Json*> VictimList(const Json& obj, std::string_view where) {
  const Json* pods = FindKeyFold(obj, "Pods");
  if (pods == nullptr || pods->is_null()) return nullptr;
  if (!pods->is_array())
    return InvalidArgument(where, ".Pods must be an array, got ", pods->type_name());
  if (pods->size() > kMaxVictimsPerNode)
    return InvalidArgument(where, ".Pods lists ", pods->size(), " pods, more than ",
                           kMaxVictimsPerNode);
  return pods;
}

Status ParseMetaVictims(const Json& obj, std::string_view where, MetaVictims* out) {
  HAMI_ASSIGN_OR_RETURN(const Json* pods, VictimList(obj, where));
  if (pods != nullptr) {
    for (size_t i = 0; i < pods->size(); ++i) {
      const Json& p = (*pods)[i];
      if (p.is_null()) continue;
      const Json* uid = p.is_object() ? FindKeyFold(p, "UID") : nullptr;
      if (uid == nullptr || !uid->is_string() || uid->get_ref<const std::string&>().empty())
        return InvalidArgument(where, ".Pods[", i, "] has no UID string");
      out->pod_uids.push_back(uid->get<std::string>());
    }
  }
  return GetPdbViolations(obj, where, &out->num_pdb_violations);
}

Status ParseVictims(const Json& obj, std::string_view where, Victims* out) {
  HAMI_ASSIGN_OR_RETURN(const Json* pods, VictimList(obj, where));
  if (pods != nullptr) {
    for (size_t i = 0; i < pods->size(); ++i) {
      const Json& p = (*pods)[i];
      if (p.is_null()) continue;
      const Json* uid = PodUidFold(p);
      if (uid == nullptr || uid->get_ref<const std::string&>().empty())
        return InvalidArgument(where, ".Pods[", i, "] is not a Pod with metadata.uid");
      out->pods.push_back(p);
    }
  }
  return GetPdbViolations(obj, where, &out->num_pdb_violations);
}

Json MetaVictimsJson(const MetaVictims& m) {
  Json pods = Json::array();
  for (const auto& uid : m.pod_uids) pods.push_back(Json{{"UID", uid}});
  return Json{{"Pods", std::move(pods)}, {"NumPDBViolations", m.num_pdb_violations}};
}

}  // namespace

StatusOr<ExtenderPreemptionArgs> ParseExtenderPreemptionArgs(std::string_view body) {
  constexpr std::string_view kWhat = "ExtenderPreemptionArgs";
  HAMI_ASSIGN_OR_RETURN(Json j, ParseObject(body, kWhat));
  ExtenderPreemptionArgs a;
  const Json* pod = FindKeyFold(j, "Pod");
  if (pod == nullptr || !pod->is_object())
    return InvalidArgument(kWhat, ": field Pod must be a Pod object");
  a.pod = *pod;
  HAMI_RETURN_IF_ERROR(GetNodeMap(j, "NodeNameToVictims", kWhat, &a.node_to_victims, ParseVictims));
  HAMI_RETURN_IF_ERROR(
      GetNodeMap(j, "NodeNameToMetaVictims", kWhat, &a.node_to_meta_victims, ParseMetaVictims));
  return a;
}

Json ToJson(const ExtenderPreemptionArgs& a) {
  Json victims = nullptr, meta = nullptr;
  if (a.node_to_victims) {
    victims = Json::object();
    for (const auto& [node, v] : *a.node_to_victims)
      victims[node] = Json{{"Pods", v.pods}, {"NumPDBViolations", v.num_pdb_violations}};
  }
  if (a.node_to_meta_victims) {
    meta = Json::object();
    for (const auto& [node, m] : *a.node_to_meta_victims) meta[node] = MetaVictimsJson(m);
  }
  return Json{{"Pod", a.pod}, {"NodeNameToVictims", victims}, {"NodeNameToMetaVictims", meta}};
}

Json ToJson(const ExtenderPreemptionResult& r) {
  Json meta = Json::object();
  for (const auto& [node, m] : r.node_to_meta_victims) meta[node] = MetaVictimsJson(m);
  return Json{{"NodeNameToMetaVictims", std::move(meta)}};
}

StatusOr<ExtenderPreemptionResult> ParseExtenderPreemptionResult(std::string_view body) {
  constexpr std::string_view kWhat = "ExtenderPreemptionResult";
  HAMI_ASSIGN_OR_RETURN(Json j, ParseObject(body, kWhat));
  std::optional<std::map<std::string, MetaVictims>> meta;
  HAMI_RETURN_IF_ERROR(GetNodeMap(j, "NodeNameToMetaVictims", kWhat, &meta, ParseMetaVictims));
  ExtenderPreemptionResult r;
  if (meta) r.node_to_meta_victims = std::move(*meta);
  return r;
}

}  // namespace hami::extender
