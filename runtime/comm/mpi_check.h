// Every MPI call is checked: MPI_COMM_WORLD is switched to MPI_ERRORS_RETURN and a failing call throws
// with the call, the rank and MPI's own error text.
#pragma once

#include <mpi.h>

#include <stdexcept>
#include <string>

namespace train::comm {

class MpiError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A collective that did not complete within its bound (TRAIN_STEP_TIMEOUT_SECONDS): another rank hangs.
class CollectiveTimeout : public MpiError {
 public:
  using MpiError::MpiError;
};

void throw_mpi_error(int code, const char* call, const char* file, int line);

}  // namespace train::comm

#define MPI_CHECK(call)                                                           \
  do {                                                                            \
    int mpi_check_code_ = (call);                                                 \
    if (mpi_check_code_ != MPI_SUCCESS) {                                         \
      ::train::comm::throw_mpi_error(mpi_check_code_, #call, __FILE__, __LINE__); \
    }                                                                             \
  } while (0)
