#include "usage/synthetic.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numbers>

#include "common/rng.h"

namespace hami::usage {

namespace {

int32_t Between(Rng& rng, int32_t lo, int32_t hi) {  // uniform in [lo, hi]
  return lo + static_cast<int32_t>(rng.Uniform(static_cast<uint64_t>(hi - lo) + 1));
}

}  // namespace

UsageTrace SyntheticTrace(const SyntheticOptions& o) {
  Rng rng(o.seed);
  UsageTrace t;
  t.workloads = {""};
  t.minutes = std::max<int32_t>(1, o.minutes);
  const int32_t end = t.minutes - 1;
  // The fleet's load: one diurnal wave (rising through the night, highest around hour 6-7, low
  // from the afternoon on) with minute noise; every replica follows it.
  std::vector<double> fleet(static_cast<size_t>(t.minutes));
  for (int32_t m = 0; m < t.minutes; ++m) {
    const double h = (m % 1440) / 60.0, x = (h - 6.5) / 3.5;
    fleet[static_cast<size_t>(m)] =
        0.12 + 0.88 * std::exp(-x * x) + 0.1 * (rng.UniformDouble() - 0.5);
  }
  const int total = std::max(0, o.pods) + std::max(0, o.late_pods);
  for (int k = 0; k < total; ++k) {
    PodSeries p;
    char name[32];
    std::snprintf(name, sizeof name, "p%03d-%08llx", k,
                  static_cast<unsigned long long>(rng.Next() >> 32));
    p.name = name;
    const bool late = k >= o.pods;
    int32_t first = 0, last = end;
    if (late) {
      first = Between(rng, std::min(end, 390), end);
      // One in three late replicas is short-lived.
      last = rng.Uniform(3) == 0 ? std::min(end, first + Between(rng, 5, 90)) : end;
    } else if (rng.Uniform(6) == 0) {
      last = std::min(end, Between(rng, 390, 440));  // leaves after the warm-up
    }
    p.first = first;
    const bool busy = rng.Uniform(6) == 0;     // a busier replica: more duty, more resident memory
    const bool parked = rng.Uniform(25) == 0;  // holds a small model and never computes
    const int32_t resident = parked ? 17700
                             : busy ? Between(rng, 28000, 32500)
                                    : Between(rng, 20500, 25500);
    const double activity = busy ? 0.8 : 0.6;  // chance of a busy minute at full fleet load
    const double intensity = busy ? 15 : 9;    // scale of a busy minute's duty, %
    int32_t spike_left = 0, spike_mem = resident;
    for (int32_t m = first; m <= last; ++m) {
      const double load = fleet[static_cast<size_t>(m)];
      int32_t duty = 0;
      if (!parked && rng.UniformDouble() < activity * load) {
        // Heavy-tailed: median about 2 x intensity, 1 % of busy minutes near the whole GPU.
        const double d = intensity / (1 - 0.9 * rng.UniformDouble());
        duty = static_cast<int32_t>(std::min(100.0, d) * 100);
      }
      int32_t mem = resident + Between(rng, -300, 300);
      if (spike_left == 0 && !parked && rng.Uniform(400) == 0) {  // loads another pipeline
        spike_left = Between(rng, 2, 12);
        spike_mem = Between(rng, resident + 4000, 47800);
      }
      if (spike_left > 0) {
        mem = std::max(mem, spike_mem - Between(rng, 0, 800));
        --spike_left;
      }
      p.duty.push_back(duty);
      p.mem_mib.push_back(std::max<int32_t>(0, mem));
    }
    t.pods.push_back(std::move(p));
  }
  // Arrival order (first minute, then name), as the reader gives it.
  std::sort(t.pods.begin(), t.pods.end(), [](const PodSeries& a, const PodSeries& b) {
    return a.first != b.first ? a.first < b.first : a.name < b.name;
  });
  return t;
}

}  // namespace hami::usage
