// hami recommend: right-size GPU requests from a usage trace (usage/recommend.h,
// docs/utilization.md#right-sizing-hami-recommend); the saving comes from the sim's packing.
#include <curl/curl.h>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <string>

#include "CLI/CLI.hpp"
#include "cmd/subcommands.h"
#include "sim/usage_sim.h"
#include "usage/prometheus.h"
#include "usage/recommend.h"
#include "usage/trace.h"

namespace hami::cmd {

namespace {

int Fail(const Status& s) {
  std::fprintf(stderr, "hami recommend: %s\n", std::string(s.message()).c_str());
  return 1;
}

// GPUs over the window, per workload: every pod asking its peak (stock accounting) vs the
// recommendation packed by usage (the sim learning from the same window).
Status FillSaving(const usage::UsageTrace& trace, const usage::RecommendOptions& options,
                  usage::Recommendation* r) {
  const usage::UsageTrace window = usage::Window(trace, r->from, r->until);
  for (size_t w = 0; w < r->workloads.size(); ++w) {
    usage::WorkloadRecommendation& rec = r->workloads[w];
    if (rec.model.peak_mib <= 0) continue;
    const usage::UsageTrace mine = usage::WorkloadTrace(window, static_cast<int>(w));
    sim::UsageSimConfig c;
    c.gpu_memory_mib = r->card_mib;
    c.warmup_min = r->from;
    c.learn_until = r->until;
    c.profile = options.learn.profile;
    c.margin_pct = options.learn.margin_pct;
    c.workload_q_pct = options.learn.workload_q_pct;
    c.arrival_min = options.learn.arrival_min;
    HAMI_ASSIGN_OR_RETURN(sim::UsageSimResult after, sim::RunUsageSim(mine, c));
    c.gpumem_mib = std::min(r->card_mib, rec.model.peak_mib);
    HAMI_ASSIGN_OR_RETURN(sim::UsageSimResult now, sim::RunUsageSim(mine, c));
    rec.gpus_now = now.metrics.gpus;
    rec.gpus_after = after.metrics.gpus;
  }
  return OkStatus();
}

// "6h", "90m", "1d", "3600s" -> seconds; 0 on anything else.
int64_t DurationSeconds(const std::string& text) {
  if (text.size() < 2 || text.size() > 12) return 0;
  const char unit = text.back();
  const int64_t per = unit == 's'   ? 1
                      : unit == 'm' ? 60
                      : unit == 'h' ? 3600
                      : unit == 'd' ? 86400
                                    : 0;
  int64_t n = 0;
  for (size_t i = 0; i + 1 < text.size(); ++i) {
    if (text[i] < '0' || text[i] > '9') return 0;
    n = n * 10 + (text[i] - '0');
  }
  return per * n;
}

// One GET of at most `max_bytes`: the body, or an error naming the URL's server answer.
StatusOr<std::string> HttpGet(const std::string& url, size_t max_bytes, long timeout_s) {
  struct Sink {
    std::string body;
    size_t max;
    bool over = false;
  } sink{{}, max_bytes};
  CURL* curl = curl_easy_init();
  if (curl == nullptr) return Internal("curl_easy_init failed");
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_TIMEOUT, timeout_s);
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &sink);
  curl_easy_setopt(
      curl, CURLOPT_WRITEFUNCTION, +[](char* p, size_t size, size_t n, void* user) -> size_t {
        auto* s = static_cast<Sink*>(user);
        if (s->body.size() + size * n > s->max) {
          s->over = true;
          return 0;  // aborts the transfer
        }
        s->body.append(p, size * n);
        return size * n;
      });
  const CURLcode rc = curl_easy_perform(curl);
  long code = 0;
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &code);
  curl_easy_cleanup(curl);
  if (sink.over) return InvalidArgument("Prometheus answered more than ", max_bytes, " bytes");
  if (rc != CURLE_OK) return Unavailable("cannot read Prometheus: ", curl_easy_strerror(rc));
  if (code != 200) {
    auto parsed = usage::ParsePromMatrix(sink.body);  // Prometheus's own error text, if any
    return InvalidArgument("Prometheus answered HTTP ", code,
                           parsed.ok() ? std::string() : StrCat(": ", parsed.status().message()));
  }
  return sink.body;
}

