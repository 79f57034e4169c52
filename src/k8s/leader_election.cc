#include "k8s/leader_election.h"

#include <thread>

#include "common/log.h"
#include "common/mutex.h"
#include "k8s/errors.h"

namespace hami::k8s {

struct LeaderElector::Impl {
  Client& client;
  LeaderElectionConfig cfg;
  const Clock& clock;

  mutable Mutex mu;
  CondVar cv;  // stopping
  bool stopping ABSL_GUARDED_BY(mu) = false;
  bool leader ABSL_GUARDED_BY(mu) = false;
  std::string observed_holder ABSL_GUARDED_BY(mu);
  std::string observed_renew ABSL_GUARDED_BY(mu);  // renewTime of the record we last saw
  // Our monotonic time when the record last changed.
  int64_t observed_at_ns ABSL_GUARDED_BY(mu) = 0;
  // Our monotonic time when the last successful attempt began.
  int64_t last_renew_ns ABSL_GUARDED_BY(mu) = 0;
  bool have_observed ABSL_GUARDED_BY(mu) = false;
  std::thread thread;
  Mutex step_mu;  // one attempt at a time

  Impl(Client& c, LeaderElectionConfig k, const Clock& cl)
      : client(c), cfg(std::move(k)), clock(cl) {}

  int64_t Ns(std::chrono::milliseconds d) const {
    return static_cast<int64_t>(d.count()) * 1'000'000;
  }
  std::string NowMicro() const { return FormatMicroTime(clock.UnixSeconds() * 1'000'000); }
  int LeaseSeconds() const {
    return static_cast<int>(std::max<int64_t>(1, (cfg.lease_duration.count() + 999) / 1000));
  }

  // Called by one attempt at a time (step_mu) or by Release. Leadership is published after
  // on_started_leading has run and withdrawn before on_stopped_leading runs, so whoever sees
  // IsLeader() true also sees the effects of the start callback.
  void SetLeader(bool now_leader) {
    {
      MutexLock l(mu);
      if (leader == now_leader) return;
      if (!now_leader) leader = false;
    }
    SPDLOG_INFO("leader election {}/{}: {} {} leading", cfg.lease_namespace, cfg.lease_name,
                cfg.identity, now_leader ? "started" : "stopped");
    if (now_leader && cfg.on_started_leading) cfg.on_started_leading();
    if (!now_leader && cfg.on_stopped_leading) cfg.on_stopped_leading();
    if (now_leader) {
      MutexLock l(mu);
      leader = true;
    }
  }

  // After a failed attempt: a leader keeps leading until renew_deadline has passed since its last
  // successful renewal.
  bool Failed(int64_t now) {
    bool is_leader;
    {
      MutexLock l(mu);
      is_leader = leader;
    }
    int64_t last;
    {
      MutexLock l(mu);
      last = last_renew_ns;
    }
    if (is_leader && now - last >= Ns(cfg.renew_deadline)) SetLeader(false);
    MutexLock l(mu);
    return leader;
  }

  void Renewed(int64_t attempt_start) {
    MutexLock l(mu);
    last_renew_ns = attempt_start;
  }

  // Leading and still inside the renew deadline: an attempt that hangs (API server unreachable)
  // cannot keep us leading, whatever the background loop is doing. `attempt_start` of the last
  // successful write, not its end, so the window closes no later than the other candidates' view
  // of the lease's expiry (they measure lease_duration from when they saw the record change).
  bool LeadingNow() const {
    MutexLock l(mu);
    return leader && clock.MonotonicNanos() - last_renew_ns < Ns(cfg.renew_deadline);
  }

  void Observe(const std::string& holder, const std::string& renew, int64_t now) {
    bool holder_changed = false;
    {
      MutexLock l(mu);
      if (!have_observed || holder != observed_holder || renew != observed_renew) {
        holder_changed = !have_observed || holder != observed_holder;
        observed_holder = holder;
        observed_renew = renew;
        observed_at_ns = now;
        have_observed = true;
      }
    }
    if (holder_changed && cfg.on_new_leader && !holder.empty()) cfg.on_new_leader(holder);
  }

