#include "scheduler/gpu_reservation.h"

#include <gtest/gtest.h>

namespace hami::scheduler {
namespace {

TEST(GpuReservation, RoundTrips) {
  const std::vector<GpuReservation> entries = {
      {"9f1c-2", "serving", "rs-uid-1", "GPU-b", 30000, 20, 1764810000},
      {"77aa", "ml", "sts-uid", "GPU-c", 1, 0, 1}};
  const std::string text = EncodeGpuReservations(entries);
  EXPECT_EQ(text, "9f1c-2,serving,rs-uid-1,GPU-b,30000,20,1764810000;77aa,ml,sts-uid,GPU-c,1,0,1");
  auto back = DecodeGpuReservations(text);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, entries);
  EXPECT_TRUE(DecodeGpuReservations("")->empty());
}

TEST(GpuReservation, RefusesWhatTheControllerNeverWrites) {
  std::string many;
  for (int i = 0; i <= 64; ++i) many += StrCat(many.empty() ? "" : ";", "id", i, ",n,o,G,1,0,1");
  struct Case {
    const char* name;
    std::string value;
    const char* error;  // a part of the message
  };
  const Case cases[] = {
      {"six fields", "a,ns,o,GPU-b,1,0", "not 7"},
      {"eight fields", "a,ns,o,GPU-b,1,0,1,9", "not 7"},
      {"empty entry", "a,ns,o,GPU-b,1,0,1;", "not 7"},
      {"id with a slash", "a/b,ns,o,GPU-b,1,0,1", "id is not"},
      {"namespace in capitals", "a,NS,o,GPU-b,1,0,1", "namespace"},
      {"namespace ending in a dash", "a,ns-,o,GPU-b,1,0,1", "namespace"},
      {"owner uid empty", "a,ns,,GPU-b,1,0,1", "owner uid"},
      {"uuid with a space", "a,ns,o,GPU b,1,0,1", "GPU UUID"},
      {"no memory", "a,ns,o,GPU-b,0,0,1", "memory"},
      {"negative memory", "a,ns,o,GPU-b,-5,0,1", "memory"},
      {"memory past 2^30 MiB", "a,ns,o,GPU-b,1073741825,0,1", "memory"},
      {"cores past 100", "a,ns,o,GPU-b,1,101,1", "cores"},
      {"expiry not a number", "a,ns,o,GPU-b,1,0,soon", "expiry"},
      {"expiry past int64", "a,ns,o,GPU-b,1,0,99999999999999999999", "expiry"},
      {"the same id twice", "a,ns,o,GPU-b,1,0,1;a,ns,o,GPU-c,1,0,1", "twice"},
      {"65 entries", many, "65 entries"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto r = DecodeGpuReservations(c.value);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(std::string(r.status().message()).find(c.error), std::string::npos)
        << r.status().message();
  }
}

}  // namespace
}  // namespace hami::scheduler
