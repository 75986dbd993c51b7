//! The local identity provider: a Cognito user-pool emulator (moto's server,
//! which `infra/lib.sh` starts) set up with template.yaml's user pool and app
//! client, and fresh tokens for named local users. It speaks Cognito's own
//! JSON API, so the AWS CLI works against it with only `--endpoint-url`.

use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

type Error = Box<dyn std::error::Error>;

/// The password every user `blog-admin token` makes has (local only; it
/// meets the template's password policy).
pub const LOCAL_PASSWORD: &str = "Local-password-1";

/// Where the local user pool is, saved by `identity-provider` for `token`
/// and the scripts.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LocalPool {
    pub endpoint: String,
    pub region: String,
    pub user_pool_id: String,
    pub client_id: String,
}

impl LocalPool {
    pub fn load(path: &Path) -> Result<Self, Error> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("{}: {e} (is ./infra/run-local.sh running?)", path.display()))?;
        Ok(serde_json::from_str(&text)?)
    }

    pub fn save(&self, path: &Path) -> Result<(), Error> {
        std::fs::write(path, serde_json::to_string_pretty(self)?)?;
        Ok(())
    }
}

/// One call of Cognito's JSON API.
async fn call(endpoint: &str, action: &str, body: Value) -> Result<Value, Error> {
    let http = reqwest::Client::builder().no_proxy().build()?;
    let answer = http
        .post(endpoint)
        .header("content-type", "application/x-amz-json-1.1")
        .header(
            "x-amz-target",
            format!("AWSCognitoIdentityProviderService.{action}"),
        )
        .json(&body)
        .send()
        .await?;
    let status = answer.status();
    let value: Value = answer.json().await.unwrap_or(Value::Null);
    if !status.is_success() {
        return Err(format!("{action}: {status} {value}").into());
    }
    Ok(value)
}

/// Creates template.yaml's user pool and app client in the emulator at
/// `endpoint`, self sign-up on (as `SelfSignUp=true` deploys it).
pub async fn create_pool(endpoint: &str, region: &str, template: &str) -> Result<LocalPool, Error> {
    let template: serde_yaml_ng::Value = serde_yaml_ng::from_str(template)?;
    let pool = &template["Resources"]["UserPool"]["Properties"];
    let client = &template["Resources"]["UserPoolClient"]["Properties"];
    let json_of = |v: &serde_yaml_ng::Value| serde_json::to_value(v).unwrap_or(Value::Null);
    let created = call(
        endpoint,
        "CreateUserPool",
        json!({
            "PoolName": "blog-local",
            "UsernameAttributes": json_of(&pool["UsernameAttributes"]),
            "AutoVerifiedAttributes": json_of(&pool["AutoVerifiedAttributes"]),
            "Policies": json_of(&pool["Policies"]),
            "AdminCreateUserConfig": { "AllowAdminCreateUserOnly": false },
        }),
    )
    .await?;
    let user_pool_id = created["UserPool"]["Id"]
        .as_str()
        .ok_or("CreateUserPool answered no Id")?
        .to_owned();
    let made = call(
        endpoint,
        "CreateUserPoolClient",
        json!({
            "UserPoolId": user_pool_id,
            "ClientName": "blog-local",
            "GenerateSecret": json_of(&client["GenerateSecret"]),
            "ExplicitAuthFlows": json_of(&client["ExplicitAuthFlows"]),
        }),
    )
    .await?;
    let client_id = made["UserPoolClient"]["ClientId"]
        .as_str()
        .ok_or("CreateUserPoolClient answered no ClientId")?
        .to_owned();
    Ok(LocalPool {
        endpoint: endpoint.to_owned(),
        region: region.to_owned(),
        user_pool_id,
        client_id,
    })
}

/// A fresh ID token of the local user `name` (`name@example.com`, signed up
/// and confirmed first if it is new).
pub async fn token(pool: &LocalPool, name: &str) -> Result<String, Error> {
    let email = format!("{name}@example.com");
    let signed_up = call(
        &pool.endpoint,
        "SignUp",
        json!({ "ClientId": pool.client_id, "Username": email, "Password": LOCAL_PASSWORD }),
    )
    .await;
    match signed_up {
        Ok(_) => {
            call(
                &pool.endpoint,
                "AdminConfirmSignUp",
                json!({ "UserPoolId": pool.user_pool_id, "Username": email }),
            )
            .await?;
        }
        Err(err) if err.to_string().contains("UsernameExistsException") => {}
        Err(err) => return Err(err),
    }
    let auth = call(
        &pool.endpoint,
        "InitiateAuth",
        json!({
            "AuthFlow": "USER_PASSWORD_AUTH",
            "ClientId": pool.client_id,
            "AuthParameters": { "USERNAME": email, "PASSWORD": LOCAL_PASSWORD },
        }),
    )
    .await?;
    Ok(auth["AuthenticationResult"]["IdToken"]
        .as_str()
        .ok_or("InitiateAuth answered no IdToken")?
        .to_owned())
}
