// `train rank`: what mpirun starts on every rank. It bootstraps MPI, finds its place (rank, local rank,
// the device it pins), checks that a collective works across the whole job, and (with the training
// issue) trains.
#pragma once

namespace train {

int run_rank();

}  // namespace train
