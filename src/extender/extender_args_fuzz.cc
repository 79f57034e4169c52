// Fuzz target: the extender's request parsers, the whole Filter path (dry run and cache-capable,
// without an API server) and the preemption verb never crash on any body, and what they accept
// re-serialises to JSON that parses back to the same thing.
#include <cstdint>
#include <memory>
#include <string>

#include "core/fuzz_check.h"
#include "extender/extender.h"
#include "extender/wire.h"

using namespace hami;
using namespace hami::extender;

namespace {

struct World {
  std::unique_ptr<scheduler::Scheduler> sched = std::move(*scheduler::Scheduler::Create({}));
  FakeClock clock;
  std::unique_ptr<ClusterState> state;
  std::unique_ptr<Extender> ext;
  World() {
    StateOptions so;
    so.clock = &clock;
    state = std::make_unique<ClusterState>(*sched, so);
    state->OnNode(Json::parse(
        R"({"metadata":{"name":"n1","annotations":{"hami.io/node-nvidia-register":"[{\"id\":\"GPU-a\",\"count\":4,\"devmem\":16000,\"devcore\":100,\"type\":\"NVIDIA-T4\",\"health\":true}]"}}})"));
    ExtenderOptions eo;
    eo.clock = &clock;
    ext = std::make_unique<Extender>(*sched, *state, nullptr, eo);
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static World* world = new World();
  const std::string body(reinterpret_cast<const char*>(data), size);
  auto args = ParseExtenderArgs(body);
  auto dom = ParseExtenderArgsDom(body);
  FUZZ_CHECK(args.ok() == dom.ok(),
             "the fast ExtenderArgs parse accepts exactly what the DOM parse does");
  if (args.ok())
    FUZZ_CHECK(
        args->pod == dom->pod && args->nodes == dom->nodes && args->node_names == dom->node_names,
        "the fast ExtenderArgs parse reads what the DOM parse reads");
  else
    FUZZ_CHECK(args.status() == dom.status(), "the same error either way");
  if (args.ok()) {
    auto again = ParseExtenderArgs(ToJson(*args).dump());
    FUZZ_CHECK(again.ok(), "re-serialised ExtenderArgs parse");
    FUZZ_CHECK(again->CandidateNames() == args->CandidateNames(),
               "candidates survive a round trip");
    ExtenderFilterResult r = world->ext->Filter(*args);
    if (r.error.empty() && r.node_names)
      FUZZ_CHECK(r.node_names->size() <= args->CandidateNames().size() || !args->node_names,
                 "no invented nodes");
    const std::string reply = SerializeFilterResult(r);
    auto back = ParseExtenderFilterResult(reply);
    FUZZ_CHECK(back.ok(), "a filter result parses back");
    FUZZ_CHECK(reply == ToJson(r).dump(-1, ' ', false, Json::error_handler_t::replace),
               "the direct reply encoding is nlohmann's dump byte for byte");
    // Keep the cache small: give the reservation back.
    const Json* meta = FindKeyFold(args->pod, "metadata");
    if (meta && meta->is_object() && meta->contains("uid") && (*meta)["uid"].is_string()) {
      const std::string uid = (*meta)["uid"].get<std::string>();
      world->state->Drop(uid);
      (void)world->sched->Unreserve(uid);
    }
  }
  auto bind = ParseExtenderBindingArgs(body);
  if (bind.ok()) {
    auto again = ParseExtenderBindingArgs(ToJson(*bind).dump());
    FUZZ_CHECK(again.ok() && again->node == bind->node && again->pod_uid == bind->pod_uid,
               "binding args round trip");
  }
  auto pre = ParseExtenderPreemptionArgs(body);
  if (pre.ok()) {
    auto again = ParseExtenderPreemptionArgs(ToJson(*pre).dump());
    FUZZ_CHECK(again.ok() && again->node_to_meta_victims == pre->node_to_meta_victims &&
                   again->node_to_victims.has_value() == pre->node_to_victims.has_value(),
               "preemption args round trip");
  }
  const HttpResponse preempted = world->ext->HandlePreempt(body);
  if (preempted.status == 200) {
    FUZZ_CHECK(pre.ok(), "only a request that parses is answered");
    auto result = ParseExtenderPreemptionResult(preempted.body);
    FUZZ_CHECK(result.ok(), "a preemption result parses back");
    for (const auto& [node, victims] : result->node_to_meta_victims) {
      const bool meta = pre->node_to_meta_victims && pre->node_to_meta_victims->count(node) != 0;
      const bool full = pre->node_to_victims && pre->node_to_victims->count(node) != 0;
      FUZZ_CHECK(meta || full, "no invented nodes in a preemption result");
      FUZZ_CHECK(!victims.pod_uids.empty(), "no node without victims");
    }
  } else {
    FUZZ_CHECK(preempted.status == 400, "a bad preemption request is a 400");
  }
  std::string reply = world->ext->HandleFilter(body);
  FUZZ_CHECK(ParseExtenderFilterResult(reply).ok(),
             "HandleFilter always answers a well-formed result");
  return 0;
}
