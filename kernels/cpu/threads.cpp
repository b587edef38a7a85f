// kernels/cpu/threads.cpp: the CPU ops' OpenMP thread count.
//
// libgomp reads OMP_NUM_THREADS in its constructor, before main(): setting the variable afterwards changes
// nothing in this process, so a rank that works out its share of the host's cores sets the count here.

#include "kernels/ops.h"

#include <omp.h>

#include <stdexcept>
#include <string>

namespace train::kernels {

void set_cpu_threads(int threads) {
  if (threads < 1) throw std::invalid_argument("set_cpu_threads: threads must be at least 1, got " + std::to_string(threads));
  omp_set_num_threads(threads);
}

int cpu_threads() { return omp_get_max_threads(); }

}  // namespace train::kernels
