#include "webhook/dra_template_gc.h"

#include <spdlog/spdlog.h>

#include <set>
#include <utility>

#include "k8s/client.h"
#include "webhook/dra_convert.h"

namespace hami::webhook {

namespace {

std::string Str(const nlohmann::json& j, const char* key) {
  auto it = j.is_object() ? j.find(key) : j.end();
  return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}

// Lists `r` in bounded pages, calling `each` with every item; ResourceExhausted past the bound.
Status ListBounded(k8s::Client* client, const k8s::Resource& r, k8s::ListOptions o,
                   const DraTemplateGcOptions& opts, const std::function<void()>& restart,
                   const std::function<void(const nlohmann::json&)>& each) {
  o.limit = opts.page;
  int pages = 0;
  auto listed = client->ListPages(
      r, "", o,
      [&](nlohmann::json& page) {
        if (++pages > opts.max_pages) return;
        auto items = page.find("items");
        if (items == page.end() || !items->is_array()) return;
        for (const nlohmann::json& item : *items) each(item);
      },
      [&] {
        pages = 0;
        restart();
      },
      [](int depth, const std::string& key) { return depth == 1 && key == "status"; });
  if (!listed.ok()) return listed.status();
  if (pages > opts.max_pages)
    return absl::ResourceExhaustedError(StrCat("more than ", opts.max_pages * opts.page, " ",
                                               r.plural, "; no template is collected"));
  return OkStatus();
}

}  // namespace

DraTemplateGc::DraTemplateGc(k8s::Client* client, DraTemplateGcOptions opts,
                             std::function<int64_t()> now_s)
    : client_(client), opts_(opts), now_s_(std::move(now_s)) {}

StatusOr<int> DraTemplateGc::RunOnce() {
  // Templates first: a pod created after its template was listed is then seen by the pod list.
  std::set<std::string> ours;  // ns/name
  k8s::ListOptions to;
  to.label_selector = StrCat(kDraTemplateManagedByLabel, "=", kDraTemplateManagedBy);
  HAMI_RETURN_IF_ERROR(ListBounded(
      client_, k8s::kResourceClaimTemplates, to, opts_, [&] { ours.clear(); },
      [&](const nlohmann::json& t) {
        const auto meta = t.find("metadata");
        if (meta == t.end()) return;
        const auto labels = meta->find("labels");
        if (labels == meta->end() ||
            Str(*labels, kDraTemplateManagedByLabel) != kDraTemplateManagedBy)
          return;  // never one without our label, whatever the server answered
        ours.insert(StrCat(Str(*meta, "namespace"), "/", Str(*meta, "name")));
      }));
  if (ours.empty()) {  // nothing to collect: no list of every pod
    MutexLock l(mu_);
    unreferenced_since_.clear();
    return 0;
  }
  std::set<std::string> referenced;
  HAMI_RETURN_IF_ERROR(ListBounded(
      client_, k8s::kPods, {}, opts_, [&] { referenced.clear(); },
      [&](const nlohmann::json& pod) {
        const auto meta = pod.find("metadata");
        const auto spec = pod.find("spec");
        if (meta == pod.end() || spec == pod.end() || !spec->is_object()) return;
        const auto claims = spec->find("resourceClaims");
        if (claims == spec->end() || !claims->is_array()) return;
        for (const nlohmann::json& c : *claims)
          if (std::string t = Str(c, "resourceClaimTemplateName"); !t.empty())
            referenced.insert(StrCat(Str(*meta, "namespace"), "/", t));
      }));
  const int64_t now = now_s_();
  std::vector<std::string> due;
  {
    MutexLock l(mu_);
    std::map<std::string, int64_t> next;
    for (const std::string& key : ours) {
      if (referenced.count(key)) continue;
      auto it = unreferenced_since_.find(key);
      const int64_t since = it == unreferenced_since_.end() ? now : it->second;
      if (now - since >= opts_.grace_s) {
        due.push_back(key);
      } else {
        next[key] = since;
      }
    }
    unreferenced_since_ = std::move(next);  // referenced or gone: the time starts again
  }
  int deleted = 0;
  for (const std::string& key : due) {
    const size_t slash = key.find('/');
    const Status s =
        client_->Delete(k8s::kResourceClaimTemplates, key.substr(0, slash), key.substr(slash + 1));
    if (s.ok() || absl::IsNotFound(s)) {
      ++deleted;
      spdlog::info("dra template gc: deleted ResourceClaimTemplate {} (no pod named it for {} s)",
                   key, opts_.grace_s);
    } else {
      spdlog::warn("dra template gc: deleting {}: {}", key, std::string(s.message()));
    }
  }
  return deleted;
}

void DraTemplateGc::Start(int64_t period_s, std::function<bool()> is_leader) {
  if (thread_.joinable()) return;
  thread_ = std::thread([this, period_s, is_leader = std::move(is_leader)] {
    MutexLock l(stop_mu_);
    while (!stopping_) {
      stop_cv_.WaitFor(stop_mu_, std::chrono::seconds(period_s));
      if (stopping_) break;
      l.Unlock();
      if (is_leader()) {
        if (auto n = RunOnce(); !n.ok())
          spdlog::warn("dra template gc: {}", std::string(n.status().message()));
      }
      l.Lock();
    }
  });
}

void DraTemplateGc::Stop() {
  {
    MutexLock l(stop_mu_);
    stopping_ = true;
  }
  stop_cv_.NotifyAll();
  if (thread_.joinable()) thread_.join();
}

}  // namespace hami::webhook
