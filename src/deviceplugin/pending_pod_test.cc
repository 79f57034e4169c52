#include "deviceplugin/pending_pod.h"

#include <gtest/gtest.h>

#include "deviceplugin/testing/builders.h"

namespace hami::deviceplugin {
namespace {

PendingPod Pod(const std::string& name,
               const std::vector<std::vector<std::string>>& containers_uuids) {
  std::vector<std::vector<core::ContainerDevice>> ctrs;
  for (const auto& uuids : containers_uuids) {
    ctrs.emplace_back();
    for (const auto& u : uuids) ctrs.back().push_back(testing::Dev(u, 1000, 0));
  }
  PendingPod p = testing::MakePod(name, std::move(ctrs));
  p.namespace_ = "ns";
  return p;
}

// A pod whose record the scheduler did not write for this node (PendingFromPodJson says why).
PendingPod Refused(const std::string& name,
                   const std::vector<std::vector<std::string>>& containers_uuids) {
  PendingPod p = Pod(name, containers_uuids);
  p.refused = "no hami.io/bind-phase";
  return p;
}

TEST(SelectPendingTest, Table) {
  struct Case {
    const char* name;
    std::vector<PendingPod> pods;
    std::vector<std::string> ids;
    std::vector<SteeredChoice> steered;
    std::string want_pod;  // "" = error
    absl::StatusCode want_code = absl::StatusCode::kOk;
    std::string want_msg;
  };
  const std::vector<Case> cases = {
      {"nothing pending",
       {},
       {"GPU-a-0"},
       {},
       "",
       absl::StatusCode::kNotFound,
       "no pod bound to this node"},
      {"single pod", {Pod("a", {{"GPU-a"}})}, {"GPU-b-3"}, {}, "a", absl::StatusCode::kOk, ""},
      {"count must match",
       {Pod("a", {{"GPU-a", "GPU-b"}})},
       {"GPU-a-0"},
       {},
       "",
       absl::StatusCode::kNotFound,
       "wants that many: ns/a"},
      {"count picks among pods",
       {Pod("a", {{"GPU-a", "GPU-b"}}), Pod("b", {{"GPU-c"}})},
       {"GPU-c-1"},
       {},
       "b",
       absl::StatusCode::kOk,
       ""},
      {"same count is ambiguous",
       {Pod("a", {{"GPU-a"}}), Pod("b", {{"GPU-b"}})},
       {"GPU-a-0"},
       {},
       "",
       absl::StatusCode::kFailedPrecondition,
       "refusing to guess"},
      {"steered IDs resolve",
       {Pod("a", {{"GPU-a"}}), Pod("b", {{"GPU-b"}})},
       {"GPU-b-4"},
       {SteeredChoice{"uid-b", 0, {"GPU-b-4"}}},
       "b",
       absl::StatusCode::kOk,
       ""},
      {"steered to other IDs does not resolve",
       {Pod("a", {{"GPU-a"}}), Pod("b", {{"GPU-b"}})},
       {"GPU-b-5"},
       {SteeredChoice{"uid-b", 0, {"GPU-b-4"}}},
       "",
       absl::StatusCode::kFailedPrecondition,
       "ambiguous"},
      {"pod with nothing left is ignored",
       {Pod("a", {}), Pod("b", {{"GPU-b"}})},
       {"GPU-b-0"},
       {},
       "b",
       absl::StatusCode::kOk,
       ""},
      {"a forged record alone is refused, and says why",
       {Refused("f", {{"GPU-a"}})},
       {"GPU-a-0"},
       {},
       "",
       absl::StatusCode::kPermissionDenied,
       "did not make for this node (ns/f: no hami.io/bind-phase)"},
      {"a forged record does not make a real one ambiguous",
       {Refused("f", {{"GPU-a"}}), Pod("b", {{"GPU-b"}})},
       {"GPU-b-0"},
       {},
       "b",
       absl::StatusCode::kOk,
       ""},
      {"steering never selects a forged record",
       {Refused("f", {{"GPU-a"}})},
       {"GPU-a-0"},
       {SteeredChoice{"uid-f", 0, {"GPU-a-0"}}},
       "",
       absl::StatusCode::kPermissionDenied,
       "refusing to arm"},
      {"a forged record of another size is not mentioned",
       {Refused("f", {{"GPU-a", "GPU-b"}})},
       {"GPU-a-0"},
       {},
       "",
       absl::StatusCode::kNotFound,
       "no pod bound to this node"},
  };
  for (const auto& tc : cases) {
    auto s = SelectPending(tc.pods, tc.ids, tc.steered);
    if (tc.want_pod.empty()) {
      ASSERT_FALSE(s.ok()) << tc.name;
      EXPECT_EQ(s.status().code(), tc.want_code) << tc.name;
      EXPECT_NE(std::string(s.status().message()).find(tc.want_msg), std::string::npos)
          << tc.name << ": " << s.status();
    } else {
      ASSERT_TRUE(s.ok()) << tc.name << ": " << s.status();
      EXPECT_EQ(s->pod.name, tc.want_pod) << tc.name;
      EXPECT_EQ(s->container, s->pod.containers.front());
    }
  }
}

class ListedPods final : public KubeletPodView {
 public:
  explicit ListedPods(StatusOr<std::vector<KubeletPod>> pods) : pods_(std::move(pods)) {}
  StatusOr<std::vector<KubeletPod>> ListPods() override {
    ++calls;
    return pods_;
  }
  int calls = 0;

