"""The job templates under docker/templates/ and scripts/make_training_jobs.py, without AWS: the templates
are the requests the APIs take, their metric regexes are docs/metrics.md's and match train's log lines, the
Batch definition sets only variables train reads (docs/environment.md's table), and the job-array script
makes one request per line (dry run) and names every malformed line. Run: python3 test_job_templates.py
"""
import io
import json
import os
import re
import subprocess
import sys
import tempfile
import unittest
from contextlib import redirect_stderr, redirect_stdout

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
TEMPLATES = os.path.join(REPO, "docker", "templates")
SCRIPT = os.path.join(REPO, "scripts", "make_training_jobs.py")
sys.path.insert(0, os.path.join(REPO, "scripts"))
import make_training_jobs  # noqa: E402

# train's log lines, as docs/metrics.md ("Metrics") shows them.
STEP_LINE = "[rank 0] step=120 epoch=1 loss=1.234567 train_top1=0.5120 lr=0.0375 images_per_sec=412.3 eta=0:12:34"
VALIDATION_LINE = "[rank 0] epoch=1 validation_top1=0.7312 validation_top5=0.9511 validation_images=10000"
EXPECTED_METRICS = {"train:loss": "1.234567", "train:top1": "0.5120", "train:lr": "0.0375",
                    "train:images_per_sec": "412.3", "validation:top1": "0.7312", "validation:top5": "0.9511"}


def load(name):
    with open(os.path.join(TEMPLATES, name)) as file:
        return json.load(file)


def read_doc(page):
    with open(os.path.join(REPO, "docs", page)) as file:
        return file.read()


def doc_section(page, title):
    text = read_doc(page)
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end > 0 else len(text)]


class TemplateTest(unittest.TestCase):
    def test_metric_definitions_are_the_documented_regexes_and_match_train_lines(self):
        metrics = load("sagemaker-training-job.json")["AlgorithmSpecification"]["MetricDefinitions"]
        table = doc_section("metrics.md", "Metrics")
        documented = dict(re.findall(r"^\| `([a-z0-9:_]+)` \| `(.+)` \|$", table, re.M))
        self.assertEqual({m["Name"]: m["Regex"] for m in metrics}, documented)
        for metric in metrics:
            found = re.search(metric["Regex"], STEP_LINE) or re.search(metric["Regex"], VALIDATION_LINE)
            self.assertIsNotNone(found, metric["Name"])
            self.assertEqual(found.group(1), EXPECTED_METRICS[metric["Name"]], metric["Name"])

    def test_sagemaker_request_has_what_a_training_job_needs(self):
        request = load("sagemaker-training-job.json")
        for key in ("TrainingJobName", "AlgorithmSpecification", "RoleArn", "ResourceConfig", "InputDataConfig",
                    "OutputDataConfig", "CheckpointConfig", "StoppingCondition", "HyperParameters"):
            self.assertIn(key, request)
        self.assertEqual(request["CheckpointConfig"]["LocalPath"], "/opt/ml/checkpoints")
        channels = {c["ChannelName"]: c["DataSource"]["S3DataSource"] for c in request["InputDataConfig"]}
        self.assertIn("train", channels)
        for source in channels.values():
            self.assertIn(source["S3DataDistributionType"], ("FullyReplicated", "ShardedByS3Key"))
        # SageMaker takes only string hyperparameters.
        self.assertTrue(all(isinstance(v, str) for v in request["HyperParameters"].values()))

    def test_batch_definition_is_multinode_and_sets_only_what_train_reads(self):
        definition = load("batch-multinode-job-definition.json")
        self.assertEqual(definition["type"], "multinode")
        nodes = definition["nodeProperties"]
        self.assertLess(nodes["mainNode"], nodes["numNodes"])
        documented_variables = set(re.findall(r"^\| `([A-Z_]+)` \|", read_doc("environment.md"), re.M))
        self.assertIn("SAGEMAKER_BASE_DIR", documented_variables)
        for node_range in nodes["nodeRangeProperties"]:
            self.assertNotIn("command", node_range["container"], "the image's ENTRYPOINT is train")
            for variable in node_range["container"]["environment"]:
                self.assertIn(variable["name"], documented_variables)
            # EFA: the uverbs devices reach the container (p5.48xlarge has 32), memory may be locked.
            devices = node_range["container"]["linuxParameters"]["devices"]
            self.assertEqual([d["containerPath"] for d in devices], [f"/dev/infiniband/uverbs{i}" for i in range(32)])
            for device in devices:
                self.assertEqual(device["hostPath"], device["containerPath"])
                self.assertIn("WRITE", device["permissions"])
            self.assertIn({"name": "memlock", "softLimit": -1, "hardLimit": -1}, node_range["container"]["ulimits"])


