// Test helper: runs one function per rank on threads of this process, each with its own Comm
// over real TCP on loopback, rendezvousing on a TCPStore this helper hosts (port 0).
#pragma once

#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <functional>
#include <thread>
#include <vector>

#include "parallel/comm.h"

namespace reel::parallel::testing {

inline c10::intrusive_ptr<c10d::TCPStore> StartStore() {
  c10d::TCPStoreOptions o;
  o.port = 0;
  o.isServer = true;
  o.waitWorkers = false;
  return c10::make_intrusive<c10d::TCPStore>("127.0.0.1", o);
}

inline WorldInfo ThreadWorld(const c10d::TCPStore& store, int rank, int world_size,
                             int generation = 0) {
  WorldInfo w;
  w.rank = rank;
  w.local_rank = rank;
  w.world_size = world_size;
  w.local_world_size = world_size;
  w.master_addr = "127.0.0.1";
  w.master_port = store.getPort();
  w.agent_store = true;
  w.generation = generation;
  w.source = "test";
  return w;
}

// Runs body(rank, comm) on `world_size` threads; a rank whose Connect fails gets nullptr.
inline void RunRanks(int world_size, const CommOptions& options,
                     const std::function<void(int, Comm*)>& body, int generation = 0) {
  auto store = StartStore();
  std::vector<std::thread> threads;
  for (int r = 0; r < world_size; ++r) {
    threads.emplace_back([&, r] {
      auto comm = Comm::Connect(ThreadWorld(*store, r, world_size, generation), options);
      body(r, comm.ok() ? comm->get() : nullptr);
    });
  }
  for (auto& t : threads) t.join();
}

}  // namespace reel::parallel::testing
