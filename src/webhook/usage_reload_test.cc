// The --usage-recommendations file re-read when it changes (usage_reload.h): a table of changes to
// the file and what the webhook then applies.
#include "webhook/usage_reload.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <thread>

#include "usage/profile.h"
#include "usage/recommend.h"
#include "webhook/webhook.h"

namespace hami::webhook {
namespace {

// The recommendations file with ml/web at `gpumem_mib` (0: a value the parser refuses).
std::string Recommendations(int64_t gpumem_mib) {
  static const std::string profile = usage::FormatUsageProfile(usage::ProfileOf(
      usage::PodSeries{"p", 0, 0, std::vector<int32_t>(60, 1500), std::vector<int32_t>(60, 20000)},
      60));
  return Json{{"workloads", {{"ml/web", {{"gpumem_mib", gpumem_mib}, {"profile", profile}}}}}}
      .dump();
}

// A file in a fresh directory, written in place or by rename (a new inode, as kubelet updates a
// mounted ConfigMap).
class File {
 public:
  File() {
    char tmpl[] = "/tmp/usage_reload_test.XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    path_ = dir_ + "/recs.json";
  }
  ~File() {
    std::remove(path_.c_str());
    std::remove((path_ + ".new").c_str());
    ::rmdir(dir_.c_str());
  }
  const std::string& path() const { return path_; }
  void Write(const std::string& text, bool rename) {
    const std::string to = rename ? path_ + ".new" : path_;
    std::ofstream(to, std::ios::binary | std::ios::trunc) << text;
    if (rename) std::rename(to.c_str(), path_.c_str());
  }
  void Remove() { std::remove(path_.c_str()); }

 private:
  std::string dir_, path_;
};

int64_t GpumemOf(const UsageRecommendationsFile& f) {
  const auto recs = f.Current();
  const auto it = recs->find("ml/web");
  return it == recs->end() ? 0 : it->second.gpumem_mib;
}

TEST(UsageRecommendationsFile, ReloadsWhatParsesAndKeepsTheLastGoodSet) {
  File file;
  file.Write(Recommendations(30720), false);
  auto f = UsageRecommendationsFile::Open(file.path());
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(GpumemOf(**f), 30720);
  enum How { kInPlace, kRename, kRemove, kNothing };
  struct Case {
    const char* name;
    How how;
    std::string text;
    bool reloaded;
    int64_t gpumem;  // of ml/web after the check
    int64_t loads, errors;
  };
  // clang-format off
  const std::vector<Case> cases = {
      {"unchanged: nothing read",               kNothing, "", false, 30720, 1, 0},
      {"a new set, renamed over the file",      kRename, Recommendations(20480), true, 20480, 2, 0},
      {"a new set, written in place",           kInPlace, Recommendations(8192), true, 8192, 3, 0},
      {"not JSON: the previous set stays",      kInPlace, "{\"workloads\": ", false, 8192, 3, 1},
      {"the same bad file: counted once",       kNothing, "", false, 8192, 3, 1},
      {"a bad value: the previous set stays",   kRename, Recommendations(0), false, 8192, 3, 2},
      {"more than 16 MiB: not read past the bound", kRename, std::string(kMaxRecommendationsBytes + 1, ' '), false, 8192, 3, 3},
      {"good again",                            kRename, Recommendations(40960), true, 40960, 4, 3},
      {"the file removed: the set stays",       kRemove, "", false, 40960, 4, 4},
      {"and back",                              kRename, Recommendations(12288), true, 12288, 5, 4},
  };
  // clang-format on
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    if (c.how == kInPlace || c.how == kRename) file.Write(c.text, c.how == kRename);
    if (c.how == kRemove) file.Remove();
    EXPECT_EQ((*f)->CheckNow(), c.reloaded);
    EXPECT_EQ(GpumemOf(**f), c.gpumem);
    const auto s = (*f)->stats();
    EXPECT_EQ(s.loads, c.loads);
    EXPECT_EQ(s.errors, c.errors);
    EXPECT_EQ(s.workloads, 1);
  }
  const std::string metrics = (*f)->RenderMetrics();
  EXPECT_NE(metrics.find("hami_scheduler_usage_recommendations 1\n"), std::string::npos);
  EXPECT_NE(metrics.find("hami_scheduler_usage_recommendations_loads_total 5\n"),
            std::string::npos);
  EXPECT_NE(metrics.find("hami_scheduler_usage_recommendations_reload_errors_total 4\n"),
            std::string::npos);
}

TEST(UsageRecommendationsFile, OpenRefusesWhatDoesNotLoad) {
  File file;
  EXPECT_TRUE(absl::IsNotFound(UsageRecommendationsFile::Open(file.path()).status()));
  file.Write("{}", false);
  EXPECT_FALSE(UsageRecommendationsFile::Open(file.path()).ok());
}

// The webhook reads the set at each review: a change of the file reaches the next pod, through
// the reload thread.
TEST(UsageRecommendationsFile, TheWebhookAppliesTheReloadedSet) {
  File file;
  file.Write(Recommendations(30720), false);
  auto f = UsageRecommendationsFile::Open(file.path());
  ASSERT_TRUE(f.ok()) << f.status();
  WebhookOptions o;
  o.usage.trusted_namespaces = {"ml"};
  o.usage.apply_namespaces = {"ml"};
  o.usage.current_recommendations = [&f] { return (*f)->Current(); };
  Webhook wh(o);
  // A Deployment's pod (ml/web), one GPU, no gpumem of its own.
  const Json pod = Json::parse(R"({"apiVersion": "v1", "kind": "Pod",
    "metadata": {"generateName": "web-5d4f8c7b9-", "namespace": "ml",
      "labels": {"pod-template-hash": "5d4f8c7b9"},
      "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-5d4f8c7b9",
                           "uid": "u1", "controller": true}]},
    "spec": {"containers": [{"name": "main", "image": "cuda",
                             "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}})");
  auto gpumem = [&] {
    // uid, namespace, operation, kind, sub-resource, user, object, old object, dry run
    const AdmissionResponse r =
        wh.Review(AdmissionRequest{"u", "ml", "CREATE", "Pod", "", "", pod, Json(), false});
    const Json out = r.patch ? pod.patch(*r.patch) : pod;
    const Json& l = out["spec"]["containers"][0]["resources"]["limits"];
    return l.contains("nvidia.com/gpumem") ? l["nvidia.com/gpumem"].get<std::string>() : "";
  };
  EXPECT_EQ(gpumem(), "30720");
  (*f)->Start(std::chrono::milliseconds(10));
  file.Write(Recommendations(20480), true);
  for (int i = 0; i < 500 && (*f)->stats().loads < 2; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ((*f)->stats().loads, 2);
  EXPECT_EQ(gpumem(), "20480");
  (*f)->Stop();
}

}  // namespace
}  // namespace hami::webhook
