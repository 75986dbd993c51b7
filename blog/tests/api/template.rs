//! template.yaml deploys what the code and the local stack run: the same
//! routes and functions, the same table, least-privilege roles, and no
//! local-only setting.

use std::collections::{BTreeMap, BTreeSet};

use blog::routes::{ROUTES, STREAM_FUNCTIONS};
use serde_yaml_ng::Value;

use crate::support::TestApi;

fn template_text() -> String {
    std::fs::read_to_string(format!("{}/../template.yaml", env!("CARGO_MANIFEST_DIR")))
        .expect("template.yaml")
}

/// The template with CloudFormation's short tags (`!Ref`, `!Sub`…) kept as
/// tagged values.
fn template() -> Value {
    serde_yaml_ng::from_str(&template_text()).expect("template.yaml is YAML")
}

fn resources_of_type<'a>(template: &'a Value, kind: &str) -> Vec<(&'a str, &'a Value)> {
    template["Resources"]
        .as_mapping()
        .expect("Resources")
        .iter()
        .filter(|(_, r)| r["Type"].as_str() == Some(kind))
        .map(|(name, r)| (name.as_str().unwrap_or_default(), r))
        .collect()
}

/// Every function's binary, keyed by its logical id: `sam build` builds
/// each with functions/Makefile (held to these by
/// `sam_build_copies_each_function_its_own_binary`).
fn binaries(template: &Value) -> BTreeMap<&str, &str> {
    resources_of_type(template, "AWS::Serverless::Function")
        .into_iter()
        .map(|(name, f)| {
            assert_eq!(
                f["Metadata"]["BuildMethod"].as_str(),
                Some("makefile"),
                "{name}"
            );
            (
                name,
                f["Metadata"]["BuildProperties"]["Binary"]
                    .as_str()
                    .expect("Binary"),
            )
        })
        .collect()
}

/// Each statement of a function's inline policies, or of its own role's when
/// it names one, as (actions, resource).
fn statements(template: &Value, function: &Value) -> Vec<(Vec<String>, String)> {
    let policies: Vec<Value> = match &function["Properties"]["Role"] {
        // `Role: !GetAtt XRole.Arn`: the statements of that role.
        Value::Tagged(tagged) => {
            let target = tagged.value.as_str().unwrap_or_default();
            let role = target.strip_suffix(".Arn").unwrap_or(target);
            template["Resources"][role]["Properties"]["Policies"]
                .as_sequence()
                .into_iter()
                .flatten()
                .map(|p| p["PolicyDocument"].clone())
                .collect()
        }
        _ => function["Properties"]["Policies"]
            .as_sequence()
            .cloned()
            .unwrap_or_default(),
    };
    policies
        .iter()
        .flat_map(|policy| {
            policy["Statement"]
                .as_sequence()
                .cloned()
                .unwrap_or_default()
        })
        .map(|s| {
            let actions = s["Action"]
                .as_sequence()
                .into_iter()
                .flatten()
                .filter_map(|a| a.as_str().map(str::to_owned))
                .collect();
            (actions, format!("{:?}", s["Resource"]))
        })
        .collect()
}

#[test]
fn a_browser_may_call_every_route_the_api_serves() {
    let template = template();
    let api = &resources_of_type(&template, "AWS::Serverless::HttpApi")[0].1;
    let cors = &api["Properties"]["CorsConfiguration"];
    let allowed: BTreeSet<&str> = cors["AllowMethods"]
        .as_sequence()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    for route in ROUTES {
        assert!(
            allowed.contains(route.method),
            "CORS refuses {} {}",
            route.method,
            route.path
        );
    }
    let headers: BTreeSet<&str> = cors["AllowHeaders"]
        .as_sequence()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    assert!(headers.contains("authorization") && headers.contains("content-type"));
}

#[test]
fn the_http_api_routes_exactly_the_contract() {
    let template = template();
    let mut deployed = BTreeSet::new();
    for (name, function) in resources_of_type(&template, "AWS::Serverless::Function") {
        let binary = function["Metadata"]["BuildProperties"]["Binary"]
            .as_str()
            .expect("Binary");
        for event in function["Properties"]["Events"]
            .as_mapping()
            .into_iter()
            .flat_map(|m| m.values())
        {
            if event["Type"].as_str() != Some("HttpApi") {
                continue;
            }
            let p = &event["Properties"];
            let authorizer = p["Auth"]["Authorizer"].as_str();
            assert!(
                matches!(authorizer, None | Some("JwtAuthorizer")),
                "{name}: {authorizer:?}"
            );
            deployed.insert((
                p["Method"].as_str().expect("Method").to_owned(),
                p["Path"].as_str().expect("Path").to_owned(),
                binary.to_owned(),
                authorizer.is_some(),
            ));
        }
    }
    let contract: BTreeSet<_> = ROUTES
        .iter()
        .map(|r| {
            (
                r.method.to_owned(),
                r.path.to_owned(),
                r.function.to_owned(),
                r.needs_identity,
            )
        })
        .collect();
    assert_eq!(
        deployed, contract,
        "(method, path, function, JWT authorizer)"
    );

    // Each public read route has its own throttle, and so have likes and
    // unlikes (a viral post's; the other writes and the export, a signed-in
    // user's heavy read, take the default one), and a route setting names a
    // route that exists (else the stage fails to deploy).
    let api = &resources_of_type(&template, "AWS::Serverless::HttpApi")[0].1;
    let settings: BTreeSet<String> = api["Properties"]["RouteSettings"]
        .as_mapping()
        .expect("RouteSettings")
        .keys()
        .filter_map(|k| k.as_str().map(str::to_owned))
        .collect();
    let own: BTreeSet<String> = ROUTES
        .iter()
        .filter(|r| {
            (r.method == "GET" && !r.needs_identity)
                || r.function.ends_with("like-post")
                || r.function == "create-comment"
                || r.function.ends_with("follow-user")
        })
        .map(|r| format!("{} {}", r.method, r.path))
        .collect();
    assert_eq!(
        settings, own,
        "route settings: exactly the public reads, likes, unlikes, comments, follows and unfollows"
    );
    for (route, parameter) in [
        ("POST /posts/{postId}/likes", "LikeRateLimit"),
        ("DELETE /posts/{postId}/likes", "LikeRateLimit"),
        ("POST /posts/{postId}/comments", "CommentRateLimit"),
        ("POST /users/{userId}/followers", "FollowRateLimit"),
        ("DELETE /users/{userId}/followers", "FollowRateLimit"),
    ] {
        let limit = &api["Properties"]["RouteSettings"][route]["ThrottlingRateLimit"];
        match limit {
            Value::Tagged(tagged) if tagged.tag == "Ref" => {
                assert_eq!(tagged.value.as_str(), Some(parameter), "{route}");
            }
            other => panic!("{route}: {other:?}"),
        }
    }
}

