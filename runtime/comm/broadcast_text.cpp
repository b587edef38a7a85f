#include "runtime/comm/broadcast_text.h"

#include "runtime/comm/bounded_collectives.h"
#include "runtime/comm/mpi_check.h"

#include <algorithm>
#include <cstdint>

namespace train::comm {

namespace {

// Rank 0's text on every rank, each of MPI's broadcasts (the length, then pieces of at most 1 GiB) run by
// `broadcast`.
template <typename Broadcast>
void broadcast_in_pieces(std::string& text, Broadcast&& broadcast) {
  int64_t length = static_cast<int64_t>(text.size());
  broadcast(&length, 1, MPI_INT64_T);
  text.resize(static_cast<size_t>(length));
  constexpr int64_t piece = int64_t{1} << 30;
  for (int64_t offset = 0; offset < length; offset += piece) {
    broadcast(text.data() + offset, static_cast<int>(std::min(piece, length - offset)), MPI_BYTE);
  }
}

}  // namespace

void broadcast_text(std::string& text, MPI_Comm comm) {
  broadcast_in_pieces(text, [&](void* data, int count, MPI_Datatype type) {
    MPI_CHECK(MPI_Bcast(data, count, type, 0, comm));
  });
}

void bounded_broadcast_text(std::string& text, MPI_Comm comm, std::chrono::milliseconds timeout, const char* what) {
  broadcast_in_pieces(text, [&](void* data, int count, MPI_Datatype type) {
    MPI_Request request = MPI_REQUEST_NULL;
    MPI_CHECK(MPI_Ibcast(data, count, type, 0, comm, &request));
    wait_bounded(request, timeout, what);
  });
}

}  // namespace train::comm