struct PromSource {
  std::string url, namespace_, window = "6h";
  std::string workloads = "owners";  // or "names"
  int64_t end_s = 0;
  long timeout_s = 30;
};

// The workload of every pod kube-state-metrics knew in the window (usage/prometheus.h,
// PromWorkloadsOf); empty when Prometheus has no kube_pod_owner there.
StatusOr<usage::PromWorkloads> ReadOwners(const PromSource& src, const usage::PromWindow& w,
                                          const usage::PromLimits& limits) {
  const usage::PromWindow whole{w.start_s, w.end_s, w.end_s - w.start_s};  // one step: the window
  std::vector<usage::PromOwnerRow> rows[2];
  for (usage::PromOwnerRead r : {usage::PromOwnerRead::kPod, usage::PromOwnerRead::kReplicaSet}) {
    HAMI_ASSIGN_OR_RETURN(std::string query,
                          usage::PromOwnerQuery(r, src.namespace_, whole.step_s));
    HAMI_ASSIGN_OR_RETURN(std::string url, usage::PromRangeUrl(src.url, query, whole));
    HAMI_ASSIGN_OR_RETURN(std::string body, HttpGet(url, limits.max_bytes, src.timeout_s));
    HAMI_ASSIGN_OR_RETURN(rows[static_cast<int>(r)], usage::ParsePromOwners(body, r, limits));
  }
  return usage::PromWorkloadsOf(rows[0], rows[1]);
}

// The usage trace of the window read from Prometheus (usage/prometheus.h); *first: its first
// minute.
StatusOr<usage::UsageTrace> ReadProm(const PromSource& src, int32_t* first) {
  const int64_t window_s = DurationSeconds(src.window);
  if (window_s < 120)
    return InvalidArgument("--window '", src.window,
                           "' is not a duration of at least 2m (s, m, h or d: 6h, 90m, 1d)");
  const int64_t end =
      (src.end_s > 0 ? src.end_s : static_cast<int64_t>(std::time(nullptr))) / 60 * 60;
  const usage::PromWindow w{end - window_s, end, 60};
  const usage::PromLimits limits;
  std::vector<usage::PromSeries> reads[2];
  for (usage::PromRead r : {usage::PromRead::kMemory, usage::PromRead::kDuty}) {
    HAMI_ASSIGN_OR_RETURN(std::string query, usage::PromQuery(r, src.namespace_, w.step_s));
    HAMI_ASSIGN_OR_RETURN(std::string url, usage::PromRangeUrl(src.url, query, w));
    HAMI_ASSIGN_OR_RETURN(std::string body, HttpGet(url, limits.max_bytes, src.timeout_s));
    HAMI_ASSIGN_OR_RETURN(reads[static_cast<int>(r)], usage::ParsePromMatrix(body, limits));
  }
  usage::PromWorkloads owners;
  if (src.workloads == "owners") {
    HAMI_ASSIGN_OR_RETURN(owners, ReadOwners(src, w, limits));
  }
  HAMI_ASSIGN_OR_RETURN(usage::UsageTrace trace,
                        usage::TraceFromProm(reads[0], reads[1], w, first, &owners));
  if (trace.pods.empty())
    return NotFound("Prometheus at ", src.url, " has no ", usage::kPromMemoryMetric,
                    " in the window (does it scrape hami monitor?)");
  if (src.workloads == "owners" && owners.empty())
    std::fprintf(stderr,
                 "hami recommend: Prometheus has no %s in the window (is kube-state-metrics "
                 "scraped?): workloads are read from the pod names\n",
                 std::string(usage::kPromPodOwnerMetric).c_str());
  return trace;
}

}  // namespace