#[test]
fn every_function_is_deployed_and_has_a_sample_event() {
    let template = template();
    let deployed: BTreeSet<&str> = binaries(&template).into_values().collect();
    let functions: BTreeSet<&str> = blog::routes::functions().collect();
    assert_eq!(deployed, functions);
    for function in functions {
        let path = format!("{}/../events/{function}.json", env!("CARGO_MANIFEST_DIR"));
        assert!(std::path::Path::new(&path).is_file(), "{path}");
    }
}

/// `sam build` runs `make build-<LogicalId>` for every function, with the
/// Makefile of the functions' CodeUri: each target builds the `functions`
/// package for the template's architecture and copies the bootstrap of the
/// binary it names. Every function has a target, naming the function's
/// `Binary`; the Makefile has no other target and names no binary twice.
#[test]
fn sam_build_copies_each_function_its_own_binary() {
    let template = template();
    let globals = &template["Globals"]["Function"];
    assert_eq!(globals["Runtime"].as_str(), Some("provided.al2023"));
    let architectures: Vec<&str> = globals["Architectures"]
        .as_sequence()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(architectures, ["arm64"]);
    let code_uri = globals["CodeUri"].as_str().expect("CodeUri");
    for (name, function) in resources_of_type(&template, "AWS::Serverless::Function") {
        for own in ["CodeUri", "Runtime", "Architectures"] {
            assert!(function["Properties"][own].is_null(), "{name}: {own}");
        }
    }
    let path = format!("{}/../{code_uri}/Makefile", env!("CARGO_MANIFEST_DIR"));
    let makefile = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let lines: Vec<(&str, &str)> = makefile
        .lines()
        .filter_map(|line| {
            let (target, binary) = line.strip_prefix("build-")?.split_once(": BINARY = ")?;
            Some((target, binary.trim()))
        })
        .collect();
    let targets: BTreeMap<&str, &str> = lines.iter().copied().collect();
    assert_eq!(targets.len(), lines.len(), "a target named twice");
    assert_eq!(targets, binaries(&template));
    let named: BTreeSet<&str> = targets.values().copied().collect();
    assert_eq!(named.len(), targets.len(), "two targets copy one binary");
    let builds: Vec<&str> = makefile
        .lines()
        .filter(|line| !line.starts_with('#') && line.contains("cargo lambda build"))
        .collect();
    assert_eq!(builds.len(), 1, "{builds:?}");
    for flag in ["--arm64", "--package functions", "$(PROFILE)"] {
        assert!(builds[0].contains(flag), "{}: {flag}", builds[0]);
    }
}

#[test]
fn no_local_only_setting_is_deployed() {
    let text = template_text().to_lowercase();
    for local in ["dynamodb_endpoint", "localhost", "127.0.0.1"] {
        assert!(!text.contains(local), "template.yaml mentions {local}");
    }
}

/// A short-form intrinsic (`!If [...]`) as its tag and its argument list.
fn intrinsic<'a>(value: &'a Value, tag: &str) -> &'a [Value] {
    match value {
        Value::Tagged(tagged) if tagged.tag == tag => {
            tagged.value.as_sequence().map_or(&[], Vec::as_slice)
        }
        other => panic!("expected {tag}: {other:?}"),
    }
}

/// The table and the user pool outlive the stack and any replacement
/// (every item is keyed by a pool's `sub`), but the rollback of the deploy
/// that created them removes them: a failed first deploy leaves nothing,
/// which deletion protection would prevent, so it follows ProtectData.
#[test]
fn the_data_and_the_identities_are_kept_but_a_failed_first_deploy_leaves_nothing() {
    let template = template();
    for (name, protection, on) in [
        ("Table", "DeletionProtectionEnabled", Value::Bool(true)),
        ("UserPool", "DeletionProtection", Value::from("ACTIVE")),
    ] {
        let resource = &template["Resources"][name];
        assert_eq!(
            resource["DeletionPolicy"].as_str(),
            Some("RetainExceptOnCreate"),
            "{name}"
        );
        assert_eq!(
            resource["UpdateReplacePolicy"].as_str(),
            Some("Retain"),
            "{name}"
        );
        let choice = intrinsic(&resource["Properties"][protection], "!If");
        assert_eq!(choice[0].as_str(), Some("Protect"), "{name}");
        assert_eq!(choice[1], on, "{name}");
    }
    let protect = intrinsic(&template["Conditions"]["Protect"], "!Equals");
    assert_eq!(protect[1].as_str(), Some("true"));
    assert_eq!(
        template["Parameters"]["ProtectData"]["Default"].as_str(),
        Some("false"),
        "a first deploy must be able to roll back"
    );
}

