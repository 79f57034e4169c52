#pragma once
// One writer of the Prometheus text exposition format (0.0.4) for every /metrics in the project
// (the scheduler's and the node monitor's): series are collected into prometheus-cpp's metric model
// and printed by its TextSerializer, which does the escaping and number formatting.
#include <prometheus/client_metric.h>
#include <prometheus/metric_family.h>
#include <prometheus/metric_type.h>

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

namespace hami::http {

using MetricLabels = std::vector<prometheus::ClientMetric::Label>;

// Families in the order they were added. A family may carry labels that every one of its series
// starts with (upstream HAMi's zone="vGPU").
class MetricSet {
 public:
  class Family {
   public:
    // Adds one series: the family's leading labels, then `labels`.
    void Put(const MetricLabels& labels, double value);
    // Adds one series of a Histogram family: `cumulative[i]` observations <= `upper_bounds[i]`
    // (the +Inf bucket is `count`), `sum` of the observed values.
    void PutHistogram(const MetricLabels& labels, const std::vector<double>& upper_bounds,
                      const std::vector<uint64_t>& cumulative, uint64_t count, double sum);

   private:
    friend class MetricSet;
    prometheus::MetricFamily family_;
    MetricLabels leading_;
  };

  // The returned reference stays valid for the set's lifetime.
  Family& Add(std::string name, std::string help,
              prometheus::MetricType type = prometheus::MetricType::Gauge,
              MetricLabels leading = {});

  // The families that have at least one series (promtool warns on empty ones).
  std::vector<prometheus::MetricFamily> Take();
  // Take(), printed in the text exposition format.
  std::string Render();

 private:
  std::deque<Family> families_;
};

}  // namespace hami::http
