#include "sim/bound.h"

#include <glpk.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <numeric>
#include <tuple>

#include "common/rng.h"
#include "scheduler/framework.h"
#include "scheduler/scheduler.h"

namespace hami::sim {

namespace {

struct NodeClass {
  const TraceNode* shape = nullptr;
  int64_t count = 0;
};
struct TaskShape {
  const TraceTask* shape = nullptr;
  int64_t count = 0;
};

bool Fits(const TraceTask& t, const TraceNode& n) {
  if (t.cpu_milli > n.cpu_milli || t.memory_mib > n.memory_mib || t.num_gpu > n.gpus) return false;
  if (t.num_gpu == 0) return true;
  if (t.vendor != n.vendor) return false;
  if (t.gpu_spec.empty()) return true;
  return std::any_of(t.gpu_spec.begin(), t.gpu_spec.end(),
                     [&](const std::string& m) { return scheduler::TypeMatches(n.model, m); });
}

// A task that needs GPUs of its own: whole GPUs, or more than half of one (two never share).
int64_t ExclusiveGpus(const TraceTask& t) {
  if (t.num_gpu == 0) return 0;
  return t.gpu_milli > 500 ? t.num_gpu : 0;  // a whole GPU is 1000
}

struct GlpDeleter {
  void operator()(glp_prob* p) const { glp_delete_prob(p); }
};

}  // namespace

std::vector<std::vector<int>> MaximalGpuPatterns(const std::vector<int>& sizes, size_t limit) {
  std::vector<std::vector<int>> out;
  if (sizes.empty()) return out;
  const int smallest = *std::min_element(sizes.begin(), sizes.end());
  if (smallest <= 0) return out;
  std::vector<int> cur(sizes.size(), 0);
  bool overflow = false;
  size_t visits = 0;  // the search is cut (as too many) past 64 visits per pattern allowed
  // Depth-first over the sizes: how many of size z, given what is left of the GPU.
  auto rec = [&](auto&& self, size_t z, int left) -> void {
    if (++visits > 64 * limit + 1024) overflow = true;
    if (overflow) return;
    if (z == sizes.size()) {
      if (left >= smallest) return;  // another share still fits: not maximal
      if (out.size() >= limit) {
        overflow = true;
        return;
      }
      out.push_back(cur);
      return;
    }
    for (int k = left / sizes[z]; k >= 0; --k) {
      cur[z] = k;
      self(self, z + 1, left - k * sizes[z]);
    }
    cur[z] = 0;
  };
  rec(rec, 0, 1000);
  if (overflow) out.clear();
  return out;
}

TaskShapeKey ShapeOf(const TraceTask& t) {
  return {t.cpu_milli, t.memory_mib, t.num_gpu, t.gpu_milli, t.gpu_spec, t.vendor};
}
NodeClassKey ClassOf(const TraceNode& n) {
  return {n.cpu_milli, n.memory_mib, n.gpus, n.model, n.vendor};
}

StatusOr<PackingBound> PackingUpperBound(const std::vector<TraceNode>& nodes,
                                         const std::vector<TraceTask>& tasks,
                                         const std::vector<int>& prefix,
                                         const BoundOptions& options) {
  std::map<NodeClassKey, NodeClass> node_classes;
  for (const auto& n : nodes) {
    // The bound packs milli into shared GPUs; a MIG GPU's instances are not milli.
    if (!n.mig.empty())
      return InvalidArgument("node ", n.name, ": MIG nodes are not modelled by the packing bound");
    auto& c = node_classes[ClassOf(n)];
    c.shape = &n;
    ++c.count;
  }
  std::map<TaskShapeKey, TaskShape> task_shapes;
  PackingBound out;
  for (int i : prefix) {
    if (i < 0 || static_cast<size_t>(i) >= tasks.size())
      return InvalidArgument("task index ", i, " is out of range");
    const TraceTask& t = tasks[i];
    auto& s =
        task_shapes[{t.cpu_milli, t.memory_mib, t.num_gpu, t.gpu_milli, t.gpu_spec, t.vendor}];
    s.shape = &t;
    ++s.count;
    out.demand_milli += t.total_gpu_milli();
  }
  std::vector<NodeClass> cls;
  cls.reserve(node_classes.size());
  for (auto& [k, c] : node_classes) cls.push_back(c);
  std::vector<TaskShape> shp;
  shp.reserve(task_shapes.size());
  for (auto& [k, s] : task_shapes) shp.push_back(s);
  out.node_classes = static_cast<int>(cls.size());
  out.task_shapes = static_cast<int>(shp.size());

  // Per shape, how many of the first options.must_place tasks have it: at least those are placed.
  std::vector<int64_t> must(shp.size(), 0);
  if (options.must_place > 0) {
    std::map<TaskShapeKey, size_t> index;
    for (size_t s = 0; s < shp.size(); ++s) index[ShapeOf(*shp[s].shape)] = s;
    for (size_t i = 0; i < std::min(options.must_place, prefix.size()); ++i)
      ++must[index.at(ShapeOf(tasks[prefix[i]]))];
  }
  // BoundOptions::target_milli: the shapes with tasks that must be placed get a second row, placed
  // + failed >= must, and a column for the failed ones; one more row asks the target.
  const bool min_failure = options.target_milli >= 0;
  std::vector<int> must_row(shp.size(), 0);
  int extra_rows = 0;
  if (min_failure) {
    for (size_t s = 0; s < shp.size(); ++s)
      if (must[s] > 0) must_row[s] = ++extra_rows;
    ++extra_rows;  // the target row, last
  }
  glp_term_out(GLP_OFF);  // GLPK prints scaling and progress on stdout otherwise
  std::unique_ptr<glp_prob, GlpDeleter> lp(glp_create_prob());
  glp_set_obj_dir(lp.get(), min_failure ? GLP_MIN : GLP_MAX);
  // Rows: one per task shape (how many are placed), then per node class: CPU, memory, GPU milli,
  // exclusive GPUs, and the three "more than half a node" counts.
  constexpr int kPerClass = 7;
  const int shape_rows = static_cast<int>(shp.size());
  // GPU fill patterns (BoundOptions::gpu_patterns): the per-GPU milli of the shares (< 1000) in the
  // prefix, and every maximal way to fill one GPU with them.
  std::vector<int> sizes;
  std::vector<std::vector<int>> patterns;  // per pattern, how many of each size
  if (options.gpu_patterns) {
    for (const auto& s : shp)
      if (s.shape->num_gpu > 0 && s.shape->gpu_milli < 1000) sizes.push_back(s.shape->gpu_milli);
    std::sort(sizes.begin(), sizes.end(), std::greater<>());
    sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
    patterns = MaximalGpuPatterns(sizes, options.max_patterns);
    if (patterns.empty()) sizes.clear();  // none, or too many: the pooled rows alone
  }
  const int per_class = kPerClass + (sizes.empty() ? 0 : 1 + static_cast<int>(sizes.size()));
  out.gpu_patterns = static_cast<int>(patterns.size());
  const int class_rows = per_class * static_cast<int>(cls.size());
  glp_add_rows(lp.get(), shape_rows + class_rows + extra_rows);
  const int target_row = shape_rows + class_rows + extra_rows;  // when min_failure
  std::vector<bool> shape_has_column(shp.size(), false);
  for (size_t c = 0; c < cls.size(); ++c) {
    const TraceNode& n = *cls[c].shape;
    const double k = static_cast<double>(cls[c].count);
    const int base = shape_rows + per_class * static_cast<int>(c) + 1;
    const double caps[kPerClass] = {k * static_cast<double>(n.cpu_milli),
                                    k * static_cast<double>(n.memory_mib),
                                    k * 1000.0 * n.gpus,
                                    k * n.gpus,
                                    k,
                                    k,
                                    k};
    for (int r = 0; r < kPerClass; ++r) glp_set_row_bnds(lp.get(), base + r, GLP_UP, 0, caps[r]);
    if (sizes.empty()) continue;
    // GPUs: whole GPUs of tasks plus GPUs filled by a pattern <= the class's GPUs; shares of each
    // size placed <= the places the patterns offer for that size.
    glp_set_row_bnds(lp.get(), base + kPerClass, GLP_UP, 0, k * n.gpus);
    for (size_t z = 0; z < sizes.size(); ++z)
      glp_set_row_bnds(lp.get(), base + kPerClass + 1 + static_cast<int>(z), GLP_UP, 0, 0);
  }
  std::vector<std::pair<size_t, size_t>> column{{0, 0}};  // (shape, class) of column i
  std::vector<int> ia{0}, ja{0};
  std::vector<double> ar{0};
  for (size_t s = 0; s < shp.size(); ++s) {
    const TraceTask& t = *shp[s].shape;
    for (size_t c = 0; c < cls.size(); ++c) {
      const TraceNode& n = *cls[c].shape;
      if (!Fits(t, n)) continue;
      shape_has_column[s] = true;
      const int col = glp_add_cols(lp.get(), 1);
      column.emplace_back(s, c);
      glp_set_col_bnds(lp.get(), col, GLP_DB, 0, static_cast<double>(shp[s].count));
      if (!min_failure) glp_set_obj_coef(lp.get(), col, static_cast<double>(t.total_gpu_milli()));
      if (options.integer) glp_set_col_kind(lp.get(), col, GLP_IV);
      auto put = [&](int row, double v) {
        if (v == 0) return;
        ia.push_back(row);
        ja.push_back(col);
        ar.push_back(v);
      };
      const int base = shape_rows + per_class * static_cast<int>(c) + 1;
      put(static_cast<int>(s) + 1, 1);
      if (min_failure) {
        if (must_row[s] > 0) put(shape_rows + class_rows + must_row[s], 1);
        put(target_row, static_cast<double>(t.total_gpu_milli()));
      }
      put(base + 0, static_cast<double>(t.cpu_milli));
      put(base + 1, static_cast<double>(t.memory_mib));
      put(base + 2, static_cast<double>(t.total_gpu_milli()));
      put(base + 3, static_cast<double>(ExclusiveGpus(t)));
      put(base + 4, 2 * t.cpu_milli > n.cpu_milli ? 1 : 0);
      put(base + 5, 2 * t.memory_mib > n.memory_mib ? 1 : 0);
      put(base + 6, 2 * t.num_gpu > n.gpus ? 1 : 0);
      if (!sizes.empty() && t.num_gpu > 0) {
        if (t.gpu_milli >= 1000) {
          put(base + kPerClass, t.num_gpu);
        } else {
          const auto z = std::find(sizes.begin(), sizes.end(), t.gpu_milli) - sizes.begin();
          put(base + kPerClass + 1 + static_cast<int>(z), t.num_gpu);
        }
      }
    }
  }
  // Pattern columns: how many GPUs of the class are filled that way.
  for (size_t c = 0; c < cls.size() && !sizes.empty(); ++c) {
    if (cls[c].shape->gpus <= 0) continue;
    const int base = shape_rows + per_class * static_cast<int>(c) + 1;
    for (const auto& pat : patterns) {
      const int col = glp_add_cols(lp.get(), 1);
      column.emplace_back(shp.size(), c);  // not a task shape
      glp_set_col_bnds(lp.get(), col, GLP_LO, 0, 0);
      if (options.integer) glp_set_col_kind(lp.get(), col, GLP_IV);
      ia.push_back(base + kPerClass);
      ja.push_back(col);
      ar.push_back(1);
      for (size_t z = 0; z < sizes.size(); ++z)
        if (pat[z] > 0) {
          ia.push_back(base + kPerClass + 1 + static_cast<int>(z));
          ja.push_back(col);
          ar.push_back(-pat[z]);
        }
    }
  }
  for (size_t s = 0; s < shp.size(); ++s) {
    const double n = static_cast<double>(shp[s].count);
    const bool fixed = options.place_cpu_only && shp[s].shape->num_gpu == 0 && shape_has_column[s];
    const double lo = fixed ? n : (min_failure ? 0.0 : static_cast<double>(must[s]));
    if (lo > 0 && !shape_has_column[s])
      return FailedPrecondition("a task that must be placed fits no node");
    if (min_failure && must_row[s] > 0) {
      // placed + failed >= must; the failed ones cost their GPU milli.
      const int row = shape_rows + class_rows + must_row[s];
      glp_set_row_bnds(lp.get(), row, GLP_LO, static_cast<double>(must[s]), 0);
      const int col = glp_add_cols(lp.get(), 1);
      column.emplace_back(shp.size() + s, cls.size());  // shape s failed
      glp_set_col_bnds(lp.get(), col, GLP_DB, 0, static_cast<double>(must[s]));
      glp_set_obj_coef(lp.get(), col, static_cast<double>(shp[s].shape->total_gpu_milli()));
      if (options.integer) glp_set_col_kind(lp.get(), col, GLP_IV);
      ia.push_back(row);
      ja.push_back(col);
      ar.push_back(1);
    }
    glp_set_row_bnds(lp.get(), static_cast<int>(s) + 1,
                     lo >= n ? GLP_FX : (lo > 0 ? GLP_DB : GLP_UP), lo, n);
  }
  if (min_failure)
    glp_set_row_bnds(lp.get(), target_row, GLP_LO, static_cast<double>(options.target_milli), 0);
  if (glp_get_num_cols(lp.get()) == 0) return out;  // nothing fits anywhere
  glp_load_matrix(lp.get(), static_cast<int>(ia.size()) - 1, ia.data(), ja.data(), ar.data());
  glp_scale_prob(lp.get(), GLP_SF_AUTO);

  glp_smcp smcp;
  glp_init_smcp(&smcp);
  smcp.msg_lev = GLP_MSG_OFF;
  smcp.presolve = GLP_ON;
  const int rc = glp_simplex(lp.get(), &smcp);
  const int st = glp_get_status(lp.get());
  if (rc == GLP_ENOPFS || st == GLP_NOFEAS)
    return FailedPrecondition(
        min_failure ? "no placement allocates the target"
                    : "the tasks that must be placed (without GPUs, or arrived early) cannot all "
                      "be placed");
  if (rc != 0 || st != GLP_OPT)
    return Internal("GLPK simplex did not reach an optimum (rc ", rc, ", status ", st, ")");
  out.lp_milli = glp_get_obj_val(lp.get());

  if (options.integer) {
    glp_iocp iocp;
    glp_init_iocp(&iocp);
    iocp.msg_lev = GLP_MSG_OFF;
    iocp.presolve = GLP_ON;
    iocp.tm_lim = static_cast<int>(options.time_limit_s * 1000);
    const int irc = glp_intopt(lp.get(), &iocp);
    if (irc == 0 && glp_mip_status(lp.get()) == GLP_OPT) {
      out.integer_optimal = true;
      out.integer_milli = glp_mip_obj_val(lp.get());
    }
  }
  for (int col = 1; col < static_cast<int>(column.size()); ++col) {
    const double v =
        out.integer_optimal ? glp_mip_col_val(lp.get(), col) : glp_get_col_prim(lp.get(), col);
    if (v <= 1e-9) continue;
    const auto [s, c] = column[col];
    if (c == cls.size()) out.failed[ShapeOf(*shp[s - shp.size()].shape)] = v;
    if (s >= shp.size()) continue;  // a pattern or failure column
    out.placed[ShapeOf(*shp[s].shape)][ClassOf(*cls[c].shape)] = v;
  }
  return out;
}

StatusOr<OfflinePacking> PackOffline(const RunPlan& plan, const std::vector<TraceTask>& tasks,
                                     size_t events, const std::string& policy,
                                     const std::string& order, const PackingBound* guide) {
  if (order != "gpu-desc" && order != "cpu-first" && order != "guided")
    return InvalidArgument("unknown offline order '", order, "' (gpu-desc, cpu-first, guided)");
  if (order == "guided" && guide == nullptr)
    return InvalidArgument("the guided order needs a relaxation solution");
  events = std::min(events, plan.order.size());
  std::vector<size_t> ev(events);
  std::iota(ev.begin(), ev.end(), size_t{0});
  const bool cpu_first = order == "cpu-first";  // "guided" sorts as gpu-desc
  auto key = [&](size_t e) {
    const TraceTask& t = tasks[plan.order[e]];
    const bool gpu_less = t.num_gpu == 0;
    return std::make_tuple(gpu_less != cpu_first, -t.total_gpu_milli(), -int64_t{t.gpu_milli}, e);
  };
  std::sort(ev.begin(), ev.end(), [&](size_t a, size_t b) { return key(a) < key(b); });

  scheduler::SchedulerOptions so;
  so.policy = policy;
  so.seed = 0;
  HAMI_ASSIGN_OR_RETURN(auto sched, scheduler::Scheduler::Create(so));
  for (const auto& n : plan.nodes) sched->UpsertNode(n);
  OfflinePacking out;
  out.policy = policy;
  out.order = order;
  // Node names per class, and what is left of the guide's quota per shape and class.
  std::map<NodeClassKey, std::vector<std::string>> names;
  for (const auto& n : plan.nodes) {
    TraceNode shape;
    shape.cpu_milli = n.cpu_milli;
    shape.memory_mib = n.memory_mib;
    shape.gpus = static_cast<int>(n.devices.size());
    if (!n.devices.empty()) shape.model = n.devices[0].type, shape.vendor = n.devices[0].vendor;
    if (shape.vendor == core::kNvidiaVendor) shape.vendor.clear();
    names[ClassOf(shape)].push_back(n.name);
  }
  std::map<TaskShapeKey, std::map<NodeClassKey, double>> quota;
  if (order == "guided") quota = guide->placed;
  scheduler::ScheduleOptions opts;
  for (size_t e : ev) {
    const TraceTask& t = tasks[plan.order[e]];
    core::PodRequest pod = plan.pods[plan.order[e]];
    pod.uid = "t" + std::to_string(e);
    scheduler::Decision d;
    if (auto q = quota.find(ShapeOf(t)); q != quota.end()) {
      std::vector<std::pair<double, NodeClassKey>> classes;
      for (const auto& [c, left] : q->second)
        if (left > 1e-6) classes.emplace_back(-left, c);
      std::sort(classes.begin(), classes.end());
      for (const auto& [left, c] : classes) {
        HAMI_ASSIGN_OR_RETURN(d, sched->Schedule(pod, &names[c], opts));
        if (!d.node.empty()) {
          q->second[c] = std::max(0.0, q->second[c] - 1);
          break;
        }
      }
    }
    if (d.node.empty()) {
      HAMI_ASSIGN_OR_RETURN(d, sched->Schedule(pod, nullptr, opts));
    }
    if (d.node.empty()) {
      ++(t.num_gpu > 0 ? out.gpu_failed : out.cpu_only_failed);
      continue;
    }
    HAMI_RETURN_IF_ERROR(sched->Reserve(pod, d));
    out.used_milli += t.total_gpu_milli();
  }
  return out;
}

StatusOr<OfflinePacking> PackDirect(const std::vector<TraceNode>& nodes,
                                    const std::vector<TraceTask>& tasks,
                                    const std::vector<int>& prefix, const PackingBound* guide) {
  struct State {
    int64_t cpu = 0, mem = 0, free_total = 0;
    std::vector<int> free;  // per GPU
  };
  std::vector<State> st(nodes.size());
  std::map<NodeClassKey, std::vector<size_t>> by_class;
  for (size_t i = 0; i < nodes.size(); ++i) {
    st[i] = {nodes[i].cpu_milli, nodes[i].memory_mib, int64_t{nodes[i].gpus} * 1000,
             std::vector<int>(static_cast<size_t>(std::max(0, nodes[i].gpus)), 1000)};
    by_class[ClassOf(nodes[i])].push_back(i);
  }
  std::vector<size_t> ev(prefix.size());
  std::iota(ev.begin(), ev.end(), size_t{0});
  for (int i : prefix)
    if (i < 0 || static_cast<size_t>(i) >= tasks.size())
      return InvalidArgument("task index ", i, " is out of range");
  auto key = [&](size_t e) {
    const TraceTask& t = tasks[prefix[e]];
    return std::make_tuple(t.num_gpu == 0, -t.num_gpu, -t.gpu_milli, -t.cpu_milli, -t.memory_mib,
                           e);
  };
  std::sort(ev.begin(), ev.end(), [&](size_t a, size_t b) { return key(a) < key(b); });
  std::map<TaskShapeKey, std::map<NodeClassKey, double>> quota;
  if (guide != nullptr) quota = guide->placed;

  OfflinePacking out;
  out.policy = "none";
  out.order = "direct";
  std::vector<int> fit, best_gpus;
  // The best node of `candidates` for `t` (and its GPUs in best_gpus); -1 when none fits.
  auto search = [&](const TraceTask& t, const std::vector<size_t>& candidates) {
    using Key = std::tuple<int64_t, int64_t, int64_t, size_t>;
    Key best{0, 0, 0, 0};
    long best_node = -1;
    for (size_t n : candidates) {
      const State& s = st[n];
      if (s.cpu < t.cpu_milli || s.mem < t.memory_mib || !Fits(t, nodes[n])) continue;
      int64_t left = 0;
      fit.clear();
      if (t.num_gpu > 0) {
        for (size_t g = 0; g < s.free.size(); ++g)
          if (s.free[g] >= t.gpu_milli) fit.push_back(static_cast<int>(g));
        if (fit.size() < static_cast<size_t>(t.num_gpu)) continue;
        std::stable_sort(fit.begin(), fit.end(),
                         [&](int a, int b) { return s.free[a] < s.free[b]; });
        fit.resize(static_cast<size_t>(t.num_gpu));
        for (int g : fit) left += s.free[g] - t.gpu_milli;
      }
      const Key k{left, s.free_total - t.total_gpu_milli(), s.cpu - t.cpu_milli, n};
      if (best_node < 0 || k < best) best = k, best_node = static_cast<long>(n), best_gpus = fit;
    }
    return best_node;
  };
  std::vector<size_t> candidates, all(nodes.size());
  std::iota(all.begin(), all.end(), size_t{0});
  for (size_t e : ev) {
    const TraceTask& t = tasks[prefix[e]];
    long n = -1;
    std::map<NodeClassKey, double>* q = nullptr;
    if (auto it = quota.find(ShapeOf(t)); it != quota.end()) {
      q = &it->second;
      candidates.clear();
      for (const auto& [c, left] : *q)
        if (left >= 1 - 1e-6)
          candidates.insert(candidates.end(), by_class[c].begin(), by_class[c].end());
      std::sort(candidates.begin(), candidates.end());
      n = search(t, candidates);
    }
    if (n < 0) n = search(t, all);
    if (n < 0) {
      ++(t.num_gpu > 0 ? out.gpu_failed : out.cpu_only_failed);
      continue;
    }
    State& s = st[static_cast<size_t>(n)];
    s.cpu -= t.cpu_milli;
    s.mem -= t.memory_mib;
    for (int g : best_gpus) s.free[static_cast<size_t>(g)] -= t.gpu_milli;
    s.free_total -= t.total_gpu_milli();
    out.used_milli += t.total_gpu_milli();
    if (q != nullptr)
      if (auto c = q->find(ClassOf(nodes[static_cast<size_t>(n)])); c != q->end())
        c->second = std::max(0.0, c->second - 1);
  }
  return out;
}

StatusOr<SeedBound> BoundSeed(const std::vector<TraceNode>& nodes,
                              const std::vector<TraceTask>& tasks, uint64_t seed,
                              const BoundSeedOptions& options) {
  RunConfig config;
  config.policy = options.policy;
  config.seed = seed;
  config.inflation = options.inflation;
  config.record_placements = true;
  HAMI_ASSIGN_OR_RETURN(RunResult run, RunInflation(nodes, tasks, config));
  Rng rng(seed);
  HAMI_ASSIGN_OR_RETURN(RunPlan plan, PlanRun(nodes, tasks, config, rng));

  SeedBound out;
  out.seed = seed;
  out.capacity_milli = plan.capacity_milli;
  out.online_a100 = run.curve.size() > 100 ? run.curve[100] : 0;
  const double cap = static_cast<double>(plan.capacity_milli);
  // Cumulative arrived demand after each event, and the events of A(100)'s bucket.
  std::vector<int64_t> arrived(plan.order.size());
  std::vector<size_t> bucket, window;  // arrive% = 100, and 99..101 (AllocationCurve's fallback)
  int64_t sum = 0;
  for (size_t i = 0; i < plan.order.size(); ++i) {
    sum += tasks[plan.order[i]].total_gpu_milli();
    arrived[i] = sum;
    if (sum <= plan.capacity_milli) out.events = i + 1, out.arrived_milli = sum;
    const double k = std::round(100.0 * static_cast<double>(sum) / cap);
    if (k == 100) bucket.push_back(i);
    if (k >= 99 && k <= 101) window.push_back(i);
  }
  if (bucket.empty()) bucket = window;
  for (size_t i = 0; i < out.events; ++i) {
    const TaskPlacement& p = run.placements[i];
    if (!p.node.empty())
      out.online_used_milli += tasks[p.task].total_gpu_milli();
    else if (tasks[p.task].num_gpu == 0)
      ++out.online_cpu_only_failed;
  }
  out.online_first_failure = out.events;
  for (size_t i = 0; i < out.events; ++i)
    if (run.placements[i].node.empty()) {
      out.online_first_failure = i;
      break;
    }
  auto arrived_before = [&](size_t i) {
    return i == 0 ? 0.0 : 100.0 * static_cast<double>(arrived[i - 1]) / cap;
  };
  out.online_first_failure_arrival = arrived_before(out.online_first_failure);
  auto prefix = [&](size_t events) {
    return std::vector<int>(plan.order.begin(), plan.order.begin() + static_cast<long>(events));
  };
  HAMI_ASSIGN_OR_RETURN(out.bound,
                        PackingUpperBound(nodes, tasks, prefix(out.events), options.bound));
  // Placements that fail no task arriving before a point.
  std::vector<size_t> horizon_events;
  for (double pct : options.no_failure_before) {
    size_t k = 0;  // tasks whose arrival completes a demand of at most pct % of the capacity
    while (k < out.events && 100.0 * static_cast<double>(arrived[k]) / cap <= pct) ++k;
    horizon_events.push_back(k);
  }
  horizon_events.push_back(out.online_first_failure);
  for (size_t k : horizon_events) {
    BoundOptions bo = options.bound;
    bo.must_place = k;
    SeedBound::Horizon h;
    h.arrival = arrived_before(k);
    h.must_place = k;
    for (size_t i = 0; i < k; ++i)
      if (run.placements[i].node.empty())
        h.online_failed_milli += tasks[run.placements[i].task].total_gpu_milli();
    auto b = PackingUpperBound(nodes, tasks, prefix(out.events), bo);
    if (b.ok()) {
      h.milli = b->best_milli();
    } else if (absl::IsFailedPrecondition(b.status())) {
      h.feasible = false;
    } else {
      return b.status();
    }
    if (options.target >= 0) {
      bo.target_milli = static_cast<int64_t>(std::ceil(cap * (100 - options.target) / 100));
      auto m = PackingUpperBound(nodes, tasks, prefix(out.events), bo);
      if (m.ok()) {
        h.min_failed_milli = std::max(0.0, m->best_milli());  // the LP rounds to -1e-13
        h.min_failed = std::move(m->failed);
      } else if (!absl::IsFailedPrecondition(m.status()))
        return m.status();
    }
    out.horizons.push_back(h);
  }

  if (!bucket.empty()) {
    const size_t k = static_cast<size_t>(std::max(1, options.checkpoints));
    double total = 0;
    size_t done = 0;
    for (size_t c = 0; c < k && done < bucket.size(); ++c) {
      const size_t end = std::max(done + 1, (c + 1) * bucket.size() / k);
      const size_t last = bucket[end - 1];
      HAMI_ASSIGN_OR_RETURN(PackingBound b,
                            PackingUpperBound(nodes, tasks, prefix(last + 1), options.bound));
      for (size_t j = done; j < end; ++j) {
        const double ub = std::min({b.best_milli(), static_cast<double>(arrived[bucket[j]]), cap});
        total += 100.0 * ub / cap;
      }
      done = end;
    }
    out.a100_bound = total / static_cast<double>(bucket.size());
  } else {
    out.a100_bound = 100;  // A(100) repeats an earlier point: nothing tighter is claimed
  }
  for (const auto& policy : options.offline_policies)
    for (const auto& order : options.offline_orders) {
      HAMI_ASSIGN_OR_RETURN(OfflinePacking p,
                            PackOffline(plan, tasks, out.events, policy, order, &out.bound));
      out.offline.push_back(std::move(p));
    }
  HAMI_ASSIGN_OR_RETURN(OfflinePacking direct,
                        PackDirect(nodes, tasks, prefix(out.events), &out.bound));
  out.offline.push_back(std::move(direct));
  return out;
}

}  // namespace hami::sim
