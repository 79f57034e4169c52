#include "http/metrics_text.h"

#include <prometheus/text_serializer.h>

#include <limits>
#include <sstream>
#include <utility>

namespace hami::http {

void MetricSet::Family::Put(const MetricLabels& labels, double value) {
  prometheus::ClientMetric m;
  m.label.reserve(leading_.size() + labels.size());
  m.label.insert(m.label.end(), leading_.begin(), leading_.end());
  m.label.insert(m.label.end(), labels.begin(), labels.end());
  switch (family_.type) {
    case prometheus::MetricType::Counter:
      m.counter.value = value;
      break;
    case prometheus::MetricType::Untyped:
      m.untyped.value = value;
      break;
    default:
      m.gauge.value = value;
      break;
  }
  family_.metric.push_back(std::move(m));
}

void MetricSet::Family::PutHistogram(const MetricLabels& labels,
                                     const std::vector<double>& upper_bounds,
                                     const std::vector<uint64_t>& cumulative, uint64_t count,
                                     double sum) {
  prometheus::ClientMetric m;
  m.label.reserve(leading_.size() + labels.size());
  m.label.insert(m.label.end(), leading_.begin(), leading_.end());
  m.label.insert(m.label.end(), labels.begin(), labels.end());
  for (size_t i = 0; i < upper_bounds.size() && i < cumulative.size(); ++i)
    m.histogram.bucket.push_back({cumulative[i], upper_bounds[i]});
  m.histogram.bucket.push_back({count, std::numeric_limits<double>::infinity()});
  m.histogram.sample_count = count;
  m.histogram.sample_sum = sum;
  family_.metric.push_back(std::move(m));
}

MetricSet::Family& MetricSet::Add(std::string name, std::string help, prometheus::MetricType type,
                                  MetricLabels leading) {
  Family& f = families_.emplace_back();
  f.family_.name = std::move(name);
  f.family_.help = std::move(help);
  f.family_.type = type;
  f.leading_ = std::move(leading);
  return f;
}

std::vector<prometheus::MetricFamily> MetricSet::Take() {
  std::vector<prometheus::MetricFamily> out;
  out.reserve(families_.size());
  for (Family& f : families_)
    if (!f.family_.metric.empty()) out.push_back(std::move(f.family_));
  families_.clear();
  return out;
}

std::string MetricSet::Render() {
  std::ostringstream os;
  prometheus::TextSerializer().Serialize(os, Take());
  return os.str();
}

}  // namespace hami::http
