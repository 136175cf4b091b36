#include "parallel/world.h"

#include <gtest/gtest.h>

#include <map>

#include "parallel/net.h"
#include "testing/status_matchers.h"

namespace reel::parallel {
namespace {

GetEnv From(std::map<std::string, std::string> vars) {
  auto shared = std::make_shared<std::map<std::string, std::string>>(std::move(vars));
  return [shared](const char* name) -> const char* {
    auto it = shared->find(name);
    return it == shared->end() ? nullptr : it->second.c_str();
  };
}

TEST(WorldTest, NoLauncherIsOneProcess) {
  auto w = WorldFromEnvironment(From({}));
  ASSERT_OK(w);
  EXPECT_FALSE(w->distributed());
  EXPECT_EQ(w->source, "none");
}

TEST(WorldTest, ReadsTorchrunVariables) {
  auto w = WorldFromEnvironment(From({{"RANK", "5"},
                                      {"WORLD_SIZE", "8"},
                                      {"LOCAL_RANK", "1"},
                                      {"LOCAL_WORLD_SIZE", "4"},
                                      {"GROUP_RANK", "1"},
                                      {"MASTER_ADDR", "10.0.0.1"},
                                      {"MASTER_PORT", "29400"},
                                      {"REEL_AGENT_STORE", "1"},
                                      {"REEL_RESTART_GENERATION", "2"}}));
  ASSERT_OK(w);
  EXPECT_TRUE(w->distributed());
  EXPECT_EQ(w->rank, 5);
  EXPECT_EQ(w->world_size, 8);
  EXPECT_EQ(w->local_rank, 1);
  EXPECT_EQ(w->local_world_size, 4);
  EXPECT_EQ(w->node_rank, 1);
  EXPECT_EQ(w->nnodes, 2);
  EXPECT_EQ(w->master_addr, "10.0.0.1");
  EXPECT_EQ(w->master_port, 29400);
  EXPECT_TRUE(w->agent_store);
  EXPECT_EQ(w->source, "reel launcher");
  EXPECT_EQ(w->generation, 2);
}

TEST(WorldTest, KubeflowStyleIsOneProcessPerNode) {
  auto w = WorldFromEnvironment(From({{"RANK", "2"},
                                      {"WORLD_SIZE", "3"},
                                      {"MASTER_ADDR", "job-master-0"},
                                      {"MASTER_PORT", "23456"}}));
  ASSERT_OK(w);
  EXPECT_EQ(w->local_rank, 0);
  EXPECT_EQ(w->nnodes, 3);
  EXPECT_EQ(w->node_rank, 2);
}

TEST(WorldTest, ReadsSlurmVariables) {
  auto w = WorldFromEnvironment(From({{"SLURM_PROCID", "3"},
                                      {"SLURM_NTASKS", "4"},
                                      {"SLURM_LOCALID", "1"},
                                      {"SLURM_NODEID", "1"},
                                      {"SLURM_NNODES", "2"},
                                      {"SLURM_NTASKS_PER_NODE", "2(x2)"},
                                      {"SLURM_JOB_NODELIST", "gpu[07-08]"}}));
  ASSERT_OK(w);
  EXPECT_EQ(w->source, "slurm");
  EXPECT_EQ(w->rank, 3);
  EXPECT_EQ(w->world_size, 4);
  EXPECT_EQ(w->local_world_size, 2);
  EXPECT_EQ(w->nnodes, 2);
  EXPECT_EQ(w->master_addr, "gpu07");
  EXPECT_EQ(w->master_port, 29500);
}

TEST(WorldTest, BadVariablesAreNamed) {
  auto bad = WorldFromEnvironment(From({{"RANK", "x"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}}));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("RANK='x'"), std::string::npos) << bad.status().message();
  auto outside =
      WorldFromEnvironment(From({{"RANK", "2"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}}));
  ASSERT_FALSE(outside.ok());
  EXPECT_NE(outside.status().message().find("outside a world of 2"), std::string::npos);
  auto no_master = WorldFromEnvironment(From({{"RANK", "0"}, {"WORLD_SIZE", "2"}}));
  ASSERT_FALSE(no_master.ok());
  EXPECT_NE(no_master.status().message().find("MASTER_ADDR"), std::string::npos);
  auto port = WorldFromEnvironment(
      From({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "70000"}}));
  ASSERT_FALSE(port.ok());
  EXPECT_NE(port.status().message().find("MASTER_PORT"), std::string::npos);
}

TEST(WorldTest, FirstSlurmHost) {
  EXPECT_EQ(FirstSlurmHost("node[03-05,7]"), "node03");
  EXPECT_EQ(FirstSlurmHost("a,b"), "a");
  EXPECT_EQ(FirstSlurmHost("single"), "single");
  EXPECT_EQ(FirstSlurmHost("rack[1-2]-gpu,x"), "rack1-gpu");
}

TEST(NetTest, LoopbackInterfaceAndProbes) {
  auto lo = InterfaceAddress("lo");
  ASSERT_OK(lo);
  EXPECT_EQ(*lo, "127.0.0.1");
  auto missing = InterfaceAddress("no-such-if0");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("interfaces: "), std::string::npos);
  EXPECT_NE(missing.status().message().find("lo"), std::string::npos);

  auto listener = ProbeListener::Listen("127.0.0.1");
  ASSERT_OK(listener);
  const int port = (*listener)->port();
  EXPECT_OK(ProbeConnect("127.0.0.1", port, std::chrono::milliseconds(2000)));
  listener->reset();
  Status refused = ProbeConnect("127.0.0.1", port, std::chrono::milliseconds(2000));
  ASSERT_FALSE(refused.ok());
  EXPECT_STATUS(refused, StatusCode::kUnavailable);
  EXPECT_NE(refused.message().find("127.0.0.1:" + std::to_string(port)), std::string::npos)
      << refused.message();
}

}  // namespace
}  // namespace reel::parallel
