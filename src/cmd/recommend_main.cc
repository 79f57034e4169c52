// hami recommend: right-size GPU requests from a usage trace (usage/recommend.h,
// docs/utilization.md#right-sizing-hami-recommend); the saving comes from the sim's packing.
#include <algorithm>
#include <cstdio>
#include <string>

#include "CLI/CLI.hpp"
#include "cmd/subcommands.h"
#include "sim/usage_sim.h"
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
    HAMI_ASSIGN_OR_RETURN(sim::UsageSimResult after, sim::RunUsageSim(mine, c));
    c.gpumem_mib = std::min(r->card_mib, rec.model.peak_mib);
    HAMI_ASSIGN_OR_RETURN(sim::UsageSimResult now, sim::RunUsageSim(mine, c));
    rec.gpus_now = now.metrics.gpus;
    rec.gpus_after = after.metrics.gpus;
  }
  return OkStatus();
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
  app.add_option("--usage", usage_path, "usage trace (hami-usage-trace v1)")->required();
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
  auto trace = usage::ReadUsageTrace(usage_path);
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
  const std::string source = usage_path.substr(usage_path.find_last_of('/') + 1);
  std::fputs(
      (format == "json" ? usage::RecommendJson(*rec) : usage::RecommendTable(source, *rec)).c_str(),
      stdout);
  return 0;
}

}  // namespace hami::cmd
