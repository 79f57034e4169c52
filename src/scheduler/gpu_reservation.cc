#include "scheduler/gpu_reservation.h"

#include <charconv>

#include "core/names.h"

namespace hami::scheduler {
namespace {

bool UuidChars(std::string_view s) {
  if (s.empty() || s.size() > 96) return false;
  for (char c : s)
    if (c <= ' ' || c > '~' || c == ',' || c == ';') return false;
  return true;
}

bool Int(std::string_view s, int64_t lo, int64_t hi, int64_t* out) {
  if (s.empty() || s.size() > 19) return false;
  for (char c : s)
    if (c < '0' || c > '9') return false;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && end == s.data() + s.size() && *out >= lo && *out <= hi;
}

std::vector<std::string_view> Split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  for (size_t start = 0;;) {
    const size_t end = s.find(sep, start);
    out.push_back(s.substr(start, end == std::string_view::npos ? end : end - start));
    if (end == std::string_view::npos) return out;
    start = end + 1;
  }
}

}  // namespace

std::string EncodeGpuReservations(const std::vector<GpuReservation>& entries) {
  std::string out;
  for (const GpuReservation& r : entries)
    out += StrCat(out.empty() ? "" : ";", r.id, ",", r.namespace_, ",", r.owner_uid, ",", r.uuid,
                  ",", r.mem_mib, ",", r.cores, ",", r.expires_s);
  return out;
}

StatusOr<std::vector<GpuReservation>> DecodeGpuReservations(std::string_view value) {
  std::vector<GpuReservation> out;
  if (value.empty()) return out;
  const std::vector<std::string_view> entries = Split(value, ';');
  if (entries.size() > kMaxGpuReservations)
    return InvalidArgument(kGpuReservationsKey, ": ", entries.size(), " entries (at most ",
                           kMaxGpuReservations, ")");
  for (size_t i = 0; i < entries.size(); ++i) {
    const std::vector<std::string_view> f = Split(entries[i], ',');
    auto bad = [&](const char* what) {
      return InvalidArgument(kGpuReservationsKey, ": entry ", i + 1, ": ", what);
    };
    if (f.size() != 7) return bad("not 7 comma-separated fields");
    GpuReservation r;
    int64_t cores = 0;
    if (!core::IsUid(f[0])) return bad("id is not 1-64 of [A-Za-z0-9-]");
    if (!core::IsDnsLabel(f[1])) return bad("namespace is not a DNS label");
    if (!core::IsUid(f[2])) return bad("owner uid is not 1-64 of [A-Za-z0-9-]");
    if (!UuidChars(f[3])) return bad("GPU UUID is not 1-96 printable characters");
    if (!Int(f[4], 1, int64_t{1} << 30, &r.mem_mib)) return bad("memory is not 1..2^30 MiB");
    if (!Int(f[5], 0, 100, &cores)) return bad("cores are not 0..100");
    if (!Int(f[6], 1, INT64_MAX, &r.expires_s)) return bad("expiry is not a Unix time");
    r.id = std::string(f[0]);
    r.namespace_ = std::string(f[1]);
    r.owner_uid = std::string(f[2]);
    r.uuid = std::string(f[3]);
    r.cores = static_cast<int>(cores);
    for (const GpuReservation& seen : out)
      if (seen.id == r.id) return bad("id given twice");
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace hami::scheduler
