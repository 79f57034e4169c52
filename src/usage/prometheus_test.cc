// The Prometheus source of `hami recommend` (usage/prometheus.h) as tables: the queries, the URL,
// the answer parser (good answers, garbage, bounds) and the trace the reads make.
#include "usage/prometheus.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace hami::usage {
namespace {

using Json = nlohmann::json;

constexpr int64_t kMidnight = 1764720000;  // 2025-12-03T00:00:00Z

TEST(Prometheus, Queries) {
  struct Case {
    PromRead read;
    std::string ns;
    int64_t step;
    std::string want;  // the query, or the error's start
    bool ok;
  };
  const Case cases[] = {
      {PromRead::kMemory, "", 60,
       "sum by (namespace, pod) (max_over_time(hami_vgpu_memory_used_bytes[59s]))", true},
      {PromRead::kDuty, "ml", 60,
       "sum by (namespace, pod) "
       "(avg_over_time(hami_container_device_utilization_ratio{namespace=\"ml\"}[59s]))",
       true},
      {PromRead::kMemory, "ml\"} or vector(1) #", 60, "namespace 'ml\"} or vector(1) #'", false},
      {PromRead::kMemory, "ML", 60, "namespace 'ML'", false},
      {PromRead::kMemory, "ml", 1, "step 1 s", false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.want);
    auto q = PromQuery(c.read, c.ns, c.step);
    ASSERT_EQ(q.ok(), c.ok) << q.status();
    if (c.ok)
      EXPECT_EQ(*q, c.want);
    else
      EXPECT_EQ(q.status().message().rfind(c.want, 0), 0u) << q.status();
  }
}

TEST(Prometheus, RangeUrl) {
  const PromWindow w{kMidnight, kMidnight + 3600, 60};
  struct Case {
    std::string base;
    PromWindow window;
    std::string want;  // the URL, or part of the error
    bool ok;
  };
  const Case cases[] = {
      {"http://prom:9090", w,
       "http://prom:9090/api/v1/query_range?query=a%20b%7B%22x%22%7D&start=1764720000&end="
       "1764723600&step=60",
       true},
      {"https://h/prefix/", w, "https://h/prefix/api/v1/query_range?query=", true},
      {"prom:9090", w, "is not http(s)://", false},
      {"http://h/?x=1", w, "is not http(s)://", false},
      {"http://h", {kMidnight, kMidnight, 60}, "window of 0 s", false},
      {"http://h", {kMidnight, kMidnight + 8 * 86400, 60}, "at most 7 days", false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.base);
    auto u = PromRangeUrl(c.base, "a b{\"x\"}", c.window);
    ASSERT_EQ(u.ok(), c.ok) << u.status();
    if (c.ok)
      EXPECT_EQ(u->rfind(c.want, 0), 0u) << *u;
    else
      EXPECT_NE(u.status().message().find(c.want), std::string::npos) << u.status();
  }
}

std::string Matrix(Json result) {
  if (!result.is_array()) result = Json::array({result});  // Matrix({one})
  return Json{{"status", "success"}, {"data", {{"resultType", "matrix"}, {"result", result}}}}
      .dump();
}

Json Series(const std::string& ns, const std::string& pod, const Json& values) {
  return Json{{"metric", {{"namespace", ns}, {"pod", pod}}}, {"values", values}};
}

TEST(Prometheus, ParseMatrix) {
  struct Case {
    const char* name;
    std::string body;
    std::string error;  // "" = parses
  };
  const Json good = Series("ml", "web-0", {{kMidnight, "1048576"}, {kMidnight + 60.0, "2.5e1"}});
  const Case cases[] = {
      {"two points", Matrix({good}), ""},
      {"no series", Matrix(Json::array()), ""},
      {"not JSON", "<html>502 Bad Gateway</html>", "is not a JSON object (starts '<html>502"},
      {"control bytes are not echoed", "404 page not found\n\x1b[2J",
       "(starts '404 page not found??[2J')"},
      {"an error answer",
       R"({"status":"error","errorType":"bad_data","error":"1:10: parse error"})",
       "Prometheus: \"bad_data\": \"1:10: parse error\""},
      {"no status", R"({"data":{}})", "status is not \"success\""},
      {"a vector", R"({"status":"success","data":{"resultType":"vector","result":[]}})",
       "resultType is not \"matrix\""},
      {"result not a list", R"({"status":"success","data":{"resultType":"matrix","result":{}}})",
       "data.result is not a list"},
      {"series not an object", Matrix({1}), "series 0 is not an object"},
      {"no values", Matrix({{{"metric", {{"namespace", "ml"}, {"pod", "p"}}}}}),
       "lacks metric or values"},
      {"no pod label", Matrix({{{"metric", {{"namespace", "ml"}}}, {"values", Json::array()}}}),
       "has no pod label"},
      {"a label that is no name", Matrix({Series("ml", "p\"od", Json::array())}),
       "is not a valid name"},
      {"a point of one member", Matrix({Series("ml", "p", {{kMidnight}})}),
       "point 0 is not [time, \"value\"]"},
      {"a value as a number", Matrix({Series("ml", "p", {{kMidnight, 3}})}),
       "value 3 is not a number >= 0"},
      {"NaN", Matrix({Series("ml", "p", {{kMidnight, "NaN"}})}), "value \"NaN\" is not"},
      {"+Inf", Matrix({Series("ml", "p", {{kMidnight, "+Inf"}})}), "value \"+Inf\" is not"},
      {"1e999", Matrix({Series("ml", "p", {{kMidnight, "1e999"}})}), "value \"1e999\" is not"},
      {"negative", Matrix({Series("ml", "p", {{kMidnight, "-1"}})}), "is not a number >= 0"},
      {"trailing text", Matrix({Series("ml", "p", {{kMidnight, "12abc"}})}), "is not a number"},
      {"time going back", Matrix({Series("ml", "p", {{kMidnight + 60.0, "1"}, {kMidnight, "1"}})}),
       "(ml/p) point 1: time does not increase"},
      {"a time in the far future", Matrix({Series("ml", "p", {{1e12, "1"}})}), "bad time"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto r = ParsePromMatrix(c.body);
    if (c.error.empty()) {
      ASSERT_TRUE(r.ok()) << r.status();
      continue;
    }
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find(c.error), std::string::npos) << r.status();
  }
  auto r = ParsePromMatrix(Matrix({good}));
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->size(), 1u);
  EXPECT_EQ((*r)[0].pod, "web-0");
  EXPECT_EQ((*r)[0].points,
            (std::vector<std::pair<int64_t, double>>{{kMidnight, 1048576}, {kMidnight + 60, 25}}));
  // Bounds.
  PromLimits small;
  small.max_bytes = 10;
  EXPECT_FALSE(ParsePromMatrix(Matrix({good}), small).ok());
  small = {};
  small.max_series = 1;
  EXPECT_FALSE(ParsePromMatrix(Matrix({good, good}), small).ok());
  small = {};
  small.max_points = 1;
  EXPECT_FALSE(ParsePromMatrix(Matrix({good}), small).ok());
}

