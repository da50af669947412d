// dtr-next's record of a step: calls in order, each output's readers by position, the next use
// after a position, and slots reused from step to step.
#include "dtr/step_log.h"

#include <gtest/gtest.h>

namespace remat {
namespace {

TEST(StepLog, NextUseAfterAPosition) {
  StepLog log;
  log.add_call(11, 1);  // call 0
  log.add_call(22, 2);  // call 1: two outputs
  log.add_call(33, 1);  // call 2 reads call 0
  log.add_use(0, 0, 2);
  log.add_call(44, 1);  // call 3 reads call 1's second output and call 0
  log.add_use(1, 1, 3);
  log.add_use(0, 0, 3);
  EXPECT_EQ(log.calls(), 4u);
  EXPECT_EQ(log.op(1), 22u);
  EXPECT_EQ(log.next_use(0, 0, 0), 2u);
  EXPECT_EQ(log.next_use(0, 0, 3), 3u);
  EXPECT_FALSE(log.next_use(0, 0, 4).has_value());  // not read again
  EXPECT_FALSE(log.next_use(1, 0, 0).has_value());  // never read
  EXPECT_EQ(log.next_use(1, 1, 2), 3u);
  EXPECT_FALSE(log.next_use(2, 1, 0).has_value());  // call 2 had one output
  EXPECT_EQ(log.last_use(0, 0), 3u);
  EXPECT_EQ(log.last_use(1, 1), 3u);
  EXPECT_FALSE(log.last_use(1, 0).has_value());  // never read
  EXPECT_FALSE(log.last_use(2, 1).has_value());  // call 2 had one output
}

TEST(StepLog, ClearKeepsNothingOfTheLastStep) {
  StepLog log;
  log.add_call(1, 1);
  log.add_call(2, 1);
  log.add_use(0, 0, 1);
  log.clear();
  EXPECT_TRUE(log.empty());
  log.add_call(1, 1);  // reuses slot 0: its old reader is gone
  EXPECT_FALSE(log.next_use(0, 0, 0).has_value());
}

}  // namespace
}  // namespace remat
