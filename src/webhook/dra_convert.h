#pragma once
// Opt-in conversion of HAMi-style GPU pods into DRA claims (docs/dra.md, "Webhook conversion"):
// a selected pod whose containers ask for nvidia.com/gpu, gpumem, gpumem-percentage and
// gpucores gets, per such container, a ResourceClaimTemplate of DeviceClass
// hami-core-gpu.project-hami.io whose one request asks `count` GPUs with consumable capacity
// `memory` / `cores` (a percentage below 100: `firstAvailable`, one subrequest per published GPU
// size, ConvertPodToDra), an entry in spec.resourceClaims naming it and one in the container's
// resources.claims; the NVIDIA resources leave the container. Kubernetes then makes one claim per
// pod and container from the template and deletes it with the pod: the webhook creates no claim.
//
// Templates are named by their content (hami-gpu-<hash of the spec>) and shared by every pod of
// the namespace asking the same thing, so a pod that is never created (a later webhook refuses it,
// a dry run) leaves nothing of its own behind, and the same pod admitted twice names the same
// template. A template of that name with another spec is never used.
#include <cstddef>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/mutex.h"
#include "common/status.h"
#include "core/model.h"
#include "vendors/vendor.h"

namespace hami::k8s {
class Client;
}

namespace hami::webhook {

// The label on every ResourceClaimTemplate the conversion creates; the template GC
// (webhook/dra_template_gc.h) deletes only templates that carry it.
inline constexpr char kDraTemplateManagedByLabel[] = "app.kubernetes.io/managed-by";
inline constexpr char kDraTemplateManagedBy[] = "hami-webhook";

using Json = nlohmann::json;

// Which pods are converted and into what (flags --dra-namespaces, --dra-pod-selector,
// --dra-device-class, --dra-driver-name of `hami scheduler`). Off while both selections are empty.
struct DraConversionOptions {
  std::vector<std::string> namespaces = {};  // pods of these namespaces ("*": of every one)
  std::vector<std::pair<std::string, std::string>> match_labels = {};  // or with all these labels
  std::string device_class = "hami-core-gpu.project-hami.io";
  std::string driver = "hami-core-gpu.project-hami.io";  // the domain of the device attributes
  bool Enabled() const { return !namespaces.empty() || !match_labels.empty(); }
};

// Bounds on what a pod may make the webhook write (each refusal says which).
inline constexpr int kMaxDraGpusPerContainer = 16;     // devices of one request
inline constexpr size_t kMaxDraSelectorValues = 64;    // items of one use/nouse annotation
inline constexpr size_t kMaxDraSelectorBytes = 10240;  // a CEL expression (the API's limit)
inline constexpr size_t kMaxDraClaimsPerPod = 32;      // converted containers of one pod
inline constexpr size_t kMaxDraSubRequests = 8;        // firstAvailable items (the API's limit)

// One container of the pod as the conversion reads it.
struct DraContainer {
  const Json* json = nullptr;                   // the container object
  std::string path;                             // its patch path ("/spec/containers/0")
  const core::ContainerRequest* req = nullptr;  // its parsed requests (defaulted); null: none
};

struct DraTemplate {
  std::string name;  // hami-gpu-<16 hex digits>
  Json object;       // the whole ResourceClaimTemplate (apiVersion resource.k8s.io/v1)
};

struct DraConversion {
  std::vector<DraTemplate> templates;  // one per distinct container request, in container order
  Json ops = Json::array();            // RFC 6902 ops on the pod
};

// Does a container of `containers` ask for a gpumem-percentage below 100 (a request that needs the
// sizes of the published GPUs, DraDeviceSizes)?
bool NeedsDeviceSizes(const std::vector<DraContainer>& containers);

// The conversion of one pod (pure). `nvidia` names the NVIDIA resources as configured (all of them
// leave the converted containers); `selectors` are the pod's parsed NVIDIA annotations. Refusals
// are PermissionDenied whose message is the whole denial
// ("hami: ..."): nvidia.com/priority, nvidia.com/numa-bind, a vgpu-mode or MIG
// profile preference, a container asking another vendor's devices, a count above
// kMaxDraGpusPerContainer, more than kMaxDraClaimsPerPod containers to convert, an entry of
// spec.resourceClaims already named as ours, selector values that are not printable ASCII, more
// than kMaxDraSelectorValues of them, or a selector longer than kMaxDraSelectorBytes.
//
// A gpumem-percentage P below 100 becomes a request with `firstAvailable` subrequests, one per
// GPU memory size S of `gpu_sizes_mib` (the distinct sizes our driver publishes, ascending), in
// that order, smallest first: subrequest "mib<S>" selects only devices whose memory capacity is S
// (CEL, fail closed) and asks memory S * P / 100 MiB (rounded down, as HAMi's scheduler does).
// Smallest first: the share takes the fewest bytes that satisfy it, on the smallest card that
// still has room, and keeps the larger cards for the requests only they can hold. Refused when
// `gpu_sizes_mib` is empty (no published GPU) or has more than kMaxDraSubRequests sizes.
StatusOr<DraConversion> ConvertPodToDra(const Json& pod,
                                        const std::vector<DraContainer>& containers,
                                        const core::DeviceSelectors& selectors,
                                        const vendors::ResourceNames& nvidia, const std::string& ns,
                                        const DraConversionOptions& opts,
                                        const std::vector<int64_t>& gpu_sizes_mib = {});

// The distinct memory capacities (MiB, ascending) of the devices of `driver` in `slices`
// (ResourceSlice objects; those of other drivers are skipped). At most kMaxDraDeviceSizes sizes
// are kept (a conversion refuses more than kMaxDraSubRequests anyway).
inline constexpr size_t kMaxDraDeviceSizes = 64;
void CollectDeviceSizes(const Json& slices, const std::string& driver, std::vector<int64_t>* sizes);

// The memory sizes of the GPUs our driver publishes. Implementations are thread-safe.
class DraDeviceSizes {
 public:
  virtual ~DraDeviceSizes() = default;
  virtual StatusOr<std::vector<int64_t>> SizesMiB() = 0;
};

// The API server's ResourceSlices of `driver` (fieldSelector spec.driver), listed in pages of
// kDraSlicePage, at most kMaxDraSlicePages pages (more: ResourceExhausted), keeping only the
// sizes; the answer is reused for `ttl_s` seconds (a GPU of a new size is seen within it).
inline constexpr int64_t kDraSlicePage = 500;
inline constexpr int kMaxDraSlicePages = 20;
class K8sDraDeviceSizes : public DraDeviceSizes {
 public:
  K8sDraDeviceSizes(k8s::Client* client, std::string driver, int64_t ttl_s = 30)
      : client_(client), driver_(std::move(driver)), ttl_s_(ttl_s) {}
  StatusOr<std::vector<int64_t>> SizesMiB() override;