TEST(Prometheus, WorkloadOf) {
  const std::pair<const char*, const char*> cases[] = {
      {"web-5d4f8c7b9-x2x7k", "ml/web"},
      {"sd-serving-v2-7f9c6d8b5-qwz4t", "ml/sd-serving-v2"},
      {"db-0", "ml/db"},
      {"db-12", "ml/db"},
      {"solo", "ml/solo"},
      {"web-5d4f8c7b9-xaxyz", "ml/web-5d4f8c7b9-xaxyz"},  // a vowel: not generated
      {"web-5d4-x2x7k", "ml/web-5d4-x2x7k"},              // hash too short
      {"-0", "ml/-0"},
  };
  for (const auto& [pod, want] : cases) EXPECT_EQ(PromWorkloadOf("ml", pod), want) << pod;
}

TEST(Prometheus, OwnerQueries) {
  struct Case {
    PromOwnerRead read;
    std::string ns;
    int64_t range_s;
    std::string want;  // the query, or the error's start
  };
  const Case cases[] = {
      {PromOwnerRead::kPod, "", 21600,
       "max by (namespace, pod, owner_kind, owner_name, owner_is_controller) "
       "(max_over_time(kube_pod_owner[21600s]))"},
      {PromOwnerRead::kReplicaSet, "ml", 3600,
       "max by (namespace, replicaset, owner_kind, owner_name, owner_is_controller) "
       "(max_over_time(kube_replicaset_owner{namespace=\"ml\"}[3600s]))"},
      {PromOwnerRead::kPod, "ml\"} or vector(1) #", 60, "namespace 'ml\"} or vector(1) #'"},
      {PromOwnerRead::kPod, "ml", 0, "range 0 s"},
      {PromOwnerRead::kPod, "ml", 8 * 86400, "range 691200 s"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.want);
    auto q = PromOwnerQuery(c.read, c.ns, c.range_s);
    EXPECT_EQ(q.ok() ? *q : std::string(q.status().message()).substr(0, c.want.size()), c.want);
  }
}

