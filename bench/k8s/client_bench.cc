// k8s client round trips per second against the fake API server in the same process, over
// keep-alive HTTP on loopback. Both sides share the machine's cores, so these numbers are a floor
// for the client and a ceiling for what the extender's bind path can ask of one connection pool.
//   build/release/bench/k8s/k8s_client_bench --benchmark_min_time=2s
#include <benchmark/benchmark.h>

#include <atomic>

#include "k8s/client.h"
#include "k8s/informer.h"
#include "k8s/testing/fake_apiserver.h"
#include "k8s/testing/test_util.h"

namespace hami::k8s {
namespace {

using testing::MakePod;

struct Env {
  testing::FakeApiServer fake;
  std::unique_ptr<Client> client;
  Env() {
    if (!fake.Start().ok()) std::abort();
    ClientConfig cfg;
    cfg.server = fake.url();
    cfg.qps = 0;  // measure the transport, not the limiter
    client = std::move(*Client::Create(cfg));
  }
  static Env& Get() {
    static Env* env = new Env();
    return *env;
  }
};

void BM_GetPod(benchmark::State& state) {
  Env& env = Env::Get();
  if (state.thread_index() == 0) (void)env.fake.Upsert("pods", MakePod("bench", "get-me"));
  for (auto _ : state) {
    auto p = env.client->Get(kPods, "bench", "get-me");
    if (!p.ok()) state.SkipWithError(std::string(p.status().message()).c_str());
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_GetPod)->UseRealTime()->Threads(1)->Threads(4);

void BM_PatchAnnotation(benchmark::State& state) {
  Env& env = Env::Get();
  const std::string name = "patch-" + std::to_string(state.thread_index());
  (void)env.fake.Upsert("pods", MakePod("bench", name));
  int64_t i = 0;
  for (auto _ : state) {
    Json patch = {{"metadata", {{"annotations", {{"hami.io/bind-time", std::to_string(++i)}}}}}};
    auto p = env.client->Patch(kPods, "bench", name, PatchType::kMerge, patch);
    if (!p.ok()) state.SkipWithError(std::string(p.status().message()).c_str());
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_PatchAnnotation)->UseRealTime()->Threads(1)->Threads(4);

// What the extender does per pod: write the decision annotations, then bind.
void BM_PatchThenBind(benchmark::State& state) {
  Env& env = Env::Get();
  static std::atomic<int64_t> seq{0};
  for (auto _ : state) {
    state.PauseTiming();
    const std::string name = "bind-" + std::to_string(seq++);
    (void)env.fake.Upsert("pods", MakePod("bench", name));
    state.ResumeTiming();
    Json patch = {
        {"metadata",
         {{"annotations", {{"hami.io/vgpu-devices-allocated", "GPU-0,NVIDIA,4000,30:;"}}}}}};
    auto p = env.client->Patch(kPods, "bench", name, PatchType::kMerge, patch);
    Status b = env.client->Bind("bench", name, "", "node-1");
    if (!p.ok() || !b.ok()) state.SkipWithError("patch or bind failed");
  }
  state.SetItemsProcessed(state.iterations());
  state.SetLabel("items = pods (2 requests each)");
}
BENCHMARK(BM_PatchThenBind)->UseRealTime()->Threads(1)->Threads(4);

// Read-modify-write with conflict retry, uncontended.
void BM_MutateJsonPatch(benchmark::State& state) {
  Env& env = Env::Get();
  (void)env.fake.Upsert("pods", MakePod("bench", "mutate"));
  int64_t i = 0;
  MutateOptions mo;
  mo.mode = MutateOptions::Mode::kJson;
  for (auto _ : state) {
    auto r = env.client->Mutate(
        kPods, "bench", "mutate",
        [&](Json& pod) {
          pod["metadata"]["annotations"]["n"] = std::to_string(++i);
          return OkStatus();
        },
        mo);
    if (!r.ok()) state.SkipWithError(std::string(r.status().message()).c_str());
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_MutateJsonPatch)->UseRealTime();

// Watch delivery: how fast an informer applies a burst of changes made on the server.
void BM_InformerEvents(benchmark::State& state) {
  Env& env = Env::Get();
  const int burst = static_cast<int>(state.range(0));
  InformerOptions o;
  o.resource = kNodes;
  Informer inf(*env.client, o);
  std::atomic<int64_t> seen{0};
  InformerHandlers h;
  h.on_add = [&](const Json&) { ++seen; };
  h.on_update = [&](const Json&, const Json&) { ++seen; };
  inf.AddHandlers(h);
  inf.Start();
  inf.WaitForSync(std::chrono::seconds(30));
  int64_t round = 0;
  for (auto _ : state) {
    const int64_t target = seen.load() + burst;
    for (int i = 0; i < burst; ++i) {
      Json node = testing::MakeNode("n" + std::to_string(i));
      node["metadata"]["labels"]["round"] = std::to_string(round);
      (void)env.fake.Upsert("nodes", node);
    }
    ++round;
    while (seen.load() < target) std::this_thread::yield();
  }
  inf.Stop();
  state.SetItemsProcessed(state.iterations() * burst);
}
BENCHMARK(BM_InformerEvents)->Arg(1000)->UseRealTime();

}  // namespace
}  // namespace hami::k8s

BENCHMARK_MAIN();
