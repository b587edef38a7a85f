#!/usr/bin/env python3
"""Turns a job-array file into one SageMaker CreateTrainingJob request per line, and submits them.

Each line of the job-array file is one training job, in the region that holds its data (the
multi-region pattern: train where the data and the capacity are, one job per region):

    # region,s3-data-location[,hyperparameters]
    us-east-1,s3://my-bucket-use1/imagenet
    eu-west-1,s3://my-bucket-euw1/imagenet,{"epochs": "40", "mini_batch_size": "1024"}
    us-west-2,s3://my-bucket-usw2/imagenet,epochs=40 image_shape=3,160,160

s3-data-location holds train/ (and validation/) as the template's channels expect. Hyperparameters are a
JSON object or space-separated key=value pairs; they override the template's. Blank lines and lines
starting with # are skipped.

The request starts from docker/templates/sagemaker-training-job.json; these placeholders in its strings
are filled per line: {region}, {data} (the S3 location, no trailing /), {bucket} (its bucket: outputs and
checkpoints go to the data's bucket, in the job's region), {job_name}, {account} (--account). --image and
--role-arn replace the template's image and role.

    scripts/make_training_jobs.py jobs.txt --account 123456789012 --dry-run   # prints the requests
    scripts/make_training_jobs.py jobs.txt --account 123456789012             # submits them (boto3)

Exit codes: 0 done, 2 a malformed job-array file or a bad option (every problem is listed, with its line).
"""
import argparse
import copy
import datetime
import json
import os
import re
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_TEMPLATE = os.path.join(REPO, "docker", "templates", "sagemaker-training-job.json")
LINE_FORMAT = "region,s3://bucket/prefix[,hyperparameters]"
REGION = re.compile(r"^[a-z]{2}(-gov|-iso[a-z]*)?-[a-z]+-\d+$")
S3_LOCATION = re.compile(r"^s3://([a-z0-9][a-z0-9.\-]{1,61}[a-z0-9])(/.*)?$")
PLACEHOLDER = re.compile(r"\{([a-z_]+)\}")
# SageMaker: job names are 1-63 characters of [a-zA-Z0-9-], not starting or ending with -.
JOB_NAME_LIMIT = 63


class JobArrayError(ValueError):
    pass


def parse_hyperparameters(text):
    """A JSON object or key=value pairs; every value becomes a string, as SageMaker wants."""
    text = text.strip()
    if not text:
        return {}
    if text.startswith("{"):
        try:
            value = json.loads(text)
        except json.JSONDecodeError as error:
            raise JobArrayError(f"hyperparameters: not valid JSON ({error.msg} at column {error.colno})")
        if not isinstance(value, dict):
            raise JobArrayError("hyperparameters: expected a JSON object")
        pairs = value.items()
    else:
        pairs = []
        for word in text.split():
            key, equals, value = word.partition("=")
            if not equals or not key:
                raise JobArrayError(f"hyperparameters: expected key=value, got {word!r}")
            pairs.append((key, value))
    return {str(key): value if isinstance(value, str) else json.dumps(value) for key, value in pairs}


def parse_line(text):
    """One job-array line -> (region, data location, hyperparameters)."""
    fields = text.split(",", 2)  # hyperparameters may hold commas themselves (image_shape=3,224,224, JSON)
    if len(fields) < 2:
        raise JobArrayError(f"expected {LINE_FORMAT}, got {text.strip()!r} (no comma)")
    region, data = fields[0].strip(), fields[1].strip()
    if not REGION.match(region):
        raise JobArrayError(f"expected an AWS region such as us-east-1 first, got {region!r}")
    if not S3_LOCATION.match(data):
        raise JobArrayError(f"expected an S3 location such as s3://bucket/prefix second, got {data!r}")
    hyperparameters = parse_hyperparameters(fields[2]) if len(fields) == 3 else {}
    return region, data.rstrip("/"), hyperparameters


