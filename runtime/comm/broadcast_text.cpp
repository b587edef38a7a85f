#include "runtime/comm/broadcast_text.h"

#include "runtime/comm/mpi_check.h"

#include <algorithm>
#include <cstdint>

namespace train::comm {

void broadcast_text(std::string& text, MPI_Comm comm) {
  int64_t length = static_cast<int64_t>(text.size());
  MPI_CHECK(MPI_Bcast(&length, 1, MPI_INT64_T, 0, comm));
  text.resize(static_cast<size_t>(length));
  constexpr int64_t piece = int64_t{1} << 30;
  for (int64_t offset = 0; offset < length; offset += piece) {
    MPI_CHECK(MPI_Bcast(text.data() + offset, static_cast<int>(std::min(piece, length - offset)), MPI_BYTE, 0, comm));
  }
}

}  // namespace train::comm