/// GSI1 has its own throttles; DynamoDB publishes throttle metrics only when
/// there are some, so every series is FILLed with 0 or the alarm could stay
/// in ALARM after a burst.
#[test]
fn the_throttle_alarm_watches_the_table_and_gsi1_and_returns_to_ok() {
    let template = template();
    let metrics = template["Resources"]["TableThrottlesAlarm"]["Properties"]["Metrics"]
        .as_sequence()
        .expect("Metrics");
    let mut watched = BTreeSet::new();
    let mut ids = Vec::new();
    let mut expression = "";
    for metric in metrics {
        if let Some(e) = metric["Expression"].as_str() {
            expression = e;
            continue;
        }
        let stat = &metric["MetricStat"]["Metric"];
        let index = stat["Dimensions"]
            .as_sequence()
            .expect("Dimensions")
            .iter()
            .find(|d| d["Name"].as_str() == Some("GlobalSecondaryIndexName"))
            .and_then(|d| d["Value"].as_str());
        watched.insert((stat["MetricName"].as_str().expect("name"), index));
        ids.push(metric["Id"].as_str().expect("Id"));
    }
    assert_eq!(
        watched,
        BTreeSet::from([
            ("ReadThrottleEvents", None),
            ("WriteThrottleEvents", None),
            ("ReadThrottleEvents", Some("GSI1")),
            ("WriteThrottleEvents", Some("GSI1")),
        ])
    );
    let summed: Vec<String> = ids.iter().map(|id| format!("FILL({id}, 0)")).collect();
    assert_eq!(expression, summed.join(" + "));
}

/// CloudFormation refuses a resource type a region does not offer before it
/// reads any condition (the test command lints every commercial region);
/// the budget, whose type only some regions offer, is a stack of its own.
#[test]
fn the_budget_is_its_own_stack_and_can_be_replaced() {
    let template = template();
    let types: BTreeSet<&str> = template["Resources"]
        .as_mapping()
        .expect("Resources")
        .values()
        .filter_map(|r| r["Type"].as_str())
        .collect();
    assert!(
        !types.iter().any(|t| t.starts_with("AWS::Budgets::")),
        "{types:?}"
    );
    let budget: Value = serde_yaml_ng::from_str(
        &std::fs::read_to_string(format!(
            "{}/../infra/budget.yaml",
            env!("CARGO_MANIFEST_DIR")
        ))
        .expect("infra/budget.yaml"),
    )
    .expect("YAML");
    let resource = &budget["Resources"]["MonthlyBudget"];
    assert_eq!(resource["Type"].as_str(), Some("AWS::Budgets::Budget"));
    // A fixed name would collide when a change of notifications replaces it.
    assert!(resource["Properties"]["Budget"]["BudgetName"].is_null());
    let statements =
        budget["Resources"]["BudgetTopicPolicy"]["Properties"]["PolicyDocument"]["Statement"]
            .as_sequence()
            .expect("Statement");
    let publishers: BTreeSet<&str> = statements
        .iter()
        .filter(|s| s["Action"].as_str() == Some("sns:Publish"))
        .filter_map(|s| s["Principal"]["Service"].as_str())
        .collect();
    assert_eq!(
        publishers,
        BTreeSet::from(["budgets.amazonaws.com", "cloudwatch.amazonaws.com"])
    );
}

/// The parameters' rules: an issuer of one's own needs its audience, the
/// ceilings are DynamoDB's (at least 1), the table's key costs nothing
/// unless a KMS key is given, the pool's mail can go through SES, and no
/// function name is fixed (CloudFormation keeps generated ones within
/// Lambda's 64 characters whatever the stack name).
#[test]
fn the_parameters_cannot_deploy_a_broken_or_costly_stack() {
    let template = template();
    let rule = &template["Rules"]["IssuerNeedsAudience"];
    let condition = intrinsic(&rule["RuleCondition"], "!Not");
    let issuer = intrinsic(&condition[0], "!Equals");
    assert_eq!(
        issuer[0],
        serde_yaml_ng::from_str::<Value>("!Ref JwtIssuer").expect("ref")
    );
    let assertion = intrinsic(&rule["Assertions"][0]["Assert"], "!Not");
    let audience = intrinsic(&assertion[0], "!Equals");
    assert_eq!(
        audience[0],
        serde_yaml_ng::from_str::<Value>("!Ref JwtAudience").expect("ref")
    );

    for ceiling in ["MaxReadRequestUnits", "MaxWriteRequestUnits"] {
        assert_eq!(
            template["Parameters"][ceiling]["MinValue"].as_i64(),
            Some(1),
            "{ceiling}"
        );
    }

    let sse = intrinsic(
        &template["Resources"]["Table"]["Properties"]["SSESpecification"],
        "!If",
    );
    assert_eq!(sse[0].as_str(), Some("UseKmsKey"));
    assert!(
        matches!(sse[1]["KMSMasterKeyId"], Value::Tagged(_)),
        "a key of one's own"
    );
    assert_eq!(
        sse[2]["SSEEnabled"].as_bool(),
        Some(false),
        "the free AWS owned key"
    );

    let email = intrinsic(
        &template["Resources"]["UserPool"]["Properties"]["EmailConfiguration"],
        "!If",
    );
    assert_eq!(email[0].as_str(), Some("UseSes"));
    assert_eq!(email[1]["EmailSendingAccount"].as_str(), Some("DEVELOPER"));

    for (name, function) in resources_of_type(&template, "AWS::Serverless::Function") {
        assert!(function["Properties"]["FunctionName"].is_null(), "{name}");
    }
}

