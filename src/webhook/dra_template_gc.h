#pragma once
// Garbage collection of the ResourceClaimTemplates the DRA conversion made (docs/dra.md, "Webhook
// conversion"): a template labelled app.kubernetes.io/managed-by=hami-webhook that no pod of its
// namespace names in spec.resourceClaims (pods of every phase count, pending ones included) for
// `grace_s` seconds in a row, as this process saw it, is deleted. A template without the label is
// never listed, so never touched. The time starts when this process first sees the template
// unreferenced (a restart or a new leader starts it again): a deletion can come late, never early.
// A pass lists the templates first and lists pods only when there is a template of ours.
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <thread>

#include "common/mutex.h"
#include "common/status.h"

namespace hami::k8s {
class Client;
}

namespace hami::webhook {

struct DraTemplateGcOptions {
  int64_t grace_s = 3600;  // unreferenced this long -> deleted (--dra-template-gc-grace-s)
  int64_t page = 500;      // items per list page
  int max_pages = 200;     // pods or templates beyond max_pages x page: the pass deletes nothing
};

class DraTemplateGc {
 public:
  // `now_s` (seconds, any epoch) is the clock; tests pass a fake one.
  DraTemplateGc(k8s::Client* client, DraTemplateGcOptions opts, std::function<int64_t()> now_s);
  ~DraTemplateGc() { Stop(); }

  // One pass: lists our templates and the pods (bounded, page by page, keeping only the names
  // they reference), then deletes each of our templates unreferenced for grace_s. Returns how many
  // were deleted; a failed or over-bound list deletes nothing.
  StatusOr<int> RunOnce();

  // A thread calling RunOnce every `period_s` seconds while `is_leader()` holds, until Stop().
  void Start(int64_t period_s, std::function<bool()> is_leader);
  void Stop();

 private:
  k8s::Client* client_;
  const DraTemplateGcOptions opts_;
  const std::function<int64_t()> now_s_;
  Mutex mu_;
  std::map<std::string, int64_t> unreferenced_since_ ABSL_GUARDED_BY(mu_);  // ns/name -> time
  Mutex stop_mu_;
  CondVar stop_cv_;
  bool stopping_ ABSL_GUARDED_BY(stop_mu_) = false;
  std::thread thread_;
};

}  // namespace hami::webhook
