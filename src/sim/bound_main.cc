// sim_bound: how far a policy's online placement is from offline packings of the same arrivals
// (docs/sim.md, "How far from an offline packing"). Per seed, at arrival 100 %: what the policy
// allocated online, the best of a few offline packings through the production scheduler, and the
// relaxation bound no placement can beat; then the medians.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_split.h"
#include "sim/bound.h"
#include "sim/report.h"
#include "sim/trace.h"

namespace {

int Fail(const std::string& msg) {
  std::fprintf(stderr, "sim_bound: %s\n", msg.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace hami::sim;
  CLI::App app{
      "Offline references for hami sim: relaxation bound and offline packings at arrival "
      "100 % of the same arrivals as a policy's online run."};
  std::string nodes_path, pods_path;
  int seeds = 1;
  uint64_t first_seed = 42;
  BoundSeedOptions opt;
  app.add_option("--nodes", nodes_path, "node CSV; default: bundled openb GPU nodes");
  app.add_option("--pods", pods_path, "pod CSV; default: bundled openb default trace");
  app.add_option("--seeds", seeds, "number of seeds")->check(CLI::Range(1, 1000));
  app.add_option("--first-seed", first_seed, "first seed");
  app.add_option("--policy", opt.policy, "the online policy compared");
  app.add_option("--inflation", opt.inflation, "arrival stops at this times the capacity")
      ->check(CLI::Range(0.01, 100.0));
  app.add_option("--checkpoints", opt.checkpoints, "bounds computed over A(100)'s bucket")
      ->check(CLI::Range(1, 100));
  app.add_flag("--integer", opt.bound.integer, "also solve the relaxation with integer counts");
  app.add_option("--time-limit", opt.bound.time_limit_s, "seconds per integer solve");
  app.add_flag("--place-cpu-only", opt.bound.place_cpu_only,
               "the bound must place every task without GPUs (valid for runs where none failed)");
  bool pooled = false;
  app.add_flag("--pooled-gpus", pooled,
               "drop the GPU fill patterns: pool the GPU milli of a node class (the looser bound)");
  std::string offline_policies = "default,best-fit";
  app.add_option("--offline-policies", offline_policies,
                 "policies the offline packings place with (comma-separated)");
  std::string horizons;
  app.add_option("--no-failure-before", horizons,
                 "arrival points in percent (comma-separated): also bound the placements that fail "
                 "no task arriving before each, and before the online run's first failure");
  app.add_option("--target", opt.target,
                 "with --no-failure-before: the least GPU demand arriving before each point that a "
                 "placement leaving at most this unallocated GPU % must fail")
      ->check(CLI::Range(0.0, 100.0));
  bool verbose = false;
  app.add_flag("-v,--verbose", verbose, "print every offline packing");
  CLI11_PARSE(app, argc, argv);
  opt.bound.gpu_patterns = !pooled;
  for (const std::string& item :
       horizons.empty() ? std::vector<std::string>() : absl::StrSplit(horizons, ',')) {
    char* end = nullptr;
    const double v = std::strtod(item.c_str(), &end);
    if (item.empty() || end != item.c_str() + item.size() || !(v > 0 && v <= 100))
      return Fail("--no-failure-before: '" + item + "' is not a percentage in (0, 100]");
    opt.no_failure_before.push_back(v);
  }
  opt.offline_policies = absl::StrSplit(offline_policies, ',', absl::SkipEmpty());

  auto find = [](std::string* path, const char* name) -> std::string {
    if (!path->empty()) return "";
    auto p = FindBundledTrace(name);
    if (!p.ok()) return std::string(p.status().message());
    *path = *p;
    return "";
  };
  if (auto e = find(&nodes_path, "openb_node_list_gpu_node.csv"); !e.empty()) return Fail(e);
  if (auto e = find(&pods_path, "openb_pod_list_default.csv"); !e.empty()) return Fail(e);
  auto nodes = ReadNodesCsv(nodes_path);
  if (!nodes.ok()) return Fail(std::string(nodes.status().message()));
  auto tasks = ReadPodsCsv(pods_path);
  if (!tasks.ok()) return Fail(std::string(tasks.status().message()));
  if (HasOtherVendors(*nodes, *tasks)) return Fail("traces with other vendors are not supported");

  std::printf(
      "seed  events  online_A100  bound_A100  | at arrival 100 %%: online  offline_best (policy, "
      "order, cpu-only failed)  bound  lp  shapes  gpu_patterns\n");
  std::vector<double> online_a, bound_a, online_u, offline_u, bound_u, first_failure;
  std::vector<std::vector<double>> horizon_u(opt.no_failure_before.size() + 1),
      horizon_online(horizon_u.size()), horizon_need(horizon_u.size());
  for (int s = 0; s < seeds; ++s) {
    auto r = BoundSeed(*nodes, *tasks, first_seed + static_cast<uint64_t>(s), opt);
    if (!r.ok()) return Fail(std::string(r.status().message()));
    const double cap = static_cast<double>(r->capacity_milli);
    const OfflinePacking* best = nullptr;
    for (const auto& p : r->offline)
      if (best == nullptr || p.used_milli > best->used_milli) best = &p;
    const double on = 100.0 * static_cast<double>(r->online_used_milli) / cap;
    const double off = best ? 100.0 * static_cast<double>(best->used_milli) / cap : 0;
    const double ub = 100.0 * r->bound.best_milli() / cap;
    std::printf(
        "%4llu  %6zu  %11.2f  %10.2f  | %6.2f  %6.2f (%s, %s, %lld)  %6.2f%s  %6.2f  %d  %d\n",
        static_cast<unsigned long long>(r->seed), r->events, r->online_a100, r->a100_bound, on, off,
        best ? best->policy.c_str() : "-", best ? best->order.c_str() : "-",
        best ? static_cast<long long>(best->cpu_only_failed) : 0LL, ub,
        r->bound.integer_optimal ? " (integer)" : "", 100.0 * r->bound.lp_milli / cap,
        r->bound.task_shapes, r->bound.gpu_patterns);
    if (verbose)
      for (const auto& p : r->offline)
        std::printf(
            "      offline %s/%s: %.2f %%, %lld GPU tasks and %lld without GPUs failed\n",
            p.policy.c_str(), p.order.c_str(), 100.0 * static_cast<double>(p.used_milli) / cap,
            static_cast<long long>(p.gpu_failed), static_cast<long long>(p.cpu_only_failed));
    if (r->online_cpu_only_failed > 0 && opt.bound.place_cpu_only)
      std::printf(
          "      note: %lld tasks without GPUs failed online; --place-cpu-only does not "
          "bound this run\n",
          static_cast<long long>(r->online_cpu_only_failed));
    // Placements that fail nothing before a point (the last: the online run's first failure).
    for (size_t h = 0; h < r->horizons.size() && !opt.no_failure_before.empty(); ++h) {
      const auto& z = r->horizons[h];
      const bool online = h + 1 == r->horizons.size();
      if (z.feasible)
        std::printf(
            "      no task failed before %6.2f %% arrived%s: bound %.2f %% (unallocated >= %.2f)\n",
            z.arrival, online ? " (online's first failure)" : "", 100.0 * z.milli / cap,
            100 - 100.0 * z.milli / cap);
      else
        std::printf("      no task failed before %6.2f %% arrived%s: no placement does that\n",
                    z.arrival, online ? " (online's first failure)" : "");
      horizon_u[h].push_back(z.feasible ? 100 - 100.0 * z.milli / cap : 100.0);
      if (opt.target >= 0) {
        std::printf("        failed before it online: %.1f GPUs; to leave <= %.2f %% unallocated: ",
                    static_cast<double>(z.online_failed_milli) / 1000, opt.target);
        if (z.min_failed_milli >= 0) {
          std::string which;  // tasks x (GPUs x milli per GPU)
          for (const auto& [shape, n] : z.min_failed)
            if (n > 0.05)
              which += (which.empty() ? "" : ", ") + std::to_string(n).substr(0, 5) + " x " +
                       std::to_string(std::get<2>(shape)) + "x" +
                       std::to_string(std::get<3>(shape));
          std::printf(">= %.1f GPUs%s\n", z.min_failed_milli / 1000,
                      verbose && !which.empty() ? (" (" + which + ")").c_str() : "");
        } else
          std::printf("out of reach\n");
        horizon_online[h].push_back(static_cast<double>(z.online_failed_milli) / 1000);
        horizon_need[h].push_back(z.min_failed_milli >= 0 ? z.min_failed_milli / 1000 : 1e9);
      }
    }
    first_failure.push_back(r->online_first_failure_arrival);
    online_a.push_back(100 - r->online_a100);
    bound_a.push_back(100 - r->a100_bound);
    online_u.push_back(100 - on);
    offline_u.push_back(100 - off);
    bound_u.push_back(100 - ub);
  }
  std::printf(
      "median unallocated GPU %%: U(100) online %.2f, lower bound %.2f; at arrival 100 %%: online "
      "%.2f, offline packing %.2f, lower bound %.2f\n",
      Median(online_a), Median(bound_a), Median(online_u), Median(offline_u), Median(bound_u));
  if (!opt.no_failure_before.empty()) {
    for (size_t h = 0; h < opt.no_failure_before.size(); ++h) {
      std::printf(
          "median lower bound at arrival 100 %% when no task arriving before %.2f %% fails: %.2f\n",
          opt.no_failure_before[h], Median(horizon_u[h]));
      if (opt.target >= 0)
        std::printf(
            "  GPU demand arriving before it that fails: online %.1f GPUs; needed for <= %.2f %%: "
            "%.1f GPUs (medians)\n",
            Median(horizon_online[h]), opt.target, Median(horizon_need[h]));
    }
    std::printf(
        "median lower bound when no task fails before the online run's first failure (median "
        "arrival %.2f %%): %.2f\n",
        Median(first_failure), Median(horizon_u.back()));
  }
  return 0;
}
