#pragma once
// Leader election on a coordination.k8s.io/v1 Lease, with client-go's semantics:
// - acquire when the lease is absent, has no holder, or has not been renewed for leaseDuration
//   (measured on our own monotonic clock from when we last saw the record change, so clock skew
//   between machines does not matter);
// - the leader renews every retry_period; if it cannot renew within renew_deadline it steps down,
//   and IsLeader() says false from that instant on even while a renewal is still hanging, so a
//   leader cut off from the API server stops deciding before any other candidate may take over
//   (renew_deadline < lease_duration is required);
// - writes are conditional on resourceVersion: a 409 means someone else won the race.
// Expiry is judged with this candidate's own lease_duration (the record's leaseDurationSeconds is
// written for other tools, rounded up to whole seconds), so all candidates should share one config.
#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "common/clock.h"
#include "k8s/client.h"

namespace hami::k8s {

struct LeaderElectionConfig {
  std::string lease_namespace = "kube-system";
  std::string lease_name = "hami-scheduler";
  std::string identity;  // unique per candidate (e.g. pod name + random suffix); required
  std::chrono::milliseconds lease_duration{15'000};
  std::chrono::milliseconds renew_deadline{10'000};
  std::chrono::milliseconds retry_period{2'000};
  std::function<void()> on_started_leading;
  std::function<void()> on_stopped_leading;
  std::function<void(const std::string& identity)> on_new_leader;  // observed holder changed
};

// The checks Create makes: identity, lease name and namespace set; lease_duration > renew_deadline
// > retry_period > 0. For flags, at start.
Status ValidateLeaderElectionConfig(const LeaderElectionConfig& cfg);

class LeaderElector {
 public:
  // `client` and `clock` must outlive the elector. `clock` drives lease expiry and MicroTimes.
  static StatusOr<std::unique_ptr<LeaderElector>> Create(Client& client, LeaderElectionConfig cfg,
                                                         const Clock& clock = RealClock::Get());
  ~LeaderElector();  // Stop()

  // One acquire-or-renew attempt (what the background loop does every retry_period). Returns
  // true if we hold the lease afterwards. Calls the callbacks on transitions. Tests drive this
  // directly with a FakeClock.
  bool TryAcquireOrRenew();

  // Runs the election loop on a thread: acquire, then renew; after losing the lease it tries to
  // acquire again. Stop() ends it and, when leading, releases the lease (holderIdentity = "")
  // so another candidate takes over at once.
  void Start();
  void Stop();

  // Leading now: the lease was renewed by an attempt that began less than renew_deadline ago (on
  // `clock`). Callers check it before every decision.
  bool IsLeader() const;
  std::string ObservedLeader() const;

 private:
  struct Impl;
  explicit LeaderElector(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace hami::k8s
