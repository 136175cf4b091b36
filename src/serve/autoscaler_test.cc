// The HPA rule, its tolerance and the scale-down stabilisation window, on an injected clock.
#include "serve/autoscaler.h"

#include <gtest/gtest.h>

#include "testing/status_matchers.h"

namespace reel::serve {
namespace {

AutoscaleOptions OneToThree() {
  AutoscaleOptions o;
  o.min_replicas = 1;
  o.max_replicas = 3;
  o.target_in_flight = 2;
  o.scale_down_window = std::chrono::seconds(10);
  return o;
}

LoadSample InFlight(double per_replica) {
  LoadSample load;
  load.in_flight_per_replica = per_replica;
  return load;
}

TEST(Autoscaler, DesiredIsCeilOfCurrentTimesMetricOverTarget) {
  Autoscaler a(OneToThree());
  EXPECT_EQ(a.Raw(1, InFlight(4)), 2);    // ceil(1 × 4 / 2)
  EXPECT_EQ(a.Raw(1, InFlight(5)), 3);    // ceil(2.5)
  EXPECT_EQ(a.Raw(2, InFlight(9)), 3);    // ceil(9) clamped to max
  EXPECT_EQ(a.Raw(3, InFlight(0.5)), 1);  // ceil(0.75)
  EXPECT_EQ(a.Raw(3, InFlight(0)), 1);    // never under min
  EXPECT_EQ(a.Raw(2, InFlight(2.1)), 2);  // within 10% of the target: no change
  EXPECT_EQ(a.Raw(2, InFlight(1.85)), 2);
  EXPECT_EQ(a.Raw(2, InFlight(2.3)), 3);  // ceil(2.3)
}

TEST(Autoscaler, TheLargestMetricWins) {
  AutoscaleOptions o = OneToThree();
  o.target_latency_ms = 100;
  Autoscaler a(o);
  LoadSample load = InFlight(1);  // asks for fewer
  load.latency_ms = 250;          // asks for ceil(1 × 2.5) = 3
  EXPECT_EQ(a.Raw(1, load), 3);
  load.latency_ms = 0;  // nothing answered: latency is no metric this period
  EXPECT_EQ(a.Raw(2, load), 1);
}

TEST(Autoscaler, UpAtOnceDownOnlyAfterTheWindow) {
  Autoscaler a(OneToThree());
  const Clock::TimePoint t0{std::chrono::hours(1)};
  EXPECT_EQ(a.Recommend(t0, 1, InFlight(6)), 3);  // a burst: 1 -> 3 at once
  // The burst ends: the window still holds the recommendation of 3.
  EXPECT_EQ(a.Recommend(t0 + std::chrono::seconds(2), 3, InFlight(0)), 3);
  EXPECT_EQ(a.Recommend(t0 + std::chrono::seconds(9), 3, InFlight(0)), 3);
  // Past the window: down to what the quiet period asks for.
  EXPECT_EQ(a.Recommend(t0 + std::chrono::seconds(11), 3, InFlight(0)), 1);
}

TEST(Autoscaler, ABriefLullDoesNotFlap) {
  Autoscaler a(OneToThree());
  const Clock::TimePoint t0{std::chrono::hours(1)};
  int replicas = a.Recommend(t0, 1, InFlight(4));  // 2
  ASSERT_EQ(replicas, 2);
  for (int s = 1; s <= 30; ++s) {
    // Load alternates between busy and idle every second; the count holds at 2.
    replicas = a.Recommend(t0 + std::chrono::seconds(s), replicas, InFlight(s % 2 ? 0 : 2));
    EXPECT_EQ(replicas, 2) << "second " << s;
  }
}

TEST(Autoscaler, BadOptionsAreNamed) {
  AutoscaleOptions o = OneToThree();
  o.max_replicas = 0;
  EXPECT_STATUS(o.Validate(), StatusCode::kInvalidArgument);
  o = OneToThree();
  o.target_in_flight = 0;
  EXPECT_STATUS(o.Validate(), StatusCode::kInvalidArgument);
  EXPECT_OK(OneToThree().Validate());
}

}  // namespace
}  // namespace reel::serve
