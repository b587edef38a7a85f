// How the master host is chosen, for every platform. Each host works out the same answer from the same job
// description, so the hosts agree without talking. The master is the first of the hosts that train, in the
// order that numbers their ranks:
//   SageMaker: the hosts sorted lexicographically ("algo-10" before "algo-2"), as SageMaker writes them
//     (and as SM_HOSTS lists them, whatever order resourceconfig.json had);
//     when instance groups train (a heterogeneous cluster, job/training_hosts.h), their hosts group by group
//     in resourceconfig.json's order, each group's as written there. This is the sagemaker-training
//     toolkit's get_master_hostname: the first distribution host, else the first host.
//   AWS Batch multi-node: the main node (AWS_BATCH_JOB_MAIN_NODE_INDEX), then the others by index.
//   Local: this host alone.
#pragma once

#include "job/cluster.h"

#include <string>
#include <vector>

namespace train {

// Orders cluster.all_hosts as its platform does (above; AWS Batch's come by node index, SageMaker's in any
// order), and sets cluster.hosts, the hosts that train in rank order, and cluster.master_host, the first of
// them. `training_hosts`: a SageMaker job's hosts of the instance groups that train, in the toolkit's order;
// empty when every host trains.
void elect_master(ClusterDescription& cluster, const std::vector<std::string>& training_hosts = {});

}  // namespace train
