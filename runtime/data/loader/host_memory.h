// Where batch buffers live. On a GPU host the decoded batches are copied to the device every step, and a
// copy from page-locked ("pinned") host memory runs at full bus speed and asynchronously, while one from
// ordinary memory is staged through a driver buffer. So the loader writes its output straight into
// buffers from a replaceable allocator: ordinary memory by default (the CPU backend), and the GPU backend
// installs cudaHostAlloc/cudaFreeHost at start-up, before any loader exists.
//
// Each buffer remembers the functions it was allocated with (the allocator captures them when the
// container is created, and propagates on move and swap), so installing new functions never frees a
// buffer with the wrong ones.
#pragma once

#include <cstddef>
#include <new>
#include <type_traits>
#include <vector>

namespace train::data {

struct HostMemoryFunctions {
  void* (*allocate)(std::size_t bytes) = nullptr;  // null result: out of memory
  void (*release)(void* pointer) = nullptr;
  const char* name = "ordinary memory";
};

// The functions new batch buffers will use. Thread-safe to read; set it once, before loaders start.
void set_host_memory_functions(const HostMemoryFunctions& functions);
HostMemoryFunctions host_memory_functions();

template <typename T>
class HostAllocator {
 public:
  using value_type = T;
  using propagate_on_container_move_assignment = std::true_type;
  using propagate_on_container_swap = std::true_type;
  using is_always_equal = std::false_type;

  HostAllocator() : functions_(host_memory_functions()) {}
  template <typename U>
  HostAllocator(const HostAllocator<U>& other) : functions_(other.functions()) {}

  T* allocate(std::size_t count) {
    void* pointer = functions_.allocate(count * sizeof(T));
    if (pointer == nullptr) throw std::bad_alloc();
    return static_cast<T*>(pointer);
  }
  void deallocate(T* pointer, std::size_t) { functions_.release(pointer); }
  const HostMemoryFunctions& functions() const { return functions_; }

  template <typename U>
  bool operator==(const HostAllocator<U>& other) const {
    return functions_.allocate == other.functions().allocate && functions_.release == other.functions().release;
  }

 private:
  HostMemoryFunctions functions_;
};

// A batch's images: pinned on GPU hosts, ordinary memory otherwise.
using HostFloats = std::vector<float, HostAllocator<float>>;

}  // namespace train::data
