#include "runtime/comm/mpi_check.h"

#include <fmt/format.h>

namespace train::comm {

void throw_mpi_error(int code, const char* call, const char* file, int line) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) length = 0;
  int rank = -1;
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized) MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  throw MpiError(fmt::format("rank {}: {} failed at {}:{}: {}", rank, call, file, line,
                             length > 0 ? std::string(text, static_cast<size_t>(length)) : "unknown MPI error"));
}

}  // namespace train::comm