 private:
  k8s::Client* client_;
  const std::string driver_;
  const int64_t ttl_s_;
  Mutex mu_;
  int64_t fetched_at_ ABSL_GUARDED_BY(mu_) = 0;  // steady-clock seconds; 0: never
  std::vector<int64_t> sizes_ ABSL_GUARDED_BY(mu_);
};

// The CEL selectors for the pod's use/nouse annotations on devices of `driver`; each fails closed
// (a device without the attribute makes the expression fail, which selects nothing). Types match
// as the scheduler matches them: a case-insensitive substring of productName.
StatusOr<std::vector<std::string>> DraCelSelectors(const core::DeviceSelectors& selectors,
                                                   const std::string& driver);

// Where templates are created. Implementations are thread-safe.
class DraTemplateStore {
 public:
  virtual ~DraTemplateStore() = default;
  // Creates `tpl` in `ns` unless a template of that name with the same spec is there. Errors:
  // FailedPrecondition when one with another spec is there, or when the server kept another spec
  // than the one sent (its DRAConsumableCapacity gate is off: it drops capacity requests; or its
  // DRAPrioritizedList gate is off: it drops firstAvailable; the template made is then deleted
  // again) or refused a template with firstAvailable as invalid (that gate off: nothing is left
  // of the request); otherwise the API's error.
  virtual Status Ensure(const std::string& ns, const DraTemplate& tpl) = 0;
};

// The API server's resourceclaimtemplates through `client` (not owned).
class K8sDraTemplateStore : public DraTemplateStore {
 public:
  explicit K8sDraTemplateStore(k8s::Client* client) : client_(client) {}
  Status Ensure(const std::string& ns, const DraTemplate& tpl) override;

 private:
  k8s::Client* client_;
};

// In memory, for tests and the fuzz target: namespace/name -> object.
class MemoryDraTemplateStore : public DraTemplateStore {
 public:
  Status Ensure(const std::string& ns, const DraTemplate& tpl) override;
  std::map<std::string, Json> Snapshot() const;

 private:
  mutable Mutex mu_;
  std::map<std::string, Json> templates_ ABSL_GUARDED_BY(mu_);
};

}  // namespace hami::webhook
