#include "runtime/validation_pass.h"

#include "common/log.h"
#include "runtime/comm/bounded_collectives.h"
#include "runtime/training_batches.h"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

namespace train {

void ValidationPass::validate(EpochEnd& end) {
  const TrainingData& data = context_.data;
  const RankIdentity& identity = context_.identity;
  std::unique_ptr<data::BatchLoader> loader = data.open_validation();
  if (!loader) return;
  const int classes = data.classes();
  std::vector<float> logits(static_cast<size_t>(context_.settings.batch_per_rank) * static_cast<size_t>(classes));
  double counts[3] = {0, 0, 0};  // images, top-1 hits, top-5 hits
  data::Batch batch;
  const int64_t dataset = data.validation_samples();
  const std::chrono::seconds wait_limit = batch_wait_limit(context_.settings, data_timeout_);
  while (wait_for_batch(*loader, batch, wait_limit)) {
    context_.engine.infer(batch, logits.data());
    for (int i = 0; i < batch.size; ++i) {
      // Samples that pad the last ranks' shards repeat earlier ones: count every image once.
      const int64_t global_position = identity.rank + identity.size * (batch.position.index + i);
      if (global_position >= dataset) continue;
      const float* row = logits.data() + static_cast<int64_t>(i) * classes;
      const float truth = row[batch.labels[static_cast<size_t>(i)]];
      int better = 0;
      for (int c = 0; c < classes; ++c) better += row[c] > truth ? 1 : 0;
      counts[0] += 1;
      counts[1] += better == 0 ? 1 : 0;
      counts[2] += better < 5 ? 1 : 0;
    }
  }
  comm::bounded_allreduce(counts, 3, MPI_DOUBLE, MPI_SUM, context_.comm, context_.collective_timeout,
                          "the validation counts");
  const Validation result{counts[1] / std::max(1.0, counts[0]), counts[2] / std::max(1.0, counts[0]),
                          static_cast<int64_t>(counts[0])};
  if (identity.rank == 0) {
    write_line(1, fmt::format("epoch={} validation_top1={:.4f} validation_top5={:.4f} validation_images={}", end.epoch,
                              result.top1, result.top5, result.images));
  }
  end.validation = result;
}

}  // namespace train
