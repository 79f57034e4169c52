#pragma once
// Wire types of the kube-scheduler extender protocol v1 (kube-scheduler's extender API).
//
// The Go structs have no json tags: keys are the capitalised Go field names and are never omitted
// (nil slices/maps/pointers are `null`). kube-scheduler decodes with encoding/json, which matches
// keys case-insensitively, so parsing here does the same; serialising always uses the exact names.
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace hami::extender {

using Json = nlohmann::json;

// ExtenderArgs (filter and prioritize request):
// {"Pod":{...},"Nodes":{NodeList}|null,"NodeNames":[...]|null}.
struct ExtenderArgs {
  Json pod;  // the v1.Pod object
  // nodeCacheCapable=false: the full Node objects (NodeList.items); nullopt when "Nodes" is null.
  std::optional<std::vector<Json>> nodes;
  // nodeCacheCapable=true: the candidate names; nullopt when "NodeNames" is null.
  std::optional<std::vector<std::string>> node_names;

  // The candidates whichever form was sent: NodeNames when present, else
  // Nodes.items[].metadata.name.
  std::vector<std::string> CandidateNames() const;
};
// Errors name the field: not JSON, not an object, Pod missing or not an object, a node without
// metadata.name, a name that is not a string.
// Scans the top level itself and copies NodeNames without building a DOM for them; falls back to
// ParseExtenderArgsDom for anything unusual, so both always agree (results and errors).
StatusOr<ExtenderArgs> ParseExtenderArgs(std::string_view body);
// The reference: the whole body through nlohmann's DOM (fuzz target, tests).
StatusOr<ExtenderArgs> ParseExtenderArgsDom(std::string_view body);
Json ToJson(const ExtenderArgs& args);

// ExtenderFilterResult (filter reply).
struct ExtenderFilterResult {
  std::optional<std::vector<Json>> nodes;  // serialised as {"metadata":{},"items":[...]} or null
  std::optional<std::vector<std::string>> node_names;          // null when nullopt
  std::map<std::string, std::string> failed_nodes;             // FailedNodes
  std::map<std::string, std::string> failed_and_unresolvable;  // FailedAndUnresolvableNodes
  std::string error;                                           // Error ("" = none)
};
Json ToJson(const ExtenderFilterResult& result);
// Byte for byte ToJson(result).dump(), written directly (FailedNodes can hold 5000 entries);
// invalid UTF-8 is replaced rather than thrown on.
std::string SerializeFilterResult(const ExtenderFilterResult& result);
StatusOr<ExtenderFilterResult> ParseExtenderFilterResult(std::string_view body);

// ExtenderBindingArgs (bind request) and ExtenderBindingResult (bind reply).
struct ExtenderBindingArgs {
  std::string pod_name;       // PodName
  std::string pod_namespace;  // PodNamespace
  std::string pod_uid;        // PodUID
  std::string node;           // Node
};
// Errors: not JSON, wrong types, an empty PodName, PodNamespace or Node.
StatusOr<ExtenderBindingArgs> ParseExtenderBindingArgs(std::string_view body);
Json ToJson(const ExtenderBindingArgs& args);

struct ExtenderBindingResult {
  std::string error;  // Error ("" = success)
};
Json ToJson(const ExtenderBindingResult& result);
StatusOr<ExtenderBindingResult> ParseExtenderBindingResult(std::string_view body);

// ExtenderPreemptionArgs (preempt request) and ExtenderPreemptionResult (preempt reply).
// kube-scheduler sends NodeNameToMetaVictims (pod UIDs) to a nodeCacheCapable extender and
// NodeNameToVictims (whole pods) otherwise; the reply always uses NodeNameToMetaVictims, and every
// UID in it must be a pod on that node in kube-scheduler's cache.
struct MetaVictims {
  std::vector<std::string> pod_uids;  // Pods[].UID
  int64_t num_pdb_violations = 0;     // NumPDBViolations
  bool operator==(const MetaVictims&) const = default;
};
struct Victims {
  std::vector<Json> pods;  // Pods: v1.Pod objects, each with a metadata.uid
  int64_t num_pdb_violations = 0;
};
struct ExtenderPreemptionArgs {
  Json pod;  // the preemptor (v1.Pod)
  // nullopt when the field is absent or null; entries whose value is null are left out (Go reads
  // them as nil pointers and skips them too).
  std::optional<std::map<std::string, Victims>> node_to_victims;
  std::optional<std::map<std::string, MetaVictims>> node_to_meta_victims;
};
// Caps on what one request may name (the HTTP body cap bounds the bytes; these bound the work).
inline constexpr size_t kMaxPreemptionNodes = 10000;
inline constexpr size_t kMaxVictimsPerNode = 5000;
// Errors name the field: not JSON, not an object, Pod missing or not an object, a map or list of
// the wrong type, a victim pod without metadata.uid, a UID that is not a non-empty string,
// NumPDBViolations not a non-negative integer, more nodes or victims than the caps.
StatusOr<ExtenderPreemptionArgs> ParseExtenderPreemptionArgs(std::string_view body);
Json ToJson(const ExtenderPreemptionArgs& args);

struct ExtenderPreemptionResult {
  std::map<std::string, MetaVictims> node_to_meta_victims;  // NodeNameToMetaVictims
};
Json ToJson(const ExtenderPreemptionResult& result);
StatusOr<ExtenderPreemptionResult> ParseExtenderPreemptionResult(std::string_view body);

// Looks a key up the way Go's encoding/json does: exact match first, then case-insensitive.
// nullptr when absent.
const Json* FindKeyFold(const Json& obj, std::string_view key);
// A v1.Pod's metadata.uid looked up as ParseExtenderPreemptionArgs accepts it (FindKeyFold at both
// levels): nullptr when absent or not a string.
const Json* PodUidFold(const Json& pod);

}  // namespace hami::extender
