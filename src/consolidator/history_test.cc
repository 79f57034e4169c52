// The controller's history as its ConfigMap keeps it (history.h): what a new leader reads back.
#include "consolidator/history.h"

#include <gtest/gtest.h>

#include <tuple>

namespace hami::consolidator {
namespace {

constexpr int32_t kNow = 29'000'000;  // Unix minutes

History Sample() {
  History h;
  h.moves["ns/a"] = {kNow - 100, kNow - 5};
  h.backoff_until["ns/Deployment/web"] = kNow + 20;
  h.failures["ns/Deployment/web"] = 2;
  InFlight f;
  f.pod_key = "ns/b";
  f.uid = "uid-b";
  f.workload = "ns/Deployment/api";
  f.from_gpu = "GPU-a";
  f.to_gpu = "GPU-b";
  f.minute = kNow - 5;
  f.deadline_minute = kNow + 10;
  f.to_node = "n1";
  f.owner_uid = "rs-api";
  f.mem_mib = 30000;
  f.cores = 20;
  f.reserve_until_s = (int64_t{kNow} + 5) * 60;
  h.in_flight.push_back(f);
  return h;
}

void ExpectSame(const History& a, const History& b) {
  EXPECT_EQ(a.moves, b.moves);
  EXPECT_EQ(a.backoff_until, b.backoff_until);
  EXPECT_EQ(a.failures, b.failures);
  ASSERT_EQ(a.in_flight.size(), b.in_flight.size());
  for (size_t i = 0; i < a.in_flight.size(); ++i) {
    const InFlight &x = a.in_flight[i], &y = b.in_flight[i];
    EXPECT_EQ(
        std::tie(x.pod_key, x.uid, x.workload, x.from_gpu, x.to_gpu, x.minute, x.deadline_minute,
                 x.to_node, x.owner_uid, x.mem_mib, x.cores, x.reserve_until_s),
        std::tie(y.pod_key, y.uid, y.workload, y.from_gpu, y.to_gpu, y.minute, y.deadline_minute,
                 y.to_node, y.owner_uid, y.mem_mib, y.cores, y.reserve_until_s));
  }
}

TEST(History, RoundTrips) {
  auto back = DecodeHistory(EncodeHistory(Sample()), kNow);
  ASSERT_TRUE(back.ok()) << back.status();
  ExpectSame(*back, Sample());
}

TEST(History, ReadAsInput) {
  const std::string ok = EncodeHistory(Sample());
  auto edit = [&](auto f) {
    Json j = Json::parse(ok);
    f(j);
    return j.dump();
  };
  struct Case {
    const char* name;
    std::string text;
    bool refused;                       // the whole document
    size_t moves, in_flight, backoffs;  // what is kept otherwise
  };
  const Case cases[] = {
      {"as written", ok, false, 1, 1, 1},
      {"empty", "", true, 0, 0, 0},
      {"not JSON", "{", true, 0, 0, 0},
      {"another version", edit([](Json& j) { j["version"] = 2; }), true, 0, 0, 0},
      {"moves not an object", edit([](Json& j) { j["moves"] = Json::array(); }), true, 0, 0, 0},
      {"past the byte bound", std::string(kMaxHistoryBytes + 1, ' '), true, 0, 0, 0},
      {"more than 1024 moves under way",
       edit([](Json& j) { j["inFlight"] = Json(std::vector<Json>(1025, j["inFlight"][0])); }), true,
       0, 0, 0},
      {"a move older than a day is dropped",
       edit([](Json& j) { j["moves"]["ns/a"] = {kNow - 1440}; }), false, 0, 1, 1},
      {"a move more than an hour ahead is dropped",
       edit([](Json& j) { j["moves"]["ns/a"] = {kNow + 61}; }), false, 0, 1, 1},
      {"a back-off more than a day ahead is dropped",
       edit([](Json& j) { j["backoffUntil"]["ns/Deployment/web"] = kNow + 1441; }), false, 1, 1, 0},
      {"a back-off that ended is dropped",
       edit([](Json& j) { j["backoffUntil"]["ns/Deployment/web"] = kNow; }), false, 1, 1, 0},
      {"a move under way with cores past 100 is dropped",
       edit([](Json& j) { j["inFlight"][0]["cores"] = 101; }), false, 1, 0, 1},
      {"a move under way with a 400-byte workload is dropped",
       edit([](Json& j) { j["inFlight"][0]["workload"] = std::string(400, 'w'); }), false, 1, 0, 1},
      {"a move under way without a uid is dropped",
       edit([](Json& j) { j["inFlight"][0].erase("uid"); }), false, 1, 0, 1},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto h = DecodeHistory(c.text, kNow);
    ASSERT_EQ(!h.ok(), c.refused) << h.status();
    if (!h.ok()) continue;
    EXPECT_EQ(h->moves.size(), c.moves);
    EXPECT_EQ(h->in_flight.size(), c.in_flight);
    EXPECT_EQ(h->backoff_until.size(), c.backoffs);
  }
}

}  // namespace
}  // namespace hami::consolidator
