#include "job/rank_environment.h"

#include "job/sagemaker_environment.h"

#include <algorithm>
#include <optional>
#include <string>

namespace train {

namespace {

std::optional<int> read_count(const EnvironmentMap& environment, const std::string& name) {
  auto value = lookup(environment, name);
  if (!value || value->size() > 9 || value->find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
  return std::stoi(*value);
}

}  // namespace

std::optional<RankIdentity> rank_identity_from_environment(const EnvironmentMap& environment) {
  auto rank = read_count(environment, "OMPI_COMM_WORLD_RANK");
  auto size = read_count(environment, "OMPI_COMM_WORLD_SIZE");
  auto local_rank = read_count(environment, "OMPI_COMM_WORLD_LOCAL_RANK");
  auto local_size = read_count(environment, "OMPI_COMM_WORLD_LOCAL_SIZE");
  if (!rank || !size || !local_rank || !local_size) return std::nullopt;
  return RankIdentity{*rank, *size, *local_rank, *local_size};
}

namespace {

// OpenMP's reading of OMP_NUM_THREADS: a list of positive counts, the first for the outermost level.
std::optional<int> openmp_thread_count(const EnvironmentMap& environment) {
  auto value = lookup(environment, "OMP_NUM_THREADS");
  if (!value) return std::nullopt;
  std::string first = value->substr(0, value->find(','));
  const size_t begin = first.find_first_not_of(" \t");
  const size_t end = first.find_last_not_of(" \t");
  if (begin == std::string::npos) return std::nullopt;
  first = first.substr(begin, end - begin + 1);
  if (first.size() > 6 || first.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
  const int count = std::stoi(first);
  return count > 0 ? std::optional<int>(count) : std::nullopt;
}

}  // namespace

int cores_per_rank(const JobDescription& job, const RankIdentity& identity) {
  return std::max(1, job.resources.cpus / std::max(1, identity.local_size));
}

int threads_per_rank(const JobDescription& job, const RankIdentity& identity, const EnvironmentMap& environment) {
  if (auto count = openmp_thread_count(environment)) return *count;
  return cores_per_rank(job, identity);
}

EnvironmentMap rank_program_environment(const JobDescription& job, const EnvironmentMap& environment,
                                        const RankIdentity& identity) {
  EnvironmentMap result = environment;
  for (auto& [name, value] : sagemaker_variables(job, environment)) result[name] = value;
  if (!lookup(result, "OMP_NUM_THREADS")) result["OMP_NUM_THREADS"] = std::to_string(threads_per_rank(job, identity, result));
  return result;
}

void set_current_host_of_rank(JobDescription& job, const RankIdentity& identity) {
  if (!job.cluster.batch || identity.local_size <= 0) return;
  size_t host_index = static_cast<size_t>(identity.rank / identity.local_size);
  if (host_index < job.cluster.hosts.size()) job.cluster.current_host = job.cluster.hosts[host_index];
}

}  // namespace train
