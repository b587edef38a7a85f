// resourceconfig.json: the shapes SageMaker and the SDK's local mode write, and every way it can be wrong,
// each with the exact message the user sees.
#include "common/json_file.h"
#include "job/cluster.h"
#include "job/resource_config.h"
#include "tests/unit/job_files_fixture.h"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

using namespace train;
using namespace train::testing;  // the job files' fixture (tests/unit/job_files_fixture.h)

namespace {

const auto parse_text = config_text_parser(parse_resource_config, "resourceconfig.json");

}  // namespace

TEST_CASE("resourceconfig: the SDK's local mode writes only four keys", "[resource_config]") {
  // sagemaker.local.image writes exactly these for every container of a local-mode job.
  auto config = parse_text(R"({"current_host": "algo-2-x7k2p", "hosts": ["algo-1-x7k2p", "algo-2-x7k2p"],
                               "network_interface_name": "eth0", "current_instance_type": "local"})");
  CHECK(config.current_host == "algo-2-x7k2p");
  CHECK(config.hosts == std::vector<std::string>{"algo-1-x7k2p", "algo-2-x7k2p"});
  CHECK(config.network_interface_name == "eth0");
  CHECK(config.current_instance_type == "local");
  CHECK(config.current_group_name.empty());
  CHECK(config.instance_groups.empty());

  auto cluster = cluster_from_sagemaker(config);
  CHECK(cluster.platform == JobPlatform::sagemaker);
  CHECK(cluster.master_host == "algo-1-x7k2p");
  CHECK_FALSE(cluster.is_master());
}

TEST_CASE("resourceconfig: a full SageMaker file with instance groups and a null topology", "[resource_config]") {
  const std::string text = R"({
    "current_host": "algo-3",
    "current_instance_type": "ml.p4d.24xlarge",
    "current_group_name": "homogeneousCluster",
    "hosts": ["algo-1", "algo-2", "algo-3"],
    "instance_groups": [
      {"instance_group_name": "homogeneousCluster", "instance_type": "ml.p4d.24xlarge",
       "hosts": ["algo-3", "algo-1", "algo-2"]}
    ],
    "network_interface_name": "ethwe",
    "topology": null
  })";
  auto config = parse_text(text);
  CHECK(config.current_host == "algo-3");
  CHECK(config.hosts == std::vector<std::string>{"algo-1", "algo-2", "algo-3"});
  CHECK(config.network_interface_name == "ethwe");
  CHECK(config.current_instance_type == "ml.p4d.24xlarge");
  CHECK(config.current_group_name == "homogeneousCluster");
  REQUIRE(config.instance_groups.size() == 1);
  CHECK(config.instance_groups[0].name == "homogeneousCluster");
  CHECK(config.instance_groups[0].instance_type == "ml.p4d.24xlarge");
  // Group host lists are kept as SageMaker wrote them: not sorted.
  CHECK(config.instance_groups[0].hosts == std::vector<std::string>{"algo-3", "algo-1", "algo-2"});
  // The document is kept whole for SM_RESOURCE_CONFIG, null topology included.
  CHECK(config.document == nlohmann::json::parse(text));
  CHECK(config.document.at("topology").is_null());

  auto cluster = cluster_from_sagemaker(config);
  CHECK(cluster.hosts == std::vector<std::string>{"algo-1", "algo-2", "algo-3"});
  CHECK(cluster.current_host == "algo-3");
  CHECK(cluster.master_host == "algo-1");
  CHECK(cluster.network_interface == "ethwe");
  CHECK_FALSE(cluster.is_master());
}

TEST_CASE("resourceconfig: heterogeneous instance groups", "[resource_config]") {
  auto config = parse_text(R"({
    "current_host": "algo-1", "current_group_name": "train", "current_instance_type": "ml.p5.48xlarge",
    "hosts": ["algo-1", "algo-2", "algo-3"],
    "instance_groups": [
      {"instance_group_name": "train", "instance_type": "ml.p5.48xlarge", "hosts": ["algo-2", "algo-1"]},
      {"instance_group_name": "data", "instance_type": "ml.c5.18xlarge", "hosts": ["algo-3"]}
    ]})");
  REQUIRE(config.instance_groups.size() == 2);
  CHECK(config.instance_groups[0].hosts == std::vector<std::string>{"algo-2", "algo-1"});
  CHECK(config.instance_groups[1].name == "data");
  CHECK(config.instance_groups[1].instance_type == "ml.c5.18xlarge");
  CHECK(config.instance_groups[1].hosts == std::vector<std::string>{"algo-3"});
}