def read_job_array(path):
    """All jobs of the file, or a JobArrayError listing every malformed line (path:line: what was wrong)."""
    jobs, problems = [], []
    with open(path, encoding="utf-8") as file:
        for number, line in enumerate(file, start=1):
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            try:
                jobs.append((number, *parse_line(line.rstrip("\n"))))
            except JobArrayError as error:
                problems.append(f"{path}:{number}: {error}")
    if problems:
        raise JobArrayError("\n".join(problems))
    if not jobs:
        raise JobArrayError(f"{path}: no jobs (expected lines of {LINE_FORMAT})")
    return jobs


def job_name(prefix, region, number, stamp):
    name = f"{prefix}-{region}-{number}-{stamp}"
    name = re.sub(r"[^a-zA-Z0-9-]", "-", name)
    # Keep the distinguishing tail (region, line, time) when the prefix is long.
    return name[-JOB_NAME_LIMIT:].strip("-")


def fill(value, names):
    """Replaces {placeholder}s in every string of value; an unknown one is an error naming it."""
    if isinstance(value, dict):
        return {key: fill(item, names) for key, item in value.items()}
    if isinstance(value, list):
        return [fill(item, names) for item in value]
    if isinstance(value, str):
        def replace(match):
            if match.group(1) not in names:
                raise JobArrayError(f"the template's {match.group(0)} has no value"
                                    + (": pass --account" if match.group(1) == "account" else ""))
            return names[match.group(1)]
        return PLACEHOLDER.sub(replace, value)
    return value


def make_request(template, region, data, hyperparameters, name, options):
    request = copy.deepcopy(template)
    if options.image:
        request["AlgorithmSpecification"]["TrainingImage"] = options.image
    if options.role_arn:
        request["RoleArn"] = options.role_arn
    if options.instance_count:
        request["ResourceConfig"]["InstanceCount"] = options.instance_count
    if options.instance_type:
        request["ResourceConfig"]["InstanceType"] = options.instance_type
    names = {"region": region, "data": data, "bucket": S3_LOCATION.match(data).group(1), "job_name": name}
    if options.account:
        names["account"] = options.account
    request = fill(request, names)
    request["HyperParameters"] = {**request.get("HyperParameters", {}), **hyperparameters}
    return request


def submit(requests):
    try:
        import boto3  # only needed to submit; --dry-run works without it
    except ImportError:
        sys.exit("make_training_jobs: submitting needs boto3 (pip install boto3), or use --dry-run")
    for region, request in requests:
        response = boto3.client("sagemaker", region_name=region).create_training_job(**request)
        print(f"{region}: {response['TrainingJobArn']}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("job_array", help=f"file of {LINE_FORMAT} lines")
    parser.add_argument("--template", default=DEFAULT_TEMPLATE, help="CreateTrainingJob request template (JSON)")
    parser.add_argument("--account", help="AWS account id for the template's {account}")
    parser.add_argument("--image", help="training image URI (default: the template's, per region)")
    parser.add_argument("--role-arn", help="SageMaker execution role (default: the template's)")
    parser.add_argument("--instance-count", type=int, help="hosts per job (default: the template's)")
    parser.add_argument("--instance-type", help="instance type (default: the template's)")
    parser.add_argument("--name-prefix", default="train", help="job names are PREFIX-REGION-LINE-TIME")
    parser.add_argument("--dry-run", action="store_true", help="print the requests as JSON; submit nothing")
    options = parser.parse_args(argv)
    if options.account is not None and not re.fullmatch(r"\d{12}", options.account):
        parser.error(f"--account: expected a 12-digit AWS account id, got {options.account!r}")

    with open(options.template, encoding="utf-8") as file:
        template = json.load(file)
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%d-%H%M%S")
    try:
        requests = [(region, make_request(template, region, data, hyperparameters,
                                          job_name(options.name_prefix, region, number, stamp), options))
                    for number, region, data, hyperparameters in read_job_array(options.job_array)]
    except JobArrayError as error:
        print(f"make_training_jobs: {error}", file=sys.stderr)
        return 2
    if options.dry_run:
        json.dump([{"region": region, "request": request} for region, request in requests], sys.stdout, indent=2)
        print()
        return 0
    submit(requests)
    return 0


if __name__ == "__main__":
    sys.exit(main())