int RecommendMain(int argc, char** argv) {
  CLI::App app{
      "Right-size GPU requests per workload from what its pods used: gpumem (the workload's peak "
      "with a margin), the usage profile the scheduler packs by (annotation "
      "hami.io/usage-profile), "
      "and the expected saving in GPUs (docs/utilization.md)."};
  std::string usage_path, format = "table", container, workload;
  double gpu_memory_gib = 80;
  usage::RecommendOptions options;
  PromSource prom;
  auto* from_usage = app.add_option("--usage", usage_path, "usage trace (hami-usage-trace v1)");
  auto* from_prom = app.add_option(
      "--prometheus", prom.url,
      "read usage from this Prometheus (http(s)://host:port), which scrapes hami monitor: "
      "query_range of hami_vgpu_memory_used_bytes and hami_container_device_utilization_ratio "
      "over --window, one step a minute; a pod's workload is its controller from "
      "kube-state-metrics' kube_pod_owner and kube_replicaset_owner (see --workloads)");
  from_usage->excludes(from_prom);
  app.add_option("--window", prom.window,
                 "--prometheus: how far back to read (s, m, h, d; at most 7d)")
      ->capture_default_str();
  app.add_option("--end", prom.end_s, "--prometheus: end of the window, unix seconds (default now)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40));
  app.add_option("--namespace", prom.namespace_, "--prometheus: read only this namespace");
  app.add_option("--workloads", prom.workloads,
                 "--prometheus: owners (a pod's controller, a ReplicaSet's Deployment, as the "
                 "webhook keys it; pods kube-state-metrics does not know, by name) or names "
                 "(<name> of <name>-<pod-template-hash>-<suffix> and <name>-<ordinal>)")
      ->check(CLI::IsMember({"owners", "names"}))
      ->capture_default_str();
  app.add_option("--prometheus-timeout-s", prom.timeout_s, "--prometheus: timeout of one read")
      ->check(CLI::Range(1L, 600L))
      ->capture_default_str();
  app.add_option("--until-min", options.until_min,
                 "learn only from minutes before this (e.g. the warm-up); the later minutes are "
                 "checked against the recommendation (default: the whole trace)")
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--window-min", options.window_min,
                 "learn only from the last N minutes before --until-min (default: all of them)")
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--gpu-memory-gib", gpu_memory_gib, "memory of a GPU, GiB")
      ->check(CLI::Range(1.0, 4096.0))
      ->capture_default_str();
  app.add_option("--margin-pct", options.learn.margin_pct,
                 "recommended gpumem = the workload's peak + this %")
      ->check(CLI::Range(0, 100))
      ->capture_default_str();
  app.add_option("--arrival-min", options.learn.arrival_min,
                 "the profile of a new replica: the first N minutes of the replicas that arrived "
                 "inside the window (0 = the mix of all its pods; docs/usage-packing.md)")
      ->check(CLI::Range(0, 1440))
      ->capture_default_str();
  app.add_option("--format", format,
                 "table, json ({\"workloads\": ..., \"pods\": ...}) or patch (for kubectl patch on "
                 "the workload)")
      ->check(CLI::IsMember({"table", "json", "patch"}))
      ->capture_default_str();
  app.add_option("--container", container,
                 "--format patch: the container to limit (a strategic-merge patch); default: the "
                 "first container (a JSON patch, kubectl patch --type json)");
  app.add_option("--workload", workload,
                 "--format patch: the workload to patch (needed when the trace has several)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  options.learn.card_mib = static_cast<int64_t>(gpu_memory_gib * 1024);
  if (usage_path.empty() && prom.url.empty())
    return Fail(InvalidArgument("give --usage FILE or --prometheus URL"));
  int32_t first_minute = 0;
  auto trace =
      usage_path.empty() ? ReadProm(prom, &first_minute) : usage::ReadUsageTrace(usage_path);
  if (!trace.ok()) return Fail(trace.status());
  auto rec = usage::Recommend(*trace, options);
  if (!rec.ok()) return Fail(rec.status());
  if (format == "patch") {
    auto patch = usage::RecommendPatch(*rec, workload, container);
    if (!patch.ok()) return Fail(patch.status());
    std::fputs(patch->c_str(), stdout);
    return 0;
  }
  if (Status s = FillSaving(*trace, options, &*rec); !s.ok()) return Fail(s);
  const std::string source = usage_path.empty()
                                 ? StrCat("--prometheus ", prom.url)
                                 : usage_path.substr(usage_path.find_last_of('/') + 1);
  std::fputs(
      (format == "json" ? usage::RecommendJson(*rec) : usage::RecommendTable(source, *rec)).c_str(),
      stdout);
  return 0;
}

}  // namespace hami::cmd