TEST_CASE("resourceconfig: hosts given unsorted are sorted, the master is the first sorted", "[resource_config]") {
  auto config = parse_text(R"({"current_host": "algo-2", "hosts": ["algo-2", "algo-10", "algo-1", "algo-9"]})");
  // Lexicographic, as SageMaker sorts them: "algo-10" before "algo-2" (job/master_election.h).
  CHECK(cluster_from_sagemaker(config).all_hosts == std::vector<std::string>{"algo-1", "algo-10", "algo-2", "algo-9"});
  CHECK(cluster_from_sagemaker(config).master_host == "algo-1");

  auto without_one = parse_text(R"({"current_host": "algo-10", "hosts": ["algo-2", "algo-10"]})");
  auto cluster = cluster_from_sagemaker(without_one);
  CHECK(cluster.hosts == std::vector<std::string>{"algo-10", "algo-2"});
  CHECK(cluster.master_host == "algo-10");
  CHECK(cluster.is_master());
}

TEST_CASE("resourceconfig: defaults and tolerated extras", "[resource_config]") {
  SECTION("only the required keys") {
    auto config = parse_text(R"({"current_host": "algo-1", "hosts": ["algo-1"]})");
    CHECK(config.network_interface_name == "eth0");
    CHECK(config.current_instance_type.empty());
    auto cluster = cluster_from_sagemaker(config);
    CHECK(cluster.single_host());
    CHECK(cluster.is_master());
    CHECK(cluster.network_interface == "eth0");
  }
  SECTION("null optional values mean absent") {
    auto config = parse_text(R"({"current_host": "algo-1", "hosts": ["algo-1"], "network_interface_name": null,
                                 "current_instance_type": null, "current_group_name": null,
                                 "instance_groups": null})");
    CHECK(config.network_interface_name == "eth0");
    CHECK(config.current_instance_type.empty());
    CHECK(config.instance_groups.empty());
  }
  SECTION("keys SageMaker may add later are ignored") {
    auto config = parse_text(R"({"current_host": "algo-1", "hosts": ["algo-1"], "future_key": {"x": [1, 2]}})");
    CHECK(config.hosts == std::vector<std::string>{"algo-1"});
  }
  SECTION("host names with dots and underscores, as Batch-style or FQDN hosts") {
    auto config = parse_text(R"({"current_host": "ip-10-0-0-1.ec2.internal",
                                 "hosts": ["ip-10-0-0-1.ec2.internal", "worker_2"]})");
    CHECK(config.hosts == std::vector<std::string>{"ip-10-0-0-1.ec2.internal", "worker_2"});
  }
}

TEST_CASE("resourceconfig: helper predicates", "[resource_config]") {
  CHECK(is_valid_host_name("algo-1"));
  CHECK(is_valid_host_name(std::string(253, 'a')));
  CHECK_FALSE(is_valid_host_name(std::string(254, 'a')));
  CHECK_FALSE(is_valid_host_name(""));
  CHECK_FALSE(is_valid_host_name("algo 1"));
  CHECK_FALSE(is_valid_host_name("algo/1"));
  CHECK(is_valid_interface_name("eth0"));
  CHECK(is_valid_interface_name("enp0s31f6"));
  CHECK(is_valid_interface_name(std::string(15, 'e')));
  CHECK_FALSE(is_valid_interface_name(std::string(16, 'e')));
  CHECK_FALSE(is_valid_interface_name(".."));
  CHECK_FALSE(is_valid_interface_name("eth 0"));
}