  bool Step() {
    MutexLock step(step_mu);
    const int64_t now = clock.MonotonicNanos();
    auto got = client.Get(kLeases, cfg.lease_namespace, cfg.lease_name);
    if (!got.ok() && absl::IsNotFound(got.status())) {
      Json lease = {{"apiVersion", "coordination.k8s.io/v1"},
                    {"kind", "Lease"},
                    {"metadata", {{"name", cfg.lease_name}, {"namespace", cfg.lease_namespace}}},
                    {"spec",
                     {{"holderIdentity", cfg.identity},
                      {"leaseDurationSeconds", LeaseSeconds()},
                      {"acquireTime", NowMicro()},
                      {"renewTime", NowMicro()},
                      {"leaseTransitions", 0}}}};
      auto created = client.Create(kLeases, cfg.lease_namespace, lease);
      if (!created.ok()) return Failed(now);
      Renewed(now);
      Observe(cfg.identity, lease["spec"]["renewTime"], now);
      SetLeader(true);
      return true;
    }
    if (!got.ok()) {
      SPDLOG_WARN("leader election: reading lease failed: {}", std::string(got.status().message()));
      return Failed(now);
    }
    Json lease = std::move(*got);
    Json spec =
        lease.contains("spec") && lease["spec"].is_object() ? lease["spec"] : Json::object();
    const std::string holder = spec.contains("holderIdentity") && spec["holderIdentity"].is_string()
                                   ? spec["holderIdentity"].get<std::string>()
                                   : "";
    const std::string renew = spec.contains("renewTime") && spec["renewTime"].is_string()
                                  ? spec["renewTime"].get<std::string>()
                                  : "";
    Observe(holder, renew, now);
    bool held_by_other;
    {
      MutexLock l(mu);
      held_by_other = !holder.empty() && holder != cfg.identity &&
                      observed_at_ns + Ns(cfg.lease_duration) > now;
    }
    if (held_by_other) {
      SetLeader(false);
      return false;
    }
    const bool ours = holder == cfg.identity;
    const int transitions =
        spec.contains("leaseTransitions") && spec["leaseTransitions"].is_number_integer()
            ? spec["leaseTransitions"].get<int>()
            : 0;
    spec["holderIdentity"] = cfg.identity;
    spec["leaseDurationSeconds"] = LeaseSeconds();
    spec["renewTime"] = NowMicro();
    if (!ours) {
      spec["acquireTime"] = NowMicro();
      spec["leaseTransitions"] = holder.empty() && transitions == 0 ? 0 : transitions + 1;
    }
    lease["spec"] = spec;
    auto updated = client.Update(kLeases, cfg.lease_namespace, lease);
    if (!updated.ok()) {
      if (!IsConflict(updated.status())) {
        SPDLOG_WARN("leader election: renewing lease failed: {}",
                    std::string(updated.status().message()));
      }
      return Failed(now);
    }
    Renewed(now);
    Observe(cfg.identity, spec["renewTime"], now);
    SetLeader(true);
    return true;
  }

  void Release() {
    bool is_leader;
    {
      MutexLock l(mu);
      is_leader = leader;
    }
    if (!is_leader) return;
    auto got = client.Get(kLeases, cfg.lease_namespace, cfg.lease_name);
    if (got.ok() && (*got)["spec"].value("holderIdentity", "") == cfg.identity) {
      Json lease = *got;
      lease["spec"]["holderIdentity"] = "";
      lease["spec"]["renewTime"] = NowMicro();
      (void)client.Update(kLeases, cfg.lease_namespace, lease);
    }
    SetLeader(false);
  }

  void Loop() {
    while (true) {
      Step();
      MutexLock l(mu);
      if (cv.WaitFor(mu, cfg.retry_period,
                     [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return stopping; }))
        break;
    }
    Release();
  }
};

Status ValidateLeaderElectionConfig(const LeaderElectionConfig& cfg) {
  if (cfg.identity.empty()) return InvalidArgument("leader election: identity must not be empty");
  if (cfg.lease_name.empty() || cfg.lease_namespace.empty()) {
    return InvalidArgument("leader election: lease name and namespace must not be empty");
  }
  if (!(cfg.lease_duration > cfg.renew_deadline)) {
    return InvalidArgument("leader election: lease duration (", cfg.lease_duration.count(),
                           " ms) must be greater than renew deadline (", cfg.renew_deadline.count(),
                           " ms)");
  }
  if (!(cfg.renew_deadline > cfg.retry_period) || cfg.retry_period.count() <= 0) {
    return InvalidArgument("leader election: renew deadline (", cfg.renew_deadline.count(),
                           " ms) must be greater than retry period (", cfg.retry_period.count(),
                           " ms) > 0");
  }
  return OkStatus();
}

StatusOr<std::unique_ptr<LeaderElector>> LeaderElector::Create(Client& client,
                                                               LeaderElectionConfig cfg,
                                                               const Clock& clock) {
  HAMI_RETURN_IF_ERROR(ValidateLeaderElectionConfig(cfg));
  return std::unique_ptr<LeaderElector>(
      new LeaderElector(std::make_unique<Impl>(client, std::move(cfg), clock)));
}

LeaderElector::LeaderElector(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
LeaderElector::~LeaderElector() {
  Stop();
}

bool LeaderElector::TryAcquireOrRenew() {
  return impl_->Step();
}

void LeaderElector::Start() {
  if (impl_->thread.joinable()) return;
  {
    MutexLock l(impl_->mu);
    impl_->stopping = false;
  }
  impl_->thread = std::thread([this] { impl_->Loop(); });
}

void LeaderElector::Stop() {
  {
    MutexLock l(impl_->mu);
    impl_->stopping = true;
  }
  impl_->cv.NotifyAll();
  if (impl_->thread.joinable()) impl_->thread.join();
}

bool LeaderElector::IsLeader() const {
  return impl_->LeadingNow();
}

std::string LeaderElector::ObservedLeader() const {
  MutexLock l(impl_->mu);
  return impl_->observed_holder;
}

}  // namespace hami::k8s
