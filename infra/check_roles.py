"""The roles `sam deploy` creates, read from the template as the SAM transform
expands it (the transform the SAM CLI ships), not only from what the template
writes: an event source or a feature adds managed policies of its own, and
those count too.

Every function's role may hold AWS's basic execution role (its own logs) and
X-Ray's write-only access (traces), nothing broader; every inline statement
names its actions and resources, except X-Ray's, which take no resource. No
role but the stream's readers' (the fan-out, and park-failures, which reads
failed records back) may touch the stream. Prints one line per role
and a total line; exits 1 on any breach."""

import os
import sys
from pathlib import Path

from samtranslator.translator.transform import transform
from samtranslator.yaml_helper import yaml_parse

ALLOWED_MANAGED = {
    "arn:aws:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole",
    "arn:aws:iam::aws:policy/AWSXrayWriteOnlyAccess",
}
STREAM_ACTIONS = {
    "dynamodb:DescribeStream",
    "dynamodb:GetRecords",
    "dynamodb:GetShardIterator",
    "dynamodb:ListStreams",
}


class NoManagedPolicyNames:
    """The template names no managed policy by its bare name, so the
    transform never needs IAM to resolve one."""

    def load(self):
        return {}


def as_list(value):
    return value if isinstance(value, list) else [value]


def main() -> int:
    root = Path(__file__).resolve().parent.parent
    template = yaml_parse((root / "template.yaml").read_text())
    # The transform wants an S3 address for code that `sam build` packs.
    template["Globals"]["Function"]["CodeUri"] = "s3://bucket/key"
    # The region only fills in pseudo parameters; roles do not depend on it.
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    expanded = transform(template, {}, NoManagedPolicyNames())
    resources = expanded["Resources"]

    problems = []
    roles = {n: r for n, r in resources.items() if r["Type"] == "AWS::IAM::Role"}
    functions = {n: r for n, r in resources.items() if r["Type"] == "AWS::Lambda::Function"}
    role_of = {}
    for name, function in functions.items():
        role = function["Properties"]["Role"]
        # {"Fn::GetAtt": ["XRole", "Arn"]}
        role_name = role["Fn::GetAtt"][0] if isinstance(role, dict) and "Fn::GetAtt" in role else None
        if role_name not in roles:
            problems.append(f"{name}: role {role!r} is not a role of this stack")
        role_of[name] = role_name
    # Only the roles of functions an event source mapping triggers may read a
    # stream: the fan-out, and park-failures (its failure queue's consumer,
    # which reads the failed records back).
    stream_roles = {
        role_of.get(r["Properties"]["FunctionName"].get("Ref"))
        for r in resources.values()
        if r["Type"] == "AWS::Lambda::EventSourceMapping"
    }
    for name, role in roles.items():
        props = role["Properties"]
        extra = set(props.get("ManagedPolicyArns", [])) - ALLOWED_MANAGED
        if extra:
            problems.append(f"{name}: managed policies beyond logs and traces: {sorted(extra)}")
        statements = [s for p in props.get("Policies", []) for s in as_list(p["PolicyDocument"]["Statement"])]
        for s in statements:
            actions = as_list(s["Action"])
            resources_ = as_list(s["Resource"])
            if s.get("Effect") != "Allow":
                continue
            if any("*" in a for a in actions):
                problems.append(f"{name}: wildcard action in {actions}")
            xray_only = all(a.startswith("xray:") for a in actions)
            if "*" in resources_ and not xray_only:
                problems.append(f"{name}: {actions} on every resource")
            if STREAM_ACTIONS & set(actions) and name not in stream_roles:
                problems.append(f"{name}: reads the stream")
        print(f"{name}: {len(statements)} statements, managed {sorted(m.rsplit('/', 1)[-1] for m in props.get('ManagedPolicyArns', []))}")
    for p in problems:
        print(f"FAIL {p}")
    passed = len(roles) if not problems else 0
    print(f"roles: {passed} passed, {len(roles) - passed} failed")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