namespace {

std::vector<MalformedCase> malformed_resource_configs() {
  const std::string long_host(300, 'h');
  return {
      // Not JSON, or not the JSON we accept.
      {"empty file", "",
       "resourceconfig.json: not valid JSON (parse error at line 1, column 1: syntax error while parsing value - "
       "unexpected end of input; expected '[', '{', or a literal); fix the file so that it is one UTF-8 JSON "
       "object"},
      {"truncated", R"({"current_host": "algo-1", "hosts": ["algo-1"])",
       "resourceconfig.json: not valid JSON (parse error at line 1, column 47: syntax error while parsing object - "
       "unexpected end of input; expected '}'); fix the file so that it is one UTF-8 JSON object"},
      {"trailing comma", R"({"current_host": "algo-1", "hosts": ["algo-1"],})",
       "resourceconfig.json: not valid JSON (parse error at line 1, column 48: syntax error while parsing object "
       "key - unexpected '}'; expected string literal); fix the file so that it is one UTF-8 JSON object"},
      {"non-UTF-8 byte in a host name", "{\"current_host\": \"algo-\xff\", \"hosts\": [\"algo-1\"]}",
       "resourceconfig.json: not valid JSON (parse error at line 1, column 24: syntax error while parsing value - "
       "invalid string: ill-formed UTF-8 byte; last read: '\"algo-\\xFF'); fix the file so that it is one UTF-8 "
       "JSON object"},
      {"Latin-1 text", "{\"current_host\": \"h\xf4te\", \"hosts\": [\"h\xf4te\"]}",
       "resourceconfig.json: not valid JSON (parse error at line 1, column 21: syntax error while parsing value - "
       "invalid string: ill-formed UTF-8 byte; last read: '\"h\\xF4t'); fix the file so that it is one UTF-8 "
       "JSON object"},
      {"duplicate key", R"({"current_host": "algo-1", "hosts": ["algo-1"], "current_host": "algo-2"})",
       "resourceconfig.json: key \"current_host\" appears more than once in one object; keep exactly one"},
      {"nested absurdly deep",
       R"({"current_host": "algo-1", "hosts": )" + std::string(100, '[') + std::string(100, ']') + "}",
       "resourceconfig.json: expected at most 64 levels of nested lists and objects, found more; a job description "
       "file needs only a few, so fix the file"},
      {"a list", R"(["algo-1"])",
       "resourceconfig.json: expected a JSON object with \"current_host\" and \"hosts\", got a list"},
      {"a string", R"("algo-1")",
       "resourceconfig.json: expected a JSON object with \"current_host\" and \"hosts\", got a string"},
      {"null", "null", "resourceconfig.json: expected a JSON object with \"current_host\" and \"hosts\", got null"},

      // current_host.
      {"empty object", "{}",
       "resourceconfig.json: missing required key \"current_host\" (this host's name, e.g. \"algo-1\")"},
      {"no current_host", R"({"hosts": ["algo-1"]})",
       "resourceconfig.json: missing required key \"current_host\" (this host's name, e.g. \"algo-1\")"},
      {"current_host a number", R"({"current_host": 1, "hosts": ["algo-1"]})",
       "resourceconfig.json: \"current_host\": expected a host name (1-253 letters, digits, '-', '.', '_'), got an "
       "integer 1"},
      {"current_host null", R"({"current_host": null, "hosts": ["algo-1"]})",
       "resourceconfig.json: \"current_host\": expected a host name (1-253 letters, digits, '-', '.', '_'), got "
       "null"},
      {"current_host a list", R"({"current_host": ["algo-1"], "hosts": ["algo-1"]})",
       "resourceconfig.json: \"current_host\": expected a host name (1-253 letters, digits, '-', '.', '_'), got a "
       "list [\"algo-1\"]"},
      {"current_host empty", R"({"current_host": "", "hosts": ["algo-1"]})",
       "resourceconfig.json: \"current_host\": expected a host name (1-253 letters, digits, '-', '.', '_'), got a "
       "string \"\""},
      {"current_host a path", R"({"current_host": "../algo-1", "hosts": ["algo-1"]})",
       "resourceconfig.json: \"current_host\": expected a host name (1-253 letters, digits, '-', '.', '_'), got a "
       "string \"../algo-1\""},
      {"current_host with a space", R"({"current_host": "algo 1", "hosts": ["algo-1"]})",
       "resourceconfig.json: \"current_host\": expected a host name (1-253 letters, digits, '-', '.', '_'), got a "
       "string \"algo 1\""},
      {"current_host huge", R"({"current_host": ")" + long_host + R"(", "hosts": ["algo-1"]})",
       "resourceconfig.json: \"current_host\": expected a host name (1-253 letters, digits, '-', '.', '_'), got a "
       "string \"" + std::string(59, 'h') + "... (302 characters)"},
      {"current_host not among hosts", R"({"current_host": "algo-3", "hosts": ["algo-2", "algo-1"]})",
       "resourceconfig.json: \"current_host\" \"algo-3\" is not one of \"hosts\" [\"algo-2\",\"algo-1\"]; it must be "
       "listed there"},

      // hosts.
      {"no hosts", R"({"current_host": "algo-1"})",
       "resourceconfig.json: missing required key \"hosts\" (every host of the job, e.g. [\"algo-1\"])"},
      {"hosts empty", R"({"current_host": "algo-1", "hosts": []})",
       "resourceconfig.json: \"hosts\": expected a non-empty list of host names such as [\"algo-1\", \"algo-2\"], "
       "got an empty list"},
      {"hosts a string", R"({"current_host": "algo-1", "hosts": "algo-1"})",
       "resourceconfig.json: \"hosts\": expected a non-empty list of host names such as [\"algo-1\", \"algo-2\"], "
       "got a string \"algo-1\""},
      {"hosts an object", R"({"current_host": "algo-1", "hosts": {"algo-1": 8}})",
       "resourceconfig.json: \"hosts\": expected a non-empty list of host names such as [\"algo-1\", \"algo-2\"], "
       "got an object {\"algo-1\":8}"},
      {"hosts null", R"({"current_host": "algo-1", "hosts": null})",
       "resourceconfig.json: \"hosts\": expected a non-empty list of host names such as [\"algo-1\", \"algo-2\"], "
       "got null"},
      {"a host that is a number", R"({"current_host": "algo-1", "hosts": ["algo-1", 2]})",
       "resourceconfig.json: \"hosts\"[1]: expected a host name (1-253 letters, digits, '-', '.', '_'), got an "
       "integer 2"},
      {"an empty host", R"({"current_host": "algo-1", "hosts": ["algo-1", ""]})",
       "resourceconfig.json: \"hosts\"[1]: expected a host name (1-253 letters, digits, '-', '.', '_'), got a "
       "string \"\""},
      {"a host with a slash", R"({"current_host": "algo-1", "hosts": ["algo-1", "a/b"]})",
       "resourceconfig.json: \"hosts\"[1]: expected a host name (1-253 letters, digits, '-', '.', '_'), got a "
       "string \"a/b\""},
      {"a host with a newline", R"({"current_host": "algo-1", "hosts": ["algo-1\nalgo-2"]})",
       "resourceconfig.json: \"hosts\"[0]: expected a host name (1-253 letters, digits, '-', '.', '_'), got a "
       "string \"algo-1\\nalgo-2\""},
      {"a host that is null", R"({"current_host": "algo-1", "hosts": [null]})",
       "resourceconfig.json: \"hosts\"[0]: expected a host name (1-253 letters, digits, '-', '.', '_'), got null"},
      {"a duplicate host", R"({"current_host": "algo-1", "hosts": ["algo-1", "algo-2", "algo-1"]})",
       "resourceconfig.json: \"hosts\": host \"algo-1\" is listed more than once; every host must appear once"},
      {"hosts that differ only in letter case", R"({"current_host": "algo-1", "hosts": ["algo-1", "ALGO-1"]})",
       "resourceconfig.json: \"hosts\": hosts \"algo-1\" and \"ALGO-1\" differ only in letter case, and host names "
       "do not (DNS ignores case), so they name one host twice; every host must appear once"},

      // network_interface_name and the other strings.
      {"interface a number", R"({"current_host": "algo-1", "hosts": ["algo-1"], "network_interface_name": 0})",
       "resourceconfig.json: \"network_interface_name\": expected an interface name such as \"eth0\" (1-15 "
       "characters, no '/' or spaces), got an integer 0"},
      {"interface empty", R"({"current_host": "algo-1", "hosts": ["algo-1"], "network_interface_name": ""})",
       "resourceconfig.json: \"network_interface_name\": expected an interface name such as \"eth0\" (1-15 "
       "characters, no '/' or spaces), got a string \"\""},
      {"interface a path", R"({"current_host": "algo-1", "hosts": ["algo-1"], "network_interface_name": "../eth0"})",
       "resourceconfig.json: \"network_interface_name\": expected an interface name such as \"eth0\" (1-15 "
       "characters, no '/' or spaces), got a string \"../eth0\""},
      {"interface too long",
       R"({"current_host": "algo-1", "hosts": ["algo-1"], "network_interface_name": "eth0123456789012"})",
       "resourceconfig.json: \"network_interface_name\": expected an interface name such as \"eth0\" (1-15 "
       "characters, no '/' or spaces), got a string \"eth0123456789012\""},
      {"interface with a space", R"({"current_host": "algo-1", "hosts": ["algo-1"], "network_interface_name": "eth 0"})",
       "resourceconfig.json: \"network_interface_name\": expected an interface name such as \"eth0\" (1-15 "
       "characters, no '/' or spaces), got a string \"eth 0\""},
      {"instance type a number", R"({"current_host": "algo-1", "hosts": ["algo-1"], "current_instance_type": 5})",
       "resourceconfig.json: \"current_instance_type\": expected a string, got an integer 5"},
      {"group name a list", R"({"current_host": "algo-1", "hosts": ["algo-1"], "current_group_name": []})",
       "resourceconfig.json: \"current_group_name\": expected a string, got a list []"},

      // instance_groups.
      {"instance_groups an object", R"({"current_host": "algo-1", "hosts": ["algo-1"], "instance_groups": {}})",
       "resourceconfig.json: \"instance_groups\": expected a list of groups, got an object {}"},
      {"a group that is a string", R"({"current_host": "algo-1", "hosts": ["algo-1"], "instance_groups": ["train"]})",
       "resourceconfig.json: \"instance_groups\"[0]: expected an object with \"instance_group_name\" and \"hosts\", "
       "got a string \"train\""},
      {"a group's type a number",
       R"({"current_host": "algo-1", "hosts": ["algo-1"], "instance_groups": [{"instance_type": 3}]})",
       "resourceconfig.json: \"instance_groups\"[0]: \"instance_type\": expected a string, got an integer 3"},
      {"a group's name a boolean",
       R"({"current_host": "algo-1", "hosts": ["algo-1"], "instance_groups": [{"instance_group_name": true}]})",
       "resourceconfig.json: \"instance_groups\"[0]: \"instance_group_name\": expected a string, got a boolean true"},
      {"a group's hosts empty",
       R"({"current_host": "algo-1", "hosts": ["algo-1"], "instance_groups": [{"hosts": []}]})",
       "resourceconfig.json: \"instance_groups\"[0][\"hosts\"]: expected a non-empty list of host names such as "
       "[\"algo-1\", \"algo-2\"], got an empty list"},
      {"a group host not among hosts",
       R"({"current_host": "algo-1", "hosts": ["algo-1", "algo-2"],
           "instance_groups": [{"instance_group_name": "a", "hosts": ["algo-1"]},
                               {"instance_group_name": "b", "hosts": ["algo-2", "algo-9"]}]})",
       "resourceconfig.json: \"instance_groups\"[1]: host \"algo-9\" is not one of \"hosts\""},
      {"a group host listed twice",
       R"({"current_host": "algo-1", "hosts": ["algo-1"], "instance_groups": [{"hosts": ["algo-1", "algo-1"]}]})",
       "resourceconfig.json: \"instance_groups\"[0][\"hosts\"]: host \"algo-1\" is listed more than once; every "
       "host must appear once"},
      {"a group host that is bad",
       R"({"current_host": "algo-1", "hosts": ["algo-1"], "instance_groups": [{"hosts": ["algo-1", "a b"]}]})",
       "resourceconfig.json: \"instance_groups\"[0][\"hosts\"][1]: expected a host name (1-253 letters, digits, "
       "'-', '.', '_'), got a string \"a b\""},
  };
}

}  // namespace

TEST_CASE("resourceconfig: malformed files, each with its exact message", "[resource_config][malformed]") {
  require_each_malformed_message(malformed_resource_configs(), parse_text);
}

TEST_CASE("resourceconfig: read from a file names the file", "[resource_config]") {
  train::testing::TempJobDir dir;
  dir.write_config("resourceconfig.json", R"({"current_host": "algo-1", "hosts": ["algo-2"]})");
  auto path = dir.paths().resource_config();
  CHECK(config_error_message([&] { read_resource_config(path); }) ==
        path.string() + ": \"current_host\" \"algo-1\" is not one of \"hosts\" [\"algo-2\"]; it must be listed there");
  CHECK(config_error_message([&] { read_resource_config(dir.root() / "nothing.json"); }) ==
        (dir.root() / "nothing.json").string() + ": cannot open (No such file or directory)");
}