class MakeTrainingJobsTest(unittest.TestCase):
    def run_script(self, lines, *args):
        with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as file:
            file.write("\n".join(lines) + "\n")
        self.addCleanup(os.unlink, file.name)
        out, err = io.StringIO(), io.StringIO()
        with redirect_stdout(out), redirect_stderr(err):
            code = make_training_jobs.main([file.name, *args])
        return code, out.getvalue(), err.getvalue(), file.name

    def test_one_request_per_line(self):
        code, out, err, _ = self.run_script(
            ["# region,s3-data-location[,hyperparameters]", "",
             "us-east-1,s3://data-use1/imagenet/",
             'eu-west-1,s3://data-euw1/imagenet,{"epochs": 40, "mini_batch_size": "1024"}',
             "us-west-2,s3://data-usw2/imagenet,epochs=40 image_shape=3,160,160"],
            "--account", "123456789012", "--dry-run", "--instance-count", "4")
        self.assertEqual(code, 0, err)
        jobs = json.loads(out)
        self.assertEqual([job["region"] for job in jobs], ["us-east-1", "eu-west-1", "us-west-2"])
        first, second, third = (job["request"] for job in jobs)
        self.assertEqual(first["AlgorithmSpecification"]["TrainingImage"],
                         "123456789012.dkr.ecr.us-east-1.amazonaws.com/train:latest")
        self.assertEqual(first["RoleArn"], "arn:aws:iam::123456789012:role/SageMakerTrainingRole")
        uris = [c["DataSource"]["S3DataSource"]["S3Uri"] for c in second["InputDataConfig"]]
        self.assertEqual(uris, ["s3://data-euw1/imagenet/train/", "s3://data-euw1/imagenet/validation/"])
        self.assertEqual(second["OutputDataConfig"]["S3OutputPath"], "s3://data-euw1/train-output/")
        self.assertTrue(second["CheckpointConfig"]["S3Uri"].endswith(f"/{second['TrainingJobName']}/"))
        self.assertEqual(second["HyperParameters"]["epochs"], "40")
        self.assertEqual(second["HyperParameters"]["mini_batch_size"], "1024")
        self.assertEqual(second["HyperParameters"]["num_layers"], "50")  # the template's, kept
        self.assertEqual(third["HyperParameters"]["image_shape"], "3,160,160")
        self.assertEqual(third["ResourceConfig"]["InstanceCount"], 4)
        names = [job["request"]["TrainingJobName"] for job in jobs]
        self.assertEqual(len(set(names)), 3)
        for name in names:
            self.assertRegex(name, r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")
        self.assertNotIn("{", out.replace("{\n", "").replace('{"', ""))

    def test_malformed_lines_are_named_with_what_was_expected(self):
        code, out, err, path = self.run_script(
            ["us-east-1,s3://good-bucket/x", "us-east,s3://bucket/x", "just-one-field",
             "us-east-1,http://bucket/x", "us-east-1,s3://bucket/x,{not json", "us-east-1,s3://bucket/x,epochs"],
            "--account", "123456789012", "--dry-run")
        self.assertEqual(code, 2)
        self.assertEqual(out, "")
        self.assertIn(f"{path}:2: expected an AWS region such as us-east-1 first, got 'us-east'", err)
        self.assertIn(f"{path}:3: expected region,s3://bucket/prefix[,hyperparameters], got 'just-one-field'", err)
        self.assertIn(f"{path}:4: expected an S3 location such as s3://bucket/prefix second, got 'http://bucket/x'", err)
        self.assertIn(f"{path}:5: hyperparameters: not valid JSON", err)
        self.assertIn(f"{path}:6: hyperparameters: expected key=value, got 'epochs'", err)
        self.assertNotIn(f"{path}:1:", err)

    def test_missing_account_is_named(self):
        code, _, err, _ = self.run_script(["us-east-1,s3://good-bucket/x"], "--dry-run")
        self.assertEqual(code, 2)
        self.assertIn("{account} has no value: pass --account", err)

    def test_command_line(self):
        with tempfile.NamedTemporaryFile("w", suffix=".txt") as file:
            file.write("ap-southeast-2,s3://data-apse2/imagenet\n")
            file.flush()
            result = subprocess.run([sys.executable, SCRIPT, file.name, "--account", "123456789012", "--dry-run"],
                                    capture_output=True, text=True)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(json.loads(result.stdout)[0]["region"], "ap-southeast-2")


if __name__ == "__main__":
    unittest.main(verbosity=2)
