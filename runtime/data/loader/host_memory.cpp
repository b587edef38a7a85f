#include "runtime/data/loader/host_memory.h"

#include <cstdlib>
#include <mutex>

namespace train::data {

namespace {

void* ordinary_allocate(std::size_t bytes) { return std::malloc(bytes == 0 ? 1 : bytes); }
void ordinary_release(void* pointer) { std::free(pointer); }

std::mutex& functions_mutex() {
  static std::mutex mutex;
  return mutex;
}

HostMemoryFunctions& current_functions() {
  static HostMemoryFunctions functions{ordinary_allocate, ordinary_release, "ordinary memory"};
  return functions;
}

}  // namespace

void set_host_memory_functions(const HostMemoryFunctions& functions) {
  std::lock_guard<std::mutex> lock(functions_mutex());
  current_functions() = functions;
}

HostMemoryFunctions host_memory_functions() {
  std::lock_guard<std::mutex> lock(functions_mutex());
  return current_functions();
}

}  // namespace train::data
