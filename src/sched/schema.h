// The schema of the sched component's database (pipeline runs and the scheduler's jobs share the
// state folder's database).
#pragma once

#include <vector>

#include "db/database.h"

namespace reel::sched::internal {

const std::vector<db::Migration>& SchedMigrations();

}  // namespace reel::sched::internal