 private:
  StatusOr<std::vector<KubeletPod>> pods_;
};

TEST(SelectPendingTest, KubeletPodViewBreaksTies) {
  const std::vector<PendingPod> pods = {Pod("a", {{"GPU-a"}}), Pod("b", {{"GPU-b"}, {"GPU-a"}})};
  struct Case {
    const char* name;
    StatusOr<std::vector<KubeletPod>> listed;
    std::string want_pod;  // "" = ambiguous
  };
  const std::vector<Case> cases = {
      {"only b listed", std::vector<KubeletPod>{{"ns", "b", {}}}, "b"},
      {"a listed, running pods too",
       std::vector<KubeletPod>{{"ns", "old", {"c0"}}, {"ns", "a", {}}}, "a"},
      {"b's next container already holds devices",
       std::vector<KubeletPod>{{"ns", "b", {"c0"}}, {"ns", "a", {}}}, "a"},
      {"both listed", std::vector<KubeletPod>{{"ns", "a", {}}, {"ns", "b", {}}}, ""},
      {"other namespace", std::vector<KubeletPod>{{"other", "a", {}}}, ""},
      {"none listed", std::vector<KubeletPod>{}, ""},
      {"view unavailable", Unavailable("no socket"), ""},
  };
  for (const auto& tc : cases) {
    ListedPods view(tc.listed);
    auto s = SelectPending(pods, {"GPU-x-0"}, {}, &view);
    EXPECT_EQ(view.calls, 1) << tc.name;
    if (tc.want_pod.empty()) {
      EXPECT_FALSE(s.ok()) << tc.name;
    } else {
      ASSERT_TRUE(s.ok()) << tc.name << ": " << s.status();
      EXPECT_EQ(s->pod.name, tc.want_pod) << tc.name;
    }
  }
  // With a single candidate by count the view is not asked (upstream behaviour).
  ListedPods view(std::vector<KubeletPod>{});
  EXPECT_TRUE(SelectPending({Pod("a", {{"GPU-a"}})}, {"GPU-x-0"}, {}, &view).ok());
  EXPECT_EQ(view.calls, 0);
}

TEST(PreferenceCandidatesTest, NeedsSizeAndAvailableGpus) {
  std::vector<PendingPod> pods = {Pod("a", {{"GPU-a"}}), Pod("b", {{"GPU-b", "GPU-c"}})};
  EXPECT_EQ(PreferenceCandidates(pods, 1, {"GPU-a", "GPU-b"}).size(), 1u);
  EXPECT_TRUE(PreferenceCandidates({Refused("f", {{"GPU-a"}})}, 1, {"GPU-a"}).empty())
      << "never steer to a forged record";
  EXPECT_EQ(PreferenceCandidates(pods, 1, {"GPU-b"}).size(), 0u);
  auto two = PreferenceCandidates(pods, 2, {"GPU-a", "GPU-b", "GPU-c"});
  ASSERT_EQ(two.size(), 1u);
  EXPECT_EQ(two[0]->name, "b");
}

TEST(MemoryPendingPodSourceTest, ConsumesContainersInOrder) {
  MemoryPendingPodSource src;
  src.AddPod(Pod("a", {{"GPU-a"}, {"GPU-b"}}));
  auto pods = src.ListPending();
  ASSERT_TRUE(pods.ok());
  ASSERT_EQ(pods->size(), 1u);
  ASSERT_TRUE(src.MarkAllocated((*pods)[0], 0).ok());
  EXPECT_FALSE(src.MarkAllocated((*pods)[0], 0).ok());  // already consumed
  pods = src.ListPending();
  ASSERT_EQ((*pods)[0].containers.size(), 1u);
  EXPECT_EQ((*pods)[0].containers[0].index, 1);
  ASSERT_TRUE(src.MarkAllocated((*pods)[0], 1).ok());
  EXPECT_TRUE(src.ListPending()->empty());

  src.AddPod(Pod("b", {{"GPU-a"}}));
  ASSERT_TRUE(src.MarkFailed(Pod("b", {}), "boom").ok());
  EXPECT_TRUE(src.ListPending()->empty());
  EXPECT_EQ(src.Failed().at("uid-b"), "boom");
  src.SetListError(Unavailable("api down"));
  EXPECT_FALSE(src.ListPending().ok());
}

}  // namespace
}  // namespace hami::deviceplugin
