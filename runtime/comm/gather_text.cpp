#include "runtime/comm/gather_text.h"

#include "runtime/comm/bounded_collectives.h"
#include "runtime/comm/mpi_check.h"

#include <fmt/format.h>

#include <climits>
#include <cstdint>

namespace train::comm {

std::vector<std::string> gather_texts(const std::string& mine, MPI_Comm comm, std::chrono::milliseconds timeout,
                                      const char* what) {
  int rank = 0, size = 1;
  MPI_CHECK(MPI_Comm_rank(comm, &rank));
  MPI_CHECK(MPI_Comm_size(comm, &size));
  if (mine.size() > static_cast<size_t>(INT_MAX)) {
    throw MpiError(fmt::format("{}: rank {}'s text of {} bytes is too long to gather", what, rank, mine.size()));
  }
  int length = static_cast<int>(mine.size());
  std::vector<int> lengths(rank == 0 ? static_cast<size_t>(size) : 0);
  MPI_Request request = MPI_REQUEST_NULL;
  MPI_CHECK(MPI_Igather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, 0, comm, &request));
  wait_bounded(request, timeout, what);
  std::vector<int> offsets(lengths.size());
  int64_t total = 0;
  for (size_t r = 0; r < lengths.size(); ++r) {
    offsets[r] = static_cast<int>(std::min<int64_t>(total, INT_MAX));
    total += lengths[r];
  }
  // Rank 0 alone knows the total: it tells every rank whether it fits, so that all give up together.
  int too_long = total > INT_MAX ? 1 : 0;
  MPI_CHECK(MPI_Ibcast(&too_long, 1, MPI_INT, 0, comm, &request));
  wait_bounded(request, timeout, what);
  if (too_long) throw MpiError(fmt::format("{}: the ranks' texts are too long together to gather", what));
  std::string all(static_cast<size_t>(total), '\0');
  MPI_CHECK(MPI_Igatherv(mine.data(), length, MPI_CHAR, all.data(), lengths.data(), offsets.data(), MPI_CHAR, 0, comm,
                         &request));
  wait_bounded(request, timeout, what);
  std::vector<std::string> texts;
  for (size_t r = 0; r < lengths.size(); ++r) {
    texts.push_back(all.substr(static_cast<size_t>(offsets[r]), static_cast<size_t>(lengths[r])));
  }
  return texts;
}

}  // namespace train::comm
