#include "usage/recommend.h"

#include <gtest/gtest.h>

#include "nlohmann/json.hpp"
#include "usage/synthetic.h"

namespace hami::usage {
namespace {

// The synthetic fleet of seed `seed` (60 replicas, 12 late ones, a day).
UsageTrace Fleet(uint64_t seed) {
  SyntheticOptions o;
  o.seed = seed;
  return SyntheticTrace(o);
}

RecommendOptions Opts(int32_t until, int32_t window = 0, int64_t card_mib = 80 * 1024) {
  RecommendOptions o;
  o.until_min = until;
  o.window_min = window;
  o.learn.card_mib = card_mib;
  return o;
}

// Two workloads: "a" (pods a1, a2) and "b" (b1, arriving at minute 3), memory rising per minute.
UsageTrace TwoWorkloads() {
  auto t = ParseUsageTrace(
      "minute,pod,duty_pct,mem_mib,workload\n"
      "0,a1,10,1000,a\n0,a2,0,1500,a\n"
      "1,a1,20,1100,a\n1,a2,0,1500,a\n"
      "2,a1,30,1200,a\n2,a2,0,1500,a\n"
      "3,a1,40,5000,a\n3,b1,50,700,b\n"
      "4,b1,60,800,b\n",
      "two.csv");
  EXPECT_TRUE(t.ok()) << t.status();
  return *t;
}

// ArrivalProfile: which pods count (arrived after the start, their whole window lived before
// `until`, their workload) and that only their first minutes do. Every pod is idle for its first
// 30 minutes and at 80 % after, so the profile's busiest duty says whether later rows leaked in.
TEST(Recommend, ArrivalProfileLearnsFromWholeFirstWindowsOnly) {
  struct Pod {
    int32_t first, minutes;
    int workload;
  };
  struct Case {
    const char* what;
    std::vector<Pod> pods;
    int32_t until, window;
    int64_t minutes;  // of the profile (0: empty)
    int32_t duty_all;
  };
  const std::vector<Case> cases = {
      {"there at the start: not an arrival", {{0, 200, 0}}, 200, 30, 0, 0},
      {"arrived, window lived", {{10, 200, 0}}, 200, 30, 30, 0},
      {"a 60-minute window sees the busy half", {{10, 200, 0}}, 200, 60, 60, 8000},
      {"window not over at until", {{10, 200, 0}}, 39, 30, 0, 0},
      {"window just over at until", {{10, 200, 0}}, 40, 30, 30, 0},
      {"left before its window was over", {{10, 20, 0}}, 200, 30, 0, 0},
      {"another workload's pod", {{10, 200, 1}}, 200, 30, 0, 0},
      {"two arrivals", {{10, 200, 0}, {50, 200, 0}}, 200, 30, 60, 0},
  };
  for (const Case& c : cases) {
    UsageTrace t;
    t.workloads = {"w", "other"};
    std::vector<PodSeries>& pods = t.pods;
    PodSeries start;  // the trace's first minute
    start.name = "s";
    start.workload = 1;
    start.duty = {0};
    start.mem_mib = {100};
    pods.push_back(start);
    for (const Pod& p : c.pods) {
      PodSeries s;
      s.name = "p" + std::to_string(pods.size());
      s.first = p.first;
      s.workload = p.workload;
      for (int32_t m = 0; m < p.minutes; ++m) {
        s.duty.push_back(m < 30 ? 0 : 8000);
        s.mem_mib.push_back(1000);
      }
      pods.push_back(std::move(s));
    }
    const UsageProfile a = ArrivalProfile(t, 0, 0, c.until, c.window, {}, 90);
    EXPECT_EQ(a.minutes, c.minutes) << c.what;
    if (a.minutes > 0) {
      EXPECT_EQ(a.duty_all, c.duty_all) << c.what;
    }
  }
}

// NewReplicaProfile: the arrivals' profile when any counts and it is not busier than the mix;
// the workload's peak kept either way.
TEST(Recommend, NewReplicaProfileTakesLighterArrivalsOnly) {
  auto profile = [](int64_t minutes, int32_t duty_all, int32_t peak) {
    UsageProfile p;
    p.minutes = minutes;
    p.duty_all = duty_all;
    p.mem_peak = peak;
    return p;
  };
  const UsageProfile mix = profile(1000, 5000, 40000);
  struct Case {
    const char* what;
    UsageProfile arrivals;
    int32_t duty_all, peak;  // of the result
  };
  for (const Case& c : std::vector<Case>{
           {"no arrival counts: the mix", UsageProfile{}, 5000, 40000},
           {"lighter: the arrivals, the mix's peak", profile(60, 1000, 30000), 1000, 40000},
           {"as busy: the arrivals", profile(60, 5000, 30000), 5000, 40000},
           {"busier: the mix", profile(60, 5001, 30000), 5000, 40000},
           {"a higher peak of their own is kept", profile(60, 1000, 45000), 1000, 45000}}) {
    const UsageProfile r = NewReplicaProfile(mix, c.arrivals);
    EXPECT_EQ(r.duty_all, c.duty_all) << c.what;
    EXPECT_EQ(r.mem_peak, c.peak) << c.what;
  }
}

// Learn with arrival_min: the replica profile is the arrivals' first minutes when any counts, the
// mix of the pods otherwise.
TEST(Recommend, LearnPacksNewReplicasByTheArrivalsWhenAsked) {
  UsageTrace t;
  t.workloads = {"w"};
  PodSeries busy;  // there from the start, busy: the mix is busy
  busy.name = "busy";
  busy.duty.assign(300, 8000);
  busy.mem_mib.assign(300, 1000);
  busy.mem_mib[0] = 3000;  // the workload's peak: kept as the replica's (the scheduler's spike)
  PodSeries late = busy;   // arrived at 100, idle
  late.name = "late";
  late.first = 100;
  late.duty.assign(200, 0);
  late.mem_mib.assign(200, 1000);
  t.pods = {busy, late};
  t.minutes = 300;
  struct Case {
    int32_t until, arrival_min, replica_duty;
  };
  for (const Case& c : std::vector<Case>{{300, 0, 8000},   // off: the mix (q90 of the two)
                                         {300, 60, 0},     // the arrival's first hour
                                         {150, 60, 8000},  // its hour not over: the mix
                                         {160, 60, 0}}) {  // just over
    LearnOptions o;
    o.arrival_min = c.arrival_min;
    const Learned l = Learn(t, c.until, o);
    EXPECT_EQ(l.workloads[0].replica.duty_all, c.replica_duty) << c.until << " " << c.arrival_min;
    EXPECT_EQ(l.workloads[0].replica.mem_peak, 3000) << c.until << " " << c.arrival_min;
  }
}

TEST(Recommend, WarmupRecommendationHoldsForTheRestOfTheDay) {
  // Learned on the warm-up (minutes 0..359), every pod alive later, at its workload's gpumem, never
  // uses more; the recommendation stays within 1.10 x the warm-up peak.
  for (uint64_t seed : {1, 2, 3, 4, 5}) {
    const UsageTrace t = Fleet(seed);
    auto r = Recommend(t, Opts(360));
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_EQ(r->workloads.size(), 1u);
    const auto& w = r->workloads[0];
    EXPECT_EQ(w.later_oom_pods, 0) << seed;
    EXPECT_GT(w.later_pods, 50) << seed;
    EXPECT_LE(w.model.gpumem_mib * 100, w.model.peak_mib * 110) << seed;
    EXPECT_GE(w.model.gpumem_mib, w.model.peak_mib) << seed;
    EXPECT_EQ(w.gpucores, 0);
    // Each pod of the trace gets it.
    ASSERT_EQ(r->pods.size(), t.pods.size());
    for (const auto& p : r->pods) EXPECT_EQ(p.gpumem_mib, w.model.gpumem_mib);
  }
}

TEST(Recommend, TooShortAWindowIsCaughtByTheLaterMinutes) {
  // The same check fails when the evidence is thin: learning from the first 5 minutes misses the
  // model-loading spikes of the day, and later minutes go over the recommendation.
  auto r = Recommend(Fleet(1), Opts(5));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_GT(r->workloads[0].later_oom_pods, 0);
}

TEST(Recommend, WindowsAndWorkloads) {
  struct Case {
    const char* name;
    int32_t until, window;
    int32_t from, to;                       // the window learned from
    std::vector<int64_t> peak, gpumem;      // per workload a, b
    std::vector<int64_t> later, later_oom;  // per workload
  };
  const Case cases[] = {
      // The whole trace: a's peak 5000 -> 5250 -> 5376 (256 steps); b 800 -> 1024.
      {"whole trace", -1, 0, 0, 5, {5000, 800}, {5376, 1024}, {-1, -1}, {-1, -1}},
      // Before minute 3: a's peak 1500 (a2), b not seen: the whole card; a1 goes to 5000 later.
      {"until 3", 3, 0, 0, 3, {1500, 0}, {1792, 81920}, {1, 1}, {1, 0}},
      // Minutes 1..2 only.
      {"window 2 until 3", 3, 2, 1, 3, {1500, 0}, {1792, 81920}, {1, 1}, {1, 0}},
      // Minute 4 only: a not seen.
      {"window 1", -1, 1, 4, 5, {0, 800}, {81920, 1024}, {-1, -1}, {-1, -1}},
      // Past the end of the trace is its end.
      {"window 1 until 1000", 1000, 1, 4, 5, {0, 800}, {81920, 1024}, {-1, -1}, {-1, -1}},
  };
  for (const auto& c : cases) {
    auto r = Recommend(TwoWorkloads(), Opts(c.until, c.window));
    ASSERT_TRUE(r.ok()) << c.name << ": " << r.status();
    EXPECT_EQ(r->from, c.from) << c.name;
    EXPECT_EQ(r->until, c.to) << c.name;
    ASSERT_EQ(r->workloads.size(), 2u) << c.name;
    for (size_t w = 0; w < 2; ++w) {
      EXPECT_EQ(r->workloads[w].model.peak_mib, c.peak[w]) << c.name << " " << w;
      EXPECT_EQ(r->workloads[w].model.gpumem_mib, c.gpumem[w]) << c.name << " " << w;
      EXPECT_EQ(r->workloads[w].later_pods, c.later[w]) << c.name << " " << w;
      EXPECT_EQ(r->workloads[w].later_oom_pods, c.later_oom[w]) << c.name << " " << w;
    }
    EXPECT_EQ(r->workloads[0].model.pods, 2) << c.name;
    EXPECT_EQ(r->workloads[1].model.pods, 1) << c.name;
  }
}

TEST(Recommend, BadOptionsAreErrors) {
  struct Case {
    RecommendOptions o;
    const char* want;
  };
  const Case cases[] = {
      {Opts(0), "--until-min"},
      {Opts(-1, -1), "--window-min"},
      {Opts(-1, 0, 0), "--gpu-memory-gib"},
  };
  for (const auto& c : cases) {
    auto r = Recommend(TwoWorkloads(), c.o);
    ASSERT_FALSE(r.ok()) << c.want;
    EXPECT_NE(r.status().message().find(c.want), std::string::npos) << r.status();
  }
}

TEST(Recommend, ATraceWithoutRowsIsAnError) {
  auto t = ParseUsageTrace("minute,pod,duty_pct,mem_mib\n", "empty.csv");
  ASSERT_TRUE(t.ok()) << t.status();
  auto r = Recommend(*t, Opts(360));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("--until-min"), std::string::npos) << r.status();
}

TEST(Recommend, JsonHasWorkloadsAndPods) {
  auto r = Recommend(TwoWorkloads(), Opts(3));
  ASSERT_TRUE(r.ok());
  r->workloads[0].gpus_now = 2;
  r->workloads[0].gpus_after = 1;
  const auto j = nlohmann::json::parse(RecommendJson(*r));
  ASSERT_EQ(j.size(), 2u);
  ASSERT_TRUE(j["workloads"].is_object());
  ASSERT_TRUE(j["pods"].is_object());
  struct Pod {
    const char* pod;
    const char* workload;
    int64_t gpumem;
  };
  const Pod pods[] = {{"a1", "a", 1792}, {"a2", "a", 1792}, {"b1", "b", 81920}};
  ASSERT_EQ(j["pods"].size(), std::size(pods));
  for (const auto& p : pods) {
    const auto& e = j["pods"][p.pod];
    EXPECT_EQ(e.size(), 3u) << p.pod;
    EXPECT_EQ(e["workload"], p.workload) << p.pod;
    EXPECT_EQ(e["gpumem_mib"], p.gpumem) << p.pod;
    EXPECT_EQ(e["gpucores"], 0) << p.pod;
  }
  const auto& a = j["workloads"]["a"];
  EXPECT_EQ(a["gpumem_mib"], 1792);
  EXPECT_EQ(a["peak_mib"], 1500);
  EXPECT_EQ(a["saving"]["gpus_now"], 2);
  EXPECT_EQ(a["saving"]["gpus_after"], 1);
  EXPECT_EQ(a["after_window"]["oom_pods"], 1);
  auto prof = ParseUsageProfile(a["profile"].get<std::string>());
  ASSERT_TRUE(prof.ok()) << prof.status();
  EXPECT_EQ(prof->mem_peak, 1500);
  EXPECT_FALSE(j["workloads"]["b"].contains("saving"));  // not run
}

TEST(Recommend, PatchesParseBackToTheRecommendation) {
  auto r = Recommend(TwoWorkloads(), Opts(3));
  ASSERT_TRUE(r.ok());
  const std::string profile_a = r->workloads[0].profile;
  {  // strategic merge: the annotation and the named container's limit
    auto p = RecommendPatch(*r, "a", "server");
    ASSERT_TRUE(p.ok()) << p.status();
    const auto j = nlohmann::json::parse(*p);
    const auto& tmpl = j["spec"]["template"];
    EXPECT_EQ(j.size(), 1u);
    EXPECT_EQ(tmpl["metadata"]["annotations"]["hami.io/usage-profile"], profile_a);
    const auto& cs = tmpl["spec"]["containers"];
    ASSERT_EQ(cs.size(), 1u);
    EXPECT_EQ(cs[0]["name"], "server");
    EXPECT_EQ(cs[0]["resources"]["limits"]["nvidia.com/gpumem"], "1792");
  }
  {  // JSON patch on the first container
    auto p = RecommendPatch(*r, "b", "");
    ASSERT_TRUE(p.ok()) << p.status();
    const auto j = nlohmann::json::parse(*p);
    ASSERT_EQ(j.size(), 2u);
    EXPECT_EQ(j[0]["op"], "add");
    EXPECT_EQ(j[0]["path"], "/spec/template/metadata/annotations/hami.io~1usage-profile");
    EXPECT_EQ(j[0]["value"], r->workloads[1].profile);
    EXPECT_EQ(j[1]["path"], "/spec/template/spec/containers/0/resources/limits/nvidia.com~1gpumem");
    EXPECT_EQ(j[1]["value"], "81920");
  }
  // One workload must be named when there are several, and it must exist.
  for (const char* w : {"", "c"}) {
    auto p = RecommendPatch(*r, w, "x");
    ASSERT_FALSE(p.ok()) << w;
    EXPECT_NE(p.status().message().find("--workload"), std::string::npos) << p.status();
  }
  // A one-workload trace needs no name.
  auto one = Recommend(Fleet(1), Opts(360));
  ASSERT_TRUE(one.ok());
  EXPECT_TRUE(RecommendPatch(*one, "", "main").ok());
}

TEST(UsageProfileAnnotation, RoundTripsEveryProfileTheLearningMakes) {
  const UsageTrace t = Fleet(3);
  for (int32_t until : {0, 30, 360, 1441}) {
    const Learned l = Learn(t, until, LearnOptions());
    std::vector<const UsageProfile*> all;
    for (const auto& p : l.own) all.push_back(&p);
    for (const auto& w : l.workloads) all.push_back(&w.replica);
    for (const UsageProfile* p : all) {
      const std::string s = FormatUsageProfile(*p);
      EXPECT_LE(s.size(), kMaxProfileText);
      auto back = ParseUsageProfile(s);
      ASSERT_TRUE(back.ok()) << s << ": " << back.status();
      EXPECT_EQ(*back, *p) << s;
    }
  }
}

TEST(UsageProfileAnnotation, GarbageIsRefusedWithAReason) {
  const std::string dashes = "-,-,-,-,-,-,-,-,-,-,-,-,-,-,-,-,-,-,-,-,-,-,-,-";
  const std::string slashes(23, '/');
  const std::string empty =
      "v1;n=0;all=0,0;peak=0;mem=" + dashes + ";duty=" + dashes + ";hist=" + slashes + ";busy=";
  ASSERT_TRUE(ParseUsageProfile(empty).ok()) << ParseUsageProfile(empty).status();
  auto with = [&](const std::string& from, const std::string& to) {
    std::string s = empty;
    s.replace(s.find(from), from.size(), to);
    return s;
  };
  struct Case {
    std::string text;
    const char* want;
  };
  const Case cases[] = {
      {"", "';'-separated fields"},
      {"garbage", "';'-separated fields"},
      {"v2;n=0;all=0,0;peak=0;mem=;duty=;hist=;busy=", "must start with 'v1'"},
      {with("v1;", "v1.5;"), "unknown version 'v1.5'"},
      {with("n=0", "x=0"), "must start with 'n='"},
      {with("n=0", "n=-1"), "n (minutes"},
      {with("all=0,0", "all=0"), "all must be"},
      {with("all=0,0", "all=0,10001"), "all must be"},
      {with("peak=0", "peak=99999999999"), "peak"},
      {with("mem=-,", "mem="), "mem wants 24"},
      {with("mem=-,", "mem=x,"), "mem hour 0"},
      {with("duty=-,", "duty=10001,"), "duty hour 0"},
      {with("mem=-,", "mem=5,"), "observed in one of mem/duty only"},
      {with(";busy=", ";busy=1001"), "busy bin 0"},
      {with(";busy=", ";busy=0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,1"), "more than 21"},
      {with(";busy=", ";busy=900,200"), "sums to 1100"},
      {with(";hist=/", ";hist=1000/"), "has a histogram but no observation"},
      {with(";hist=/", ";hist="), "hist wants 24"},
      {empty + ";extra", "';'-separated fields"},
      {std::string(kMaxProfileText + 1, 'v'), "more than 4096"},
  };
  for (const auto& c : cases) {
    auto p = ParseUsageProfile(c.text);
    ASSERT_FALSE(p.ok()) << c.text;
    EXPECT_NE(p.status().message().find(c.want), std::string::npos)
        << c.text.substr(0, 80) << ": " << p.status();
  }
  // n=0 (nothing observed) with an observation is refused.
  auto p = ParseUsageProfile(with("peak=0", "peak=5"));
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("n=0"), std::string::npos) << p.status();
}

}  // namespace
}  // namespace hami::usage
