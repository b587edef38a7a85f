// Batch buffers come from the installed host-memory functions (pinned memory on GPU hosts), and every
// buffer is released by the functions that allocated it, however batches are swapped and copied.
#include "runtime/data/loader/batch_loader.h"
#include "runtime/data/loader/host_memory.h"

#include <catch2/catch.hpp>

#include <atomic>
#include <cstdlib>

using namespace train::data;

namespace {

std::atomic<int> live{0};
std::atomic<int> allocated{0};

void* counting_allocate(std::size_t bytes) {
  ++live;
  ++allocated;
  return std::malloc(bytes == 0 ? 1 : bytes);
}
void counting_release(void* pointer) {
  --live;
  std::free(pointer);
}

// Installs the counting functions for one test and puts the previous ones back.
struct CountingMemory {
  HostMemoryFunctions previous = host_memory_functions();
  CountingMemory() { set_host_memory_functions({counting_allocate, counting_release, "counting"}); }
  ~CountingMemory() { set_host_memory_functions(previous); }
};

}  // namespace

TEST_CASE("host memory: the loader's batches live in the installed memory and go back to it", "[data]") {
  Batch made_before;  // ordinary memory: swapping it with loader batches must stay consistent
  made_before.images.assign(10, 1.0f);
  {
    CountingMemory counting;
    live = 0;
    allocated = 0;
    {
      auto source = std::make_shared<SyntheticSource>(12, 3, 4, 4);
      LoaderOptions options;
      options.batch_size = 4;
      options.epochs = 2;
      BatchLoader loader(source, options);
      Batch batch;
      int batches = 0;
      while (loader.next(batch, std::chrono::seconds(20)) == BatchLoader::Status::batch) {
        // The loader's own buffers are counted; the ordinary one swapped in below then circulates
        // through the loader's slots, which must release it with free(), not with the counting functions.
        if (batches == 0) CHECK(batch.images.get_allocator().functions().allocate == &counting_allocate);
        Batch copy = batch;  // a copy allocates with its own allocator
        std::swap(made_before, batch);
        ++batches;
      }
      CHECK(batches == 6);
      CHECK(allocated > 0);
    }
    made_before = Batch{};
    CHECK(live == 0);  // every counted buffer was released by the counting functions
  }
  CHECK(host_memory_functions().allocate != &counting_allocate);
}