Json Owner(const std::string& object_label, const std::string& ns, const std::string& object,
           const std::string& kind, const std::string& name, const std::string& controller) {
  return Json{{"metric",
               {{"namespace", ns},
                {object_label, object},
                {"owner_kind", kind},
                {"owner_name", name},
                {"owner_is_controller", controller}}},
              {"values", Json::array({Json::array({kMidnight, "1"})})}};
}

TEST(Prometheus, ParseOwners) {
  struct Case {
    const char* name;
    PromOwnerRead read;
    Json series;
    std::string error;  // "" = parses to `row`
    PromOwnerRow row;
  };
  const Case cases[] = {
      {"a pod of a ReplicaSet",
       PromOwnerRead::kPod,
       Owner("pod", "ml", "web-5d4f8c7b9-x2x7k", "ReplicaSet", "web-5d4f8c7b9", "true"),
       "",
       {"ml", "web-5d4f8c7b9-x2x7k", "ReplicaSet", "web-5d4f8c7b9", true}},
      {"a ReplicaSet of a Deployment",
       PromOwnerRead::kReplicaSet,
       Owner("replicaset", "ml", "web-5d4f8c7b9", "Deployment", "web", "true"),
       "",
       {"ml", "web-5d4f8c7b9", "Deployment", "web", true}},
      {"an owner that is not the controller",
       PromOwnerRead::kPod,
       Owner("pod", "ml", "p", "ConfigMap", "c", "false"),
       "",
       {"ml", "p", "ConfigMap", "c", false}},
      {"no owner (kube-state-metrics' <none>)",
       PromOwnerRead::kPod,
       Owner("pod", "ml", "solo", "<none>", "<none>", "<none>"),
       "",
       {"ml", "solo", "<none>", "<none>", false}},
      {"the pod label read as a ReplicaSet's",
       PromOwnerRead::kReplicaSet,
       Owner("pod", "ml", "p", "Job", "j", "true"),
       "has no replicaset label",
       {}},
      {"no owner_is_controller",
       PromOwnerRead::kPod,
       Json{{"metric",
             {{"namespace", "ml"}, {"pod", "p"}, {"owner_kind", "Job"}, {"owner_name", "j"}}}},
       "has no owner_is_controller label",
       {}},
      {"an owner name that is no name",
       PromOwnerRead::kPod,
       Owner("pod", "ml", "p", "Job", "J\"ob", "true"),
       "is not a valid name",
       {}},
      {"an owner kind that is no kind",
       PromOwnerRead::kPod,
       Owner("pod", "ml", "p", "Job,x", "j", "true"),
       "is not a valid name",
       {}},
      {"series not an object", PromOwnerRead::kPod, Json(1), "owner series 0 has no metric", {}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto r = ParsePromOwners(Matrix(Json::array({c.series})), c.read);
    if (c.error.empty()) {
      ASSERT_TRUE(r.ok()) << r.status();
      EXPECT_EQ(*r, std::vector<PromOwnerRow>{c.row});
    } else {
      EXPECT_NE(std::string(r.status().message()).find(c.error), std::string::npos) << r.status();
    }
  }
  EXPECT_FALSE(ParsePromOwners("<html>", PromOwnerRead::kPod).ok());  // the matrix checks hold
  PromLimits one;
  one.max_series = 1;
  const Json row = Owner("pod", "ml", "p", "Job", "j", "true");
  EXPECT_FALSE(ParsePromOwners(Matrix(Json::array({row, row})), PromOwnerRead::kPod, one).ok());
}

// The workload of each pod from its owners, as the webhook keys it at admission (WorkloadKeyOf):
// a Job's pod "train-x7k2p" is "ml/train" and a pod "worker-2" of no controller is itself, where
// the pod names alone (PromWorkloadOf) say "ml/train-x7k2p" and "ml/worker".
TEST(Prometheus, WorkloadsFromOwners) {
  struct Case {
    const char* name;
    std::vector<PromOwnerRow> pods, replicasets;
    std::string pod, want;  // "" want: the pod is not in the map
  };
  const std::vector<PromOwnerRow> deployment_rs = {
      {"ml", "web-5d4f8c7b9", "Deployment", "web", true}};
  const Case cases[] = {
      {"a Deployment's pod, through its ReplicaSet",
       {{"ml", "web-5d4f8c7b9-x2x7k", "ReplicaSet", "web-5d4f8c7b9", true}},
       deployment_rs,
       "ml/web-5d4f8c7b9-x2x7k",
       "ml/web"},
      {"a Deployment whose name looks like a StatefulSet pod",
       {{"ml", "sd-v2-7f9c6d8b5-qwz4t", "ReplicaSet", "sd-v2-7f9c6d8b5", true}},
       {{"ml", "sd-v2-7f9c6d8b5", "Deployment", "sd-v2", true}},
       "ml/sd-v2-7f9c6d8b5-qwz4t",
       "ml/sd-v2"},
      {"a ReplicaSet no row tells of: its name without the pod-template-hash",
       {{"ml", "web-5d4f8c7b9-x2x7k", "ReplicaSet", "web-5d4f8c7b9", true}},
       {},
       "ml/web-5d4f8c7b9-x2x7k",
       "ml/web"},
      {"a bare ReplicaSet (no controller of its own)",
       {{"ml", "cache-x2x7k", "ReplicaSet", "cache", true}},
       {{"ml", "cache", "<none>", "<none>", false}},
       "ml/cache-x2x7k",
       "ml/cache"},
      {"a bare ReplicaSet whose name ends like a hash keeps it",
       {{"ml", "cache-5d4f8c7b9-x2x7k", "ReplicaSet", "cache-5d4f8c7b9", true}},
       {{"ml", "cache-5d4f8c7b9", "<none>", "<none>", false}},
       "ml/cache-5d4f8c7b9-x2x7k",
       "ml/cache-5d4f8c7b9"},
      {"a Job's pod",
       {{"ml", "train-x7k2p", "Job", "train", true}},
       {},
       "ml/train-x7k2p",
       "ml/train"},
      {"a StatefulSet's pod", {{"ml", "db-0", "StatefulSet", "db", true}}, {}, "ml/db-0", "ml/db"},
      {"a DaemonSet's pod",
       {{"ml", "agent-q8vzt", "DaemonSet", "agent", true}},
       {},
       "ml/agent-q8vzt",
       "ml/agent"},
      {"no controller: the pod itself",
       {{"ml", "worker-2", "<none>", "<none>", false}},
       {},
       "ml/worker-2",
       "ml/worker-2"},
      {"an owner that is not the controller: the pod itself",
       {{"ml", "worker-2", "ConfigMap", "c", false}},
       {},
       "ml/worker-2",
       "ml/worker-2"},
      {"the controller among other owners",
       {{"ml", "train-x7k2p", "ConfigMap", "c", false},
        {"ml", "train-x7k2p", "Job", "train", true}},
       {},
       "ml/train-x7k2p",
       "ml/train"},
      {"the same name in another namespace is another workload",
       {{"other", "web-5d4f8c7b9-x2x7k", "ReplicaSet", "web-5d4f8c7b9", true}},
       deployment_rs,
       "other/web-5d4f8c7b9-x2x7k",
       "other/web"},
      {"a pod with no row", {{"ml", "db-0", "StatefulSet", "db", true}}, {}, "ml/db-1", ""},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const PromWorkloads w = PromWorkloadsOf(c.pods, c.replicasets);
    const auto it = w.find(c.pod);
    EXPECT_EQ(it == w.end() ? "" : it->second, c.want);
  }
}

TEST(Prometheus, TraceFromReads) {
  const PromWindow w{kMidnight + 3600, kMidnight + 3600 + 5 * 60, 60};
  auto at = [](int minute) { return static_cast<double>(kMidnight + 60 * minute); };
  const std::vector<PromSeries> mem = {
      // 1 GiB, a gap at minute 62, 1.5 GiB + 1 byte (rounded up to 1537 MiB)
      {"ml",
       "web-5d4f8c7b9-x2x7k",
       {{at(60), 1073741824.0}, {at(61), 1073741824.0}, {at(63), 1610612737.0}}},
      {"ml", "db-0", {{at(59), 5e9}, {at(64), 2097152.0}, {at(66), 1e9}}},  // outside: dropped
  };
  const std::vector<PromSeries> duty = {
      {"ml", "web-5d4f8c7b9-x2x7k", {{at(61), 12.34}, {at(62), 250.0}}},  // above 100: 100
  };
  int32_t first = 0;
  auto t = TraceFromProm(mem, duty, w, &first);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(first, 60);
  EXPECT_EQ(t->minutes, 65);
  ASSERT_EQ(t->pods.size(), 2u);
  const PodSeries& web = t->pods[0];
  EXPECT_EQ(web.name, "ml/web-5d4f8c7b9-x2x7k");
  EXPECT_EQ(t->workloads[static_cast<size_t>(web.workload)], "ml/web");
  EXPECT_EQ(web.first, 60);
  EXPECT_EQ(web.mem_mib, (std::vector<int32_t>{1024, 1024, 1024, 1537}));
  EXPECT_EQ(web.duty, (std::vector<int32_t>{1234, 1234, 10000, 10000}));  // leading step filled
  const PodSeries& db = t->pods[1];
  EXPECT_EQ(db.name, "ml/db-0");
  EXPECT_EQ(t->workloads[static_cast<size_t>(db.workload)], "ml/db");
  EXPECT_EQ(db.first, 64);
  EXPECT_EQ(db.mem_mib, (std::vector<int32_t>{2}));
  EXPECT_EQ(db.duty, (std::vector<int32_t>{0}));
  EXPECT_FALSE(TraceFromProm(mem, duty, {w.start_s, w.end_s, 30}, &first).ok());
  // With the owners read: db-0 is its StatefulSet's ("ml/database"); a pod they do not name keeps
  // the name's workload.
  const PromWorkloads owners = {{"ml/db-0", "ml/database"}};
  auto owned = TraceFromProm(mem, duty, w, &first, &owners);
  ASSERT_TRUE(owned.ok()) << owned.status();
  ASSERT_EQ(owned->pods.size(), 2u);
  EXPECT_EQ(owned->workloads[static_cast<size_t>(owned->pods[0].workload)], "ml/web");
  EXPECT_EQ(owned->workloads[static_cast<size_t>(owned->pods[1].workload)], "ml/database");
}

}  // namespace
}  // namespace hami::usage
