// hami sim: the FGD workload-inflation experiment over a trace, through the production scheduler.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "cmd/subcommands.h"
#include "common/mutex.h"
#include "scheduler/registry.h"
#include "sim/experiment.h"
#include "sim/report.h"
#include "sim/trace.h"
#include "sim/usage_plot.h"
#include "sim/usage_sim.h"
#include "usage/synthetic.h"
#include "usage/trace.h"
#include "vendors/config.h"
#include "vendors/config_file.h"
#include "vendors/vendor_set.h"

namespace hami::cmd {

namespace {

constexpr const char kDefaultNodes[] = "openb_node_list_gpu_node.csv";
constexpr const char kDefaultPods[] = "openb_pod_list_default.csv";

std::vector<std::string> SplitComma(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

int Fail(const Status& s) {
  std::fprintf(stderr, "hami sim: %s\n", std::string(s.message()).c_str());
  return 1;
}

// hami sim --usage: the usage-trace replay (sim/usage_sim.h, docs/utilization.md).
int UsageMain(const std::string& path, const std::string& requests, double gpu_memory_gib,
              sim::UsageSimConfig config, const std::string& json_path,
              const std::string& placements_path, const std::string& plot_path) {
  config.gpu_memory_mib = static_cast<int64_t>(gpu_memory_gib * 1024);
  if (!requests.empty())
    if (Status s = sim::ParseUsageRequests(requests, &config); !s.ok()) return Fail(s);
  auto trace = usage::ReadUsageTrace(path);
  if (!trace.ok()) return Fail(trace.status());
  auto result = sim::RunUsageSim(*trace, config);
  if (!result.ok()) return Fail(result.status());
  const std::string source = path.substr(path.find_last_of('/') + 1);
  if (json_path == "-") {
    std::fputs(sim::UsageJson(source, *result, config).c_str(), stdout);
  } else {
    std::fputs(sim::UsageTable(source, *result, config).c_str(), stdout);
    if (!json_path.empty())
      if (Status s = sim::WriteFile(json_path, sim::UsageJson(source, *result, config)); !s.ok())
        return Fail(s);
  }
  if (!placements_path.empty())
    if (Status s =
            sim::WriteFile(placements_path, sim::UsagePlacementsJson(*trace, *result, config));
        !s.ok())
      return Fail(s);
  if (!plot_path.empty()) {
    const std::string title = "hami sim --usage " + source + ": " + result->mode + ", " +
                              std::to_string(config.gpu_memory_mib) + " MiB GPUs, peak " +
                              std::to_string(result->metrics.gpus) + " GPUs";
    if (Status s = sim::WriteFile(
            plot_path, sim::UsagePlotSvg(
                           sim::UsageSeries(*trace, result->placement, config.warmup_min), title));
        !s.ok())
      return Fail(s);
  }
  return 0;
}

}  // namespace

int SimMain(int argc, char** argv) {
  CLI::App app{
      "Trace-driven scheduling simulator: the FGD paper's workload-inflation experiment "
      "(pods arrive in random order, never leave; GPU allocation ratio vs arrived demand)."};
  std::string nodes_path, pods_path,
      policies = "hami,random,dot-product,gpu-packing,gpu-clustering,best-fit,fgd,default";
  std::string json_path, plot_path, device_config, placements_path;
  int seeds = 1, jobs = 1;
  uint64_t first_seed = 42;
  double inflation = 1.3;
  bool list = false;
  // Usage-trace replay (--usage; docs/utilization.md).
  std::string usage_path, requests, usage_placements, synthetic_path;
  double gpu_memory_gib = 80;
  sim::UsageSimConfig usage_config;
  int duty_budget_pct = usage_config.duty_budget / 100;
  app.add_option("--nodes", nodes_path,
                 "node CSV (sn,cpu_milli,memory_mib,gpu,model[,vendor,mig]; mig: a MIG profile set "
                 "such as A100-40GB, docs/sim.md); default: bundled openb GPU nodes");
  app.add_option("--pods", pods_path,
                 "pod CSV (name,cpu_milli,memory_mib,num_gpu,gpu_milli[,gpu_spec,vendor,vgpu_mode,"
                 "mig_profile_preference,...]); "
                 "default: bundled openb_pod_list_default.csv");
  app.add_option("--policy", policies, "comma-separated scheduling policies")
      ->capture_default_str();
  app.add_option("--seeds", seeds, "number of seeds (first-seed .. first-seed+N-1)")
      ->check(CLI::Range(1, 10000))
      ->capture_default_str();
  app.add_option("--first-seed", first_seed, "first seed")->capture_default_str();
  app.add_option("--inflation", inflation,
                 "stop adding pods when requested GPU reaches this multiple of capacity")
      ->check(CLI::Range(0.01, 100.0))
      ->capture_default_str();
  app.add_option("--device-config", device_config,
                 "vendor config (docs/vendors.md) for traces with a vendor column; default: every "
                 "vendor with its defaults");
  app.add_option("--json", json_path, "write all runs and the summary as JSON to FILE");
  app.add_option("--placements", placements_path,
                 "write every decision (node and GPUs per task event, '' = failed) as CSV to FILE");
  app.add_option("--plot", plot_path,
                 "write unallocated GPU % vs arrived demand as SVG to FILE (--usage: GPUs in use, "
                 "utilization and contention over time)");
  app.add_option("--jobs,-j", jobs, "runs in parallel threads")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
  app.add_flag("--list-policies", list, "print the registered policies and exit");
  app.add_option("--usage", usage_path,
                 "replay a usage trace (hami-usage-trace v1, docs/utilization.md) instead of the "
                 "openb experiment; --json - prints its JSON instead of the table");
  app.add_option("--gpu-memory-gib", gpu_memory_gib, "--usage: memory of every GPU, GiB")
      ->check(CLI::Range(1.0, 4096.0))
      ->capture_default_str();
  app.add_option("--warmup-min", usage_config.warmup_min,
                 "--usage: minutes observed before placing (pods run as if on whole cards)")
      ->check(CLI::Range(0, 1 << 20))
      ->capture_default_str();
  app.add_option("--requests", requests,
                 "--usage: stock calibration: every pod asks gpumem=<MiB>,gpucores=<N>, placed by "
                 "stock accounting (default: usage-aware)");
  app.add_option("--placements-json", usage_placements,
                 "--usage: write the placement (hami-placement v2) to FILE");
  app.add_option("--overcommit-pct", usage_config.overcommit_pct,
                 "--usage: sum of gpumem on a GPU may reach this % of the card")
      ->check(CLI::Range(100, 1000))
      ->capture_default_str();
  app.add_option("--duty-budget-pct", duty_budget_pct,
                 "--usage: co-located duty above this % is contention")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  app.add_option("--contention-bp", usage_config.contention_bp,
                 "--usage: per hour, the most likely (1/100 %) a minute of a GPU may be contended")
      ->check(CLI::Range(0, 10000))
      ->capture_default_str();
  app.add_option(
         "--fleet-contention-bp", usage_config.fleet_contention_bp,
         "--usage: past --contention-bp a GPU still takes a pod while the mean over the GPUs "
         "in use stays within this (1/100 %; 0 = off; docs/usage-packing.md)")
      ->check(CLI::Range(0, 10000))
      ->capture_default_str();
  app.add_option("--card-contention-bp", usage_config.card_contention_bp,
                 "--usage: under --fleet-contention-bp, the most one GPU may reach (1/100 %)")
      ->check(CLI::Range(0, 10000))
      ->capture_default_str();
  app.add_option("--arrival-min", usage_config.arrival_min,
                 "--usage: a replica without history packs by the first this many minutes of the "
                 "workload's replicas that arrived earlier (0 = by the warm-up pods' mix; "
                 "docs/usage-packing.md)")
      ->check(CLI::Range(0, 1440))
      ->capture_default_str();
  app.add_option("--mem-quantile", usage_config.profile.mem_q_pct,
                 "--usage: memory quantile of a profile's hour bucket")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  app.add_option("--margin-pct", usage_config.margin_pct,
                 "--usage: recommended gpumem = workload warm-up peak + this %")
      ->check(CLI::Range(0, 100))
      ->capture_default_str();
  app.add_flag("--consolidate", usage_config.consolidate,
               "--usage: move pods as load changes (docs/consolidation.md): empty the least-loaded "
               "GPUs, relieve GPUs about to contend or overflow");
  app.add_option("--restart-min", usage_config.restart_min,
                 "--consolidate: a moved pod holds memory and duty on both GPUs this long")
      ->check(CLI::Range(0, 1440))
      ->capture_default_str();
  app.add_option("--plan-every-min", usage_config.plan_every_min,
                 "--consolidate: minutes between two planning rounds")
      ->check(CLI::Range(1, 1440))
      ->capture_default_str();
  app.add_option("--relief-every-min", usage_config.relief_every_min,
                 "--consolidate: relief-only planning rounds this often in between (0: none)")
      ->check(CLI::Range(0, 1440))
      ->capture_default_str();
  app.add_option("--forecast-min", usage_config.forecast_min,
                 "--consolidate: plan by profiles of the last this many minutes")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  app.add_option("--forecast-falling-min", usage_config.forecast_falling_min,
                 "--consolidate: while the workload's load is not rising, plan by profiles of "
                 "only the last this many minutes (0: always --forecast-min)")
      ->check(CLI::Range(0, 1 << 20))
      ->capture_default_str();
  app.add_option("--trend-min", usage_config.trend_min,
                 "--consolidate: the load trend compares the mean duty of the last this many "
                 "minutes with the same span before")
      ->check(CLI::Range(1, 1440))
      ->capture_default_str();
  app.add_option("--trend-pct", usage_config.trend_pct,
                 "--consolidate: not rising: the last span's duty at most this % of the one before")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  app.add_option("--trend-scale-pct", usage_config.trend_scale_pct,
                 "--consolidate: plan every pod's duty times the fleet's trend (its duty of the "
                 "last --trend-min minutes over the span before), within [10000/this, this] % "
                 "(<= 100: off)")
      ->check(CLI::Range(0, 1000))
      ->capture_default_str();
  app.add_option("--place-contention-bp", usage_config.place_contention_bp,
                 "--consolidate: the contention likelihood (1/100 %) pods are placed by at the "
                 "warm-up and on arrival (0: --contention-bp)")
      ->check(CLI::Range(0, 10000))
      ->capture_default_str();
  app.add_option("--mem-forecast-min", usage_config.mem_forecast_min,
                 "--consolidate: no hour's memory level below the pod's level over the last this "
                 "many minutes (0: off)")
      ->check(CLI::Range(0, 1 << 20))
      ->capture_default_str();
  app.add_option("--plan-contention-bp", usage_config.plan_contention_bp,
                 "--consolidate: the contention likelihood (1/100 %) moves may pack to (0: "
                 "--contention-bp)")
      ->check(CLI::Range(0, 10000))
      ->capture_default_str();
  app.add_option("--relief-contention-bp", usage_config.plan.relief_contention_bp,
                 "--consolidate: relieve a GPU whose contention likelihood passes this (1/100 %)")
      ->check(CLI::Range(0, 10000))
      ->capture_default_str();
  app.add_option("--max-moves-pod-day", usage_config.plan.max_moves_pod_day,
                 "--consolidate: moves of one pod in any 24 hours")
      ->check(CLI::Range(0, 1000))
      ->capture_default_str();
  app.add_option("--max-empty-moves-pod-day", usage_config.plan.max_empty_moves_pod_day,
                 "--consolidate: of them, empty-gpu moves (-1: all; the rest are kept for relief)")
      ->check(CLI::Range(-1, 1000))
      ->capture_default_str();
  app.add_option("--write-synthetic-usage", synthetic_path,
                 "write the seeded synthetic usage trace (seed: --first-seed) to FILE and exit");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (!synthetic_path.empty()) {
    usage::SyntheticOptions o;
    o.seed = first_seed;
    if (Status s =
            sim::WriteFile(synthetic_path, usage::FormatUsageTrace(usage::SyntheticTrace(o)));
        !s.ok())
      return Fail(s);
    return 0;
  }
  if (!usage_path.empty()) {
    usage_config.duty_budget = duty_budget_pct * 100;
    return UsageMain(usage_path, requests, gpu_memory_gib, usage_config, json_path,
                     usage_placements, plot_path);
  }
  if (list) {
    for (const auto& row : scheduler::Policies()) std::printf("%-16s %s\n", row.name, row.doc);
    for (const auto& [name, doc] : sim::SimOnlyPolicies())
      std::printf("%-16s %s\n", name.c_str(), doc.c_str());
    return 0;
  }

  bool default_trace = pods_path.empty();
  if (nodes_path.empty()) {
    auto p = sim::FindBundledTrace(kDefaultNodes);
    if (!p.ok()) return Fail(p.status());
    nodes_path = *p;
  }
  if (pods_path.empty()) {
    auto p = sim::FindBundledTrace(kDefaultPods);
    if (!p.ok()) return Fail(p.status());
    pods_path = *p;
  }
  default_trace = default_trace || pods_path.find(kDefaultPods) != std::string::npos;
  auto nodes = sim::ReadNodesCsv(nodes_path);
  if (!nodes.ok()) return Fail(nodes.status());
  auto tasks = sim::ReadPodsCsv(pods_path);
  if (!tasks.ok()) return Fail(tasks.status());
  // Heterogeneous traces (a vendor column): the vendors come from --device-config, else all
  // defaults.
  std::unique_ptr<vendors::VendorSet> vendor_set;
  if (sim::HasOtherVendors(*nodes, *tasks) || !device_config.empty()) {
    if (device_config.empty()) {
      vendor_set = std::make_unique<vendors::VendorSet>(vendors::AllVendorsWithDefaults());
    } else {
      // The one reader (vendors/config_file.h); the sim takes the vendor set from it (its tasks are
      // trace rows, not pods: the nvidia knobs of pods do not apply).
      auto loaded = vendors::LoadConfigFile(device_config, "--device-config");
      if (!loaded.ok()) return Fail(loaded.status());
      vendor_set = std::make_unique<vendors::VendorSet>(std::move(loaded->vendors));
    }
    if (Status s = sim::ResolveVendors(*vendor_set, &*nodes, &*tasks); !s.ok()) return Fail(s);
  }
  const std::vector<std::string> names = SplitComma(policies);
  if (names.empty()) return Fail(InvalidArgument("--policy: no policy given"));
  for (const auto& n : names)
    if (Status s = sim::CheckPolicy(n); !s.ok()) return Fail(Annotate(s, "--policy"));

  struct Job {
    std::string policy;
    uint64_t seed;
  };
  std::vector<Job> work;
  for (const auto& n : names)
    for (int s = 0; s < seeds; ++s) work.push_back({n, first_seed + static_cast<uint64_t>(s)});
  std::vector<StatusOr<sim::RunResult>> results(work.size(), Internal("not run"));
  std::atomic<size_t> next{0}, done{0};
  Mutex progress_mu;
  const bool tty = isatty(STDERR_FILENO);
  auto progress = [&] {
    if (!tty) return;
    MutexLock l(progress_mu);
    const size_t d = done.load(), n = work.size();
    const int width = 30, filled = static_cast<int>(width * d / n);
    std::fprintf(stderr, "\r[%s%s] %zu/%zu runs", std::string(filled, '#').c_str(),
                 std::string(width - filled, ' ').c_str(), d, n);
    if (d == n) std::fprintf(stderr, "\n");
    std::fflush(stderr);
  };
  progress();
  auto worker = [&] {
    for (size_t i; (i = next.fetch_add(1)) < work.size();) {
      results[i] =
          sim::RunInflation(*nodes, *tasks,
                            {work[i].policy, work[i].seed, inflation,
                             vendor_set ? vendor_set.get() : &vendors::VendorSet::NvidiaOnly(),
                             !placements_path.empty()});
      done.fetch_add(1);
      progress();
    }
  };
  std::vector<std::thread> threads;
  for (int t = 1; t < std::min<int>(jobs, static_cast<int>(work.size())); ++t)
    threads.emplace_back(worker);
  worker();
  for (auto& t : threads) t.join();

  std::vector<sim::RunResult> runs;
  for (auto& r : results) {
    if (!r.ok()) return Fail(r.status());
    runs.push_back(std::move(*r));
  }
  std::fputs(sim::ToTable(runs, default_trace).c_str(), stdout);
  std::fputs(sim::ToVendorTable(runs).c_str(), stdout);
  const sim::ClusterTotals totals = sim::Totals(*nodes);
  if (!json_path.empty()) {
    sim::TraceInfo info{nodes_path, pods_path, static_cast<int64_t>(tasks->size()), inflation};
    if (Status s = sim::WriteFile(json_path, sim::ToJson(info, totals, runs)); !s.ok())
      return Fail(s);
  }
  if (!placements_path.empty())
    if (Status s = sim::WriteFile(placements_path, sim::ToPlacementsCsv(runs, *tasks)); !s.ok())
      return Fail(s);
  if (!plot_path.empty()) {
    std::string title = "hami sim: " + pods_path.substr(pods_path.find_last_of('/') + 1) + ", " +
                        std::to_string(totals.gpus) + " GPUs, " + std::to_string(seeds) +
                        " seed(s)";
    if (Status s = sim::WriteFile(plot_path, sim::ToSvg(runs, title)); !s.ok()) return Fail(s);
  }
  return 0;
}

}  // namespace hami::cmd
