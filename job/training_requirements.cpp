#include "job/training_requirements.h"

#include <fmt/format.h>

#include <string>
#include <vector>

namespace train {

namespace {

// A Pipe-mode training channel is a stream: how many records an epoch holds and which classes they use are
// known only at its end, so the schedule and the model need both numbers up front, as SageMaker's built-in
// image classification algorithm asks for them.
void check_pipe_channel(const Channel& channel, const Hyperparameters& hp, ConfigProblems& problems) {
  const DataFormat format = hp.data_format;
  if (format != DataFormat::detect && format != DataFormat::tfrecord && format != DataFormat::recordio) {
    problems.add(fmt::format("channel \"{}\" uses Pipe mode, which streams TFRecord or RecordIO objects, but "
                             "hyperparameter data_format is \"{}\": use auto, tfrecord or recordio, or File mode",
                             channel.name, data_format_name(format)));
  }
  std::vector<std::string> missing;
  if (!hp.num_training_samples) {
    missing.push_back("num_training_samples (records per epoch across the job)");
  }
  if (!hp.num_classes) missing.push_back("num_classes");
  if (!missing.empty()) {
    problems.add(fmt::format("channel \"{}\" uses Pipe mode, where the data is a stream that train sees only as it "
                             "trains; set the hyperparameter{} {} (as for SageMaker's built-in image classification "
                             "algorithm)",
                             channel.name, missing.size() > 1 ? "s" : "", fmt::join(missing, " and ")));
  }
}

}  // namespace

const Channel* training_channel(const InputDataConfig& input) {
  const Channel* channel = input.find("train");
  return channel != nullptr ? channel : input.find("training");
}

void check_training_requirements(const JobDescription& job, bool channels_read, ConfigProblems& problems) {
  const auto& hp = job.hyperparameters;
  if (channels_read) {
    if (const Channel* channel = training_channel(job.input)) {
      if (channel->mode == InputMode::pipe) check_pipe_channel(*channel, hp, problems);
    } else if (hp.data_format != DataFormat::synthetic) {
      problems.add("the job has no training data: expected a channel named \"train\" (or \"training\") in "
                   "inputdataconfig.json, or hyperparameter data_format=synthetic for a benchmark");
    }
    const Channel* validation = job.input.find("validation");
    if (validation != nullptr && validation->mode == InputMode::pipe) {
      problems.add("channel \"validation\" uses Pipe mode; train reads validation data in File or FastFile mode "
                   "only (it is read whole every epoch): set its TrainingInputMode to File or FastFile");
    }
  }
  const int batch_per_rank = job.batch_per_rank;  // mini_batch_size split over the host's ranks
  if (job.ranks_per_host > 0 && batch_per_rank < 2) {
    problems.add(fmt::format("hyperparameter `mini_batch_size` gives each of the {} ranks per host {} image{}; batch "
                             "norm needs at least 2 per rank, so use at least {}",
                             job.ranks_per_host, batch_per_rank, batch_per_rank == 1 ? "" : "s",
                             2 * job.ranks_per_host));
  }
}

std::optional<StepRange> timeline_steps(const Hyperparameters& hyperparameters, const EnvironmentMap& environment) {
  const std::optional<StepRange> from_hyperparameter = hyperparameters.timeline_steps;
  const auto variable = lookup(environment, "TRAIN_TIMELINE");
  if (!variable || variable->empty()) return from_hyperparameter;
  const auto from_variable = parse_step_range(*variable);
  if (!from_variable) {
    throw ConfigError(fmt::format("environment variable TRAIN_TIMELINE: expected {}, got \"{}\"",
                                  describe_step_range_format(), *variable));
  }
  if (from_hyperparameter && !(*from_hyperparameter == *from_variable)) {
    throw ConfigError(fmt::format("hyperparameter `timeline_steps` ({}-{}) and environment variable TRAIN_TIMELINE "
                                  "(\"{}\") ask for different steps; set only one",
                                  from_hyperparameter->first, from_hyperparameter->last, *variable));
  }
  return from_variable;
}

}  // namespace train