/// What `cargo lambda build -p functions` (and so `sam build`) compiles the
/// shared library with: its default features only. The bulk loader
/// (benchmark, fixtures), the admin code (audit, migration, replay, table
/// creation, item sizes, one-process dispatch) are features that only other
/// packages of the workspace turn on, so no request or stream Lambda compiles
/// them.
#[test]
fn a_deployment_build_has_no_local_only_feature() {
    let output = std::process::Command::new(env!("CARGO"))
        .args(["tree", "--offline", "--locked", "--edges", "features"])
        .args(["--package", "functions", "--invert", "blog"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo tree runs");
    assert!(output.status.success(), "{output:?}");
    let tree = String::from_utf8_lossy(&output.stdout);
    let features: BTreeSet<&str> = tree
        .lines()
        .filter_map(|line| line.split("blog feature \"").nth(1))
        .filter_map(|rest| rest.split('"').next())
        .collect();
    for local_only in ["admin", "bulk"] {
        assert!(!features.contains(local_only), "{local_only}: {tree}");
    }
    assert_eq!(features, BTreeSet::from(["default"]), "{tree}");
}

#[test]
fn every_role_allows_only_what_its_function_calls() {
    let template = template();
    let writes = [
        "dynamodb:PutItem",
        "dynamodb:UpdateItem",
        "dynamodb:DeleteItem",
        "dynamodb:ConditionCheckItem",
    ];
    let stream = [
        "dynamodb:DescribeStream",
        "dynamodb:GetRecords",
        "dynamodb:GetShardIterator",
        "dynamodb:ListStreams",
    ];
    let readers: BTreeSet<&str> = ROUTES
        .iter()
        .filter(|r| r.method == "GET")
        .map(|r| r.function)
        .collect();
    for (name, function) in resources_of_type(&template, "AWS::Serverless::Function") {
        let binary = function["Metadata"]["BuildProperties"]["Binary"]
            .as_str()
            .unwrap_or_default();
        let statements = statements(&template, function);
        assert!(!statements.is_empty(), "{name} has an inline policy");
        for (actions, resource) in &statements {
            for action in actions {
                assert!(!action.contains('*'), "{name}: wildcard action {action}");
                assert_ne!(action, "dynamodb:Scan", "{name} may not Scan");
                // Batches only where a page needs them: the export's, the
                // drafts list's, the follow and block lists', the home's, the
                // notifications', a user's Atom feed's and a hot post's first
                // pages' (likes, comments) reads, a follow's
                // backfill of the home, the
                // fan-out's delivery (the follower counts read, the home
                // entries written), and park-failures' records parked.
                if action.starts_with("dynamodb:Batch") {
                    assert!(
                        matches!(
                            (binary, action.as_str()),
                            (
                                "export-user"
                                    | "list-drafts"
                                    | "list-followers"
                                    | "list-following"
                                    | "list-blocks"
                                    | "get-home"
                                    | "list-notifications"
                                    | "list-user-posts-atom"
                                    | "list-comments"
                                    | "list-likes",
                                "dynamodb:BatchGetItem"
                            ) | ("follow-user" | "park-failures", "dynamodb:BatchWriteItem")
                                | (
                                    "fan-out",
                                    "dynamodb:BatchGetItem" | "dynamodb:BatchWriteItem"
                                )
                        ),
                        "{name}: {action}"
                    );
                }
                if readers.contains(binary) {
                    assert!(
                        !writes.contains(&action.as_str()),
                        "{name} only reads, yet has {action}"
                    );
                }
                if stream.contains(&action.as_str()) {
                    assert!(
                        STREAM_FUNCTIONS.contains(&binary),
                        "{name} reads the stream"
                    );
                }
            }
            // X-Ray's actions take no resource.
            if !actions.iter().all(|a| a.starts_with("xray:")) {
                assert!(!resource.contains("\"*\""), "{name}: wildcard resource");
            }
        }
        // Besides its own statements a function gets nothing broader.
        let managed = &function["Properties"]["Policies"];
        assert!(
            managed
                .as_sequence()
                .into_iter()
                .flatten()
                .all(Value::is_mapping),
            "{name}: managed policies"
        );
        // SAM gives the role it generates for a stream event source
        // AWSLambdaDynamoDBExecutionRole, whose stream actions cover every
        // stream in the account: such a function names a role of its own,
        // with no managed policy (infra/check_roles.py reads the roles as
        // SAM expands them).
        let streamed = function["Properties"]["Events"]
            .as_mapping()
            .into_iter()
            .flat_map(|m| m.values())
            .any(|e| e["Type"].as_str() == Some("DynamoDB"));
        if streamed {
            let Value::Tagged(role) = &function["Properties"]["Role"] else {
                panic!("{name} is triggered by the stream and names no role of its own");
            };
            let role = role.value.as_str().unwrap_or_default();
            let role = role.strip_suffix(".Arn").unwrap_or(role);
            assert!(
                template["Resources"][role]["Properties"]["ManagedPolicyArns"].is_null(),
                "{name}: {role} has managed policies"
            );
        }
    }
}

#[tokio::test]
async fn the_deployed_table_is_the_one_the_local_stack_creates() {
    let template = template();
    let deployed = &resources_of_type(&template, "AWS::DynamoDB::Table")[0].1;
    let p = &deployed["Properties"];
    assert_eq!(p["BillingMode"].as_str(), Some("PAY_PER_REQUEST"));
    assert_eq!(
        p["PointInTimeRecoverySpecification"]["PointInTimeRecoveryEnabled"].as_bool(),
        Some(true)
    );
    // Its deletion policies and protection: the_data_and_the_identities_...

    let api = TestApi::start().await;
    let store = &api.app.store;
    let local = store
        .client()
        .describe_table()
        .table_name(store.table())
        .send()
        .await
        .expect("describe");
    let local = local.table.expect("table");

    let attributes = |v: &Value| -> BTreeSet<(String, String)> {
        v.as_sequence()
            .into_iter()
            .flatten()
            .map(|a| {
                (
                    a["AttributeName"].as_str().unwrap_or_default().into(),
                    a["AttributeType"].as_str().unwrap_or_default().into(),
                )
            })
            .collect()
    };
    let local_attributes: BTreeSet<_> = local
        .attribute_definitions()
        .iter()
        .map(|a| {
            (
                a.attribute_name().to_owned(),
                a.attribute_type().as_str().to_owned(),
            )
        })
        .collect();
    assert_eq!(attributes(&p["AttributeDefinitions"]), local_attributes);

    let keys = |v: &Value| -> Vec<(String, String)> {
        v.as_sequence()
            .into_iter()
            .flatten()
            .map(|k| {
                (
                    k["AttributeName"].as_str().unwrap_or_default().into(),
                    k["KeyType"].as_str().unwrap_or_default().into(),
                )
            })
            .collect()
    };
    let local_keys =
        |schema: &[aws_sdk_dynamodb::types::KeySchemaElement]| -> Vec<(String, String)> {
            schema
                .iter()
                .map(|k| {
                    (
                        k.attribute_name().to_owned(),
                        k.key_type().as_str().to_owned(),
                    )
                })
                .collect()
        };
    assert_eq!(keys(&p["KeySchema"]), local_keys(local.key_schema()));

    let deployed_indexes = p["GlobalSecondaryIndexes"].as_sequence().expect("GSIs");
    let local_indexes = local.global_secondary_indexes();
    assert_eq!(deployed_indexes.len(), local_indexes.len());
    for (deployed, local) in deployed_indexes.iter().zip(local_indexes) {
        assert_eq!(deployed["IndexName"].as_str(), local.index_name());
        assert_eq!(keys(&deployed["KeySchema"]), local_keys(local.key_schema()));
        let projection = local.projection().expect("projection");
        assert_eq!(
            deployed["Projection"]["ProjectionType"].as_str(),
            projection.projection_type().map(|t| t.as_str())
        );
        let deployed_attributes: BTreeSet<&str> = deployed["Projection"]["NonKeyAttributes"]
            .as_sequence()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        let local_attributes: BTreeSet<&str> = projection
            .non_key_attributes()
            .iter()
            .map(String::as_str)
            .collect();
        assert_eq!(deployed_attributes, local_attributes);
    }
    let stream = local.stream_specification().expect("stream");
    assert_eq!(
        p["StreamSpecification"]["StreamViewType"].as_str(),
        stream.stream_view_type().map(|v| v.as_str())
    );
    let ttl = store
        .client()
        .describe_time_to_live()
        .table_name(store.table())
        .send()
        .await
        .expect("describe TTL")
        .time_to_live_description
        .expect("TTL");
    assert_eq!(
        (
            p["TimeToLiveSpecification"]["AttributeName"].as_str(),
            p["TimeToLiveSpecification"]["Enabled"].as_bool(),
        ),
        (ttl.attribute_name(), Some(true))
    );
    assert_eq!(ttl.attribute_name(), Some(blog::keys::EXPIRES_AT));
}

#[test]
fn the_openapi_document_describes_exactly_the_contract() {
    let path = format!("{}/../openapi.yaml", env!("CARGO_MANIFEST_DIR"));
    let document: Value =
        serde_yaml_ng::from_str(&std::fs::read_to_string(path).expect("openapi.yaml"))
            .expect("YAML");
    let mut described = BTreeSet::new();
    for (path, operations) in document["paths"].as_mapping().expect("paths") {
        for (method, operation) in operations.as_mapping().expect("operations") {
            let method = method.as_str().unwrap_or_default();
            if method == "parameters" {
                continue;
            }
            let secured = operation["security"]
                .as_sequence()
                .is_some_and(|s| !s.is_empty());
            described.insert((
                method.to_uppercase(),
                path.as_str().unwrap_or_default().to_owned(),
                secured,
            ));
        }
    }
    let contract: BTreeSet<_> = ROUTES
        .iter()
        .map(|r| (r.method.to_owned(), r.path.to_owned(), r.needs_identity))
        .collect();
    assert_eq!(described, contract, "(method, path, needs identity)");
}

/// CloudFront in front of the API (docs/scaling.md, step 1) is there only
/// with `EnableCdn`, caches only what the API's `Cache-Control` allows, keys
/// cached reads by token and origin, and passes every write through.
#[test]
fn the_cdn_is_optional_and_caches_only_what_the_api_allows() {
    let template = template();
    assert_eq!(
        template["Parameters"]["EnableCdn"]["Default"].as_str(),
        Some("false")
    );
    let condition = intrinsic(&template["Conditions"]["CreateCdn"], "Equals");
    assert!(
        condition.iter().any(|v| v.as_str() == Some("true")),
        "CreateCdn: EnableCdn = true, {condition:?}"
    );
    let cdn_resources: Vec<&str> = template["Resources"]
        .as_mapping()
        .expect("Resources")
        .iter()
        .filter(|(_, r)| {
            r["Type"]
                .as_str()
                .is_some_and(|t| t.starts_with("AWS::CloudFront::"))
        })
        .map(|(name, r)| {
            assert_eq!(r["Condition"].as_str(), Some("CreateCdn"), "{name:?}");
            name.as_str().unwrap_or_default()
        })
        .collect();
    assert_eq!(
        cdn_resources,
        ["CdnCachePolicy", "CdnOriginRequestPolicy", "Cdn"]
    );

    // Nothing kept longer than the API's Cache-Control says: no TTL of its
    // own (0 when the API says nothing), and at most 5 minutes.
    let policy = &template["Resources"]["CdnCachePolicy"]["Properties"]["CachePolicyConfig"];
    assert_eq!(policy["MinTTL"].as_u64(), Some(0));
    assert_eq!(policy["DefaultTTL"].as_u64(), Some(0));
    assert!(policy["MaxTTL"].as_u64().is_some_and(|t| t <= 300));
    let key = &policy["ParametersInCacheKeyAndForwardedToOrigin"];
    let key_headers: BTreeSet<&str> = key["HeadersConfig"]["Headers"]
        .as_sequence()
        .expect("cache key headers")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(
        key_headers,
        BTreeSet::from(["Authorization", "Origin"]),
        "a token's answer is never another caller's; CORS answers by origin"
    );
    assert_eq!(
        key["QueryStringsConfig"]["QueryStringBehavior"].as_str(),
        Some("all"),
        "limit and cursor"
    );
    assert_eq!(
        key["CookiesConfig"]["CookieBehavior"].as_str(),
        Some("none")
    );
    let forwarded: BTreeSet<&str> =
        template["Resources"]["CdnOriginRequestPolicy"]["Properties"]["OriginRequestPolicyConfig"]
            ["HeadersConfig"]["Headers"]
            .as_sequence()
            .expect("forwarded headers")
            .iter()
            .filter_map(Value::as_str)
            .collect();
    for header in [
        "Content-Type",
        "Idempotency-Key",
        // An edit's or a deletion's precondition (a read's If-None-Match
        // CloudFront answers itself, or sends when it revalidates).
        "If-Match",
        "Access-Control-Request-Method",
        "Access-Control-Request-Headers",
    ] {
        assert!(forwarded.contains(header), "{header} reaches the API");
    }

    let config = &template["Resources"]["Cdn"]["Properties"]["DistributionConfig"];
    let origin = &config["Origins"][0];
    let domain_text = match &origin["DomainName"] {
        Value::Tagged(tagged) if tagged.tag == "Sub" => tagged.value.as_str().unwrap_or_default(),
        other => panic!("expected !Sub: {other:?}"),
    };
    assert!(
        domain_text.starts_with("${HttpApi}.execute-api."),
        "the HTTP API is the origin: {domain_text}"
    );
    assert_eq!(
        origin["CustomOriginConfig"]["OriginProtocolPolicy"].as_str(),
        Some("https-only")
    );
    let behavior = &config["DefaultCacheBehavior"];
    assert_eq!(
        behavior["ViewerProtocolPolicy"].as_str(),
        Some("https-only")
    );
    let methods = |name: &str| -> BTreeSet<&str> {
        behavior[name]
            .as_sequence()
            .expect(name)
            .iter()
            .filter_map(Value::as_str)
            .collect()
    };
    let routed: BTreeSet<&str> = ROUTES.iter().map(|r| r.method).collect();
    assert!(
        routed.is_subset(&methods("AllowedMethods")),
        "every route's method passes: {routed:?}"
    );
    assert_eq!(methods("CachedMethods"), BTreeSet::from(["GET", "HEAD"]));
    // No error kept for CloudFront's default 10 s: the API's are no-store.
    let errors: BTreeMap<u64, u64> = config["CustomErrorResponses"]
        .as_sequence()
        .expect("CustomErrorResponses")
        .iter()
        .map(|e| {
            assert!(e["ResponsePagePath"].is_null(), "the API's own error body");
            (
                e["ErrorCode"].as_u64().expect("ErrorCode"),
                e["ErrorCachingMinTTL"]
                    .as_u64()
                    .expect("ErrorCachingMinTTL"),
            )
        })
        .collect();
    for code in [400, 403, 404, 405, 414, 416, 500, 501, 502, 503, 504] {
        assert_eq!(errors.get(&code), Some(&0), "{code} cached");
    }
    assert!(
        template["Outputs"]["CdnUrl"]["Condition"].as_str() == Some("CreateCdn"),
        "the CDN's URL is an output when it exists"
    );
}

/// Every function of the template, by its binary's name.
fn functions_by_binary(template: &Value) -> BTreeMap<&str, &Value> {
    resources_of_type(template, "AWS::Serverless::Function")
        .into_iter()
        .map(|(_, f)| {
            (
                f["Metadata"]["BuildProperties"]["Binary"]
                    .as_str()
                    .unwrap_or_default(),
                f,
            )
        })
        .collect()
}

/// Whether a role's `statements` allow `call`: its operation, on GSI1 when
/// a read consumed GSI1's capacity (a write's index upkeep needs no index
/// permission), else on the table. A transaction's parts are not visible in
/// the call: its role must allow a write.
fn role_allows(statements: &[(Vec<String>, String)], call: &blog::store::meter::Call) -> bool {
    let allowed = |action: &str, on_index: bool| {
        statements.iter().any(|(actions, resource)| {
            actions.iter().any(|a| a == action)
                && resource.contains("index/GSI1") == on_index
                && resource.contains("Table")
        })
    };
    let on_index = call.reads() && call.targets.iter().any(|(t, _)| t == blog::keys::GSI1);
    match call.operation.as_str() {
        "TransactWriteItems" => [
            "dynamodb:PutItem",
            "dynamodb:UpdateItem",
            "dynamodb:DeleteItem",
        ]
        .iter()
        .any(|a| allowed(a, false)),
        operation => allowed(&format!("dynamodb:{operation}"), on_index),
    }
}

/// Every DynamoDB call a function makes is allowed by its role. DynamoDB
/// Local enforces no IAM, so a call a role lacks would pass every local test
/// and fail only once deployed: each route runs here once through the API
/// with its calls metered, and each call's operation must be an action of
/// the route's function's role, on the table or on GSI1 as the call read it
/// (a transaction's parts are not visible here: its role must allow a
/// write).
#[tokio::test]
async fn every_call_a_function_makes_is_allowed_by_its_role() {
    let api = TestApi::start().await;
    let template = template();
    let functions = functions_by_binary(&template);
    let (author, fan) = (
        format!("user-{}", ulid::Ulid::generate()),
        format!("user-{}", ulid::Ulid::generate()),
    );
    let mut checked = BTreeSet::new();
    let mut missing = BTreeSet::new();
    let mut run =
        async |method: &str, path: String, who: Option<&str>, body: Option<serde_json::Value>| {
            api.meter.take();
            let (status, reply) = api.call(method, &path, who, body).await;
            assert!(status < 300, "{method} {path}: {status} {reply}");
            let route = ROUTES
                .iter()
                .find(|r| {
                    r.method == method && {
                        let pattern: Vec<&str> = r.path.split('/').collect();
                        let actual: Vec<&str> = path
                            .split('?')
                            .next()
                            .unwrap_or_default()
                            .split('/')
                            .collect();
                        pattern.len() == actual.len()
                            && pattern
                                .iter()
                                .zip(&actual)
                                .all(|(p, a)| p.starts_with('{') || p == a)
                    }
                })
                .unwrap_or_else(|| panic!("no route for {method} {path}"));
            let statements = statements(&template, functions[route.function]);
            for call in api.meter.take() {
                if !role_allows(&statements, &call) {
                    missing.insert(format!("{}: {}", route.function, call.operation));
                }
            }
            checked.insert(route.function);
        };
    run(
        "POST",
        "/users".into(),
        Some(&author),
        Some(serde_json::json!({"username": "author"})),
    )
    .await;
    run(
        "POST",
        "/users".into(),
        Some(&fan),
        Some(serde_json::json!({"username": "fan"})),
    )
    .await;
    let (_, created) = api
        .create_post(&author, serde_json::json!({"title": "t", "content": "c"}))
        .await;
    let post = created["postId"].as_str().expect("a post").to_owned();
    run(
        "POST",
        "/posts".into(),
        Some(&author),
        Some(serde_json::json!({"title": "t", "content": "c"})),
    )
    .await;
    let (_, comment) = api.comment_on(&fan, &post, "hi").await;
    let comment = comment["commentId"].as_str().expect("a comment").to_owned();
    run(
        "POST",
        format!("/posts/{post}/comments"),
        Some(&fan),
        Some(serde_json::json!({"content": "again"})),
    )
    .await;
    run("POST", format!("/posts/{post}/likes"), Some(&fan), None).await;
    for path in [
        format!("/posts/{post}"),
        format!("/posts/{post}/comments"),
        format!("/posts/{post}/likes"),
        format!("/users/{author}"),
        format!("/users/{author}/posts"),
        format!("/users/{author}/posts.atom"),
        "/users?username=author".to_owned(),
        "/feed".to_owned(),
        "/feed.atom".to_owned(),
        "/tags/some-tag/posts".to_owned(),
        "/tags/some-tag/posts.atom".to_owned(),
    ] {
        run("GET", path, None, None).await;
    }
    run(
        "POST",
        format!("/users/{author}/followers"),
        Some(&fan),
        None,
    )
    .await;
    run("GET", format!("/users/{author}/followers"), None, None).await;
    run("GET", format!("/users/{fan}/following"), None, None).await;
    run("GET", "/home".to_owned(), Some(&fan), None).await;
    run(
        "DELETE",
        format!("/users/{author}/followers"),
        Some(&fan),
        None,
    )
    .await;
    run("PUT", format!("/blocks/{author}"), Some(&fan), None).await;
    run("GET", "/blocks".to_owned(), Some(&fan), None).await;
    run("DELETE", format!("/blocks/{author}"), Some(&fan), None).await;
    run("GET", format!("/users/{fan}/export"), Some(&fan), None).await;
    run("GET", format!("/users/{fan}/drafts"), Some(&fan), None).await;
    // The fan-out's notifications of the like and the comments, then the
    // author's list of them (its items and their actors read) and its mark.
    let mut poller = api.poller();
    api.settle(&mut poller).await;
    api.meter.take();
    run("GET", "/notifications".to_owned(), Some(&author), None).await;
    run(
        "POST",
        "/notifications/seen".to_owned(),
        Some(&author),
        Some(serde_json::json!({})),
    )
    .await;
    // A hot post's first pages, from the fan-out's copies of their keys.
    api.make_hot(&post).await;
    api.like(&author, &post).await;
    api.comment(&author, &post, "hot").await;
    api.settle(&mut poller).await;
    run("GET", format!("/posts/{post}/comments"), None, None).await;
    run("GET", format!("/posts/{post}/likes"), None, None).await;
    run("DELETE", format!("/posts/{post}/likes"), Some(&fan), None).await;
    run(
        "PUT",
        format!("/posts/{post}"),
        Some(&author),
        Some(serde_json::json!({"title": "edited"})),
    )
    .await;
    run(
        "DELETE",
        format!("/posts/{post}/comments/{comment}"),
        Some(&fan),
        None,
    )
    .await;
    run(
        "PUT",
        format!("/users/{fan}"),
        Some(&fan),
        Some(serde_json::json!({"username": "renamed"})),
    )
    .await;
    run("DELETE", format!("/posts/{post}"), Some(&author), None).await;
    run("DELETE", format!("/users/{fan}"), Some(&fan), None).await;
    let every: BTreeSet<&str> = ROUTES.iter().map(|r| r.function).collect();
    assert_eq!(checked, every, "every route's function was run");
    assert_eq!(missing, BTreeSet::new(), "calls the roles do not allow");
}

/// The fan-out's role allows every call the fan-out makes: a workload of
/// every rule (new posts, replies, edits and counts, a rename, a deleted
/// post, an erased account) is applied through the stream with its calls
/// metered, and each must be an action of `FanOutRole` on the table or GSI1.
#[tokio::test]
async fn every_call_the_fan_out_makes_is_allowed_by_its_role() {
    let api = TestApi::start().await;
    let template = template();
    let functions = functions_by_binary(&template);
    let statements = statements(&template, functions["fan-out"]);
    let mut poller = api.poller();
    let author = api.user("author").await;
    let fan = api.user("fan").await;
    let kept = api.post(&author, "kept", "text").await;
    let gone = api.post(&author, "gone", "text").await;
    api.comment(&fan, &kept, "hi").await;
    api.like(&fan, &kept).await;
    api.like(&fan, &gone).await;
    // A hot post's like and comment: its first pages copied.
    api.make_hot(&kept).await;
    let other = api.user("other").await;
    api.like(&other, &kept).await;
    api.comment(&other, &kept, "hot").await;
    api.meter.take();
    api.settle(&mut poller).await;
    let mut calls = api.meter.take();
    for (method, path, who, body) in [
        (
            "PUT",
            format!("/posts/{kept}"),
            &author,
            Some(serde_json::json!({"title": "edited"})),
        ),
        (
            "PUT",
            format!("/users/{author}"),
            &author,
            Some(serde_json::json!({"username": "renamed"})),
        ),
        ("DELETE", format!("/posts/{gone}"), &author, None),
        ("DELETE", format!("/users/{fan}"), &fan, None),
    ] {
        let (status, reply) = api.call(method, &path, Some(who), body).await;
        assert!(status < 300, "{method} {path}: {status} {reply}");
    }
    api.meter.take();
    api.settle(&mut poller).await;
    calls.extend(api.meter.take());
    // DescribeTable is the local poller's (the event source mapping's, on
    // AWS), through the same client.
    let calls: Vec<_> = calls
        .into_iter()
        .filter(|call| call.operation != "DescribeTable")
        .collect();
    let operations: BTreeSet<&str> = calls.iter().map(|c| c.operation.as_str()).collect();
    assert!(
        operations.contains("TransactWriteItems") && operations.contains("Query"),
        "the workload ran the fan-out's walks: {operations:?}"
    );
    let missing: BTreeSet<&str> = calls
        .iter()
        .filter(|call| !role_allows(&statements, call))
        .map(|call| call.operation.as_str())
        .collect();
    assert_eq!(missing, BTreeSet::new(), "calls FanOutRole does not allow");
}

/// Every DynamoDB call `park-failures` makes parking a notice's records (a
/// BatchWriteItem spread over the parked partitions) is allowed by its role.
#[tokio::test]
async fn every_call_park_failures_makes_is_allowed_by_its_role() {
    use aws_lambda_events::event::{
        dynamodb::Event,
        streams::{DynamoDbBatchItemFailure, DynamoDbEventResponse},
    };
    use blog::recovery::{self, FailureNotice};
    use local::stream_poller::InvokeError;
    use std::sync::{Arc, Mutex};

    let api = TestApi::start().await;
    let template = template();
    let functions = functions_by_binary(&template);
    let statements = statements(&template, functions["park-failures"]);
    let author = api.user("author").await;
    let fan = api.user("fan").await;
    let post = api.post(&author, "parked", "text").await;
    api.like(&fan, &post).await;
    api.comment(&fan, &post, "hi").await;
    api.wait_for_stream(5).await;
    let notices = Arc::new(Mutex::new(Vec::<FailureNotice>::new()));
    let sink = notices.clone();
    let mut poller = api.poller().with_failure_sink(Box::new(move |notice| {
        sink.lock().expect("lock").push(notice);
        Box::pin(async { Ok(()) })
    }));
    let failing = |event: Event| {
        let mut response = DynamoDbEventResponse::default();
        for record in &event.records {
            let mut failure = DynamoDbBatchItemFailure::default();
            failure.item_identifier = record.change.sequence_number.clone();
            response.batch_item_failures.push(failure);
        }
        std::future::ready(Ok::<_, InvokeError>(response))
    };
    poller.poll_once(&failing).await.expect("poll");
    let notice = notices
        .lock()
        .expect("lock")
        .first()
        .cloned()
        .expect("a notice");
    api.meter.take();
    let streams = crate::support::streams_client(&crate::support::endpoint());
    let parked = recovery::park_batch(&api.app.store, &streams, &notice.batch)
        .await
        .expect("parked");
    assert!(parked.parked > 0, "{parked:?}");
    let calls = api.meter.take();
    let operations: BTreeSet<&str> = calls.iter().map(|c| c.operation.as_str()).collect();
    assert!(operations.contains("BatchWriteItem"), "{operations:?}");
    let missing: BTreeSet<&str> = calls
        .iter()
        .filter(|call| !role_allows(&statements, call))
        .map(|call| call.operation.as_str())
        .collect();
    assert_eq!(
        missing,
        BTreeSet::new(),
        "calls ParkFailuresRole does not allow"
    );
}
