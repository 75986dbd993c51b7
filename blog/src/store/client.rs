//! The SDK client every process builds once and shares across invocations.

use std::time::Duration;

use aws_config::{BehaviorVersion, retry::RetryConfig, timeout::TimeoutConfig};
use aws_sdk_dynamodb::{
    Client,
    config::{Credentials, Region, SharedCredentialsProvider},
};

use super::meter::CapacityMeter;

/// Loads credentials and region from the environment, with short timeouts so
/// that an unreachable DynamoDB becomes a 503 well inside API Gateway's 30 s,
/// and with the SDK's own retries off (see `store::table`).
pub async fn sdk_config() -> aws_config::SdkConfig {
    let timeouts = TimeoutConfig::builder()
        .connect_timeout(Duration::from_secs(2))
        .operation_attempt_timeout(Duration::from_secs(3))
        .operation_timeout(Duration::from_secs(8))
        .build();
    aws_config::defaults(BehaviorVersion::latest())
        .timeout_config(timeouts)
        // One retry layer: the table layer's backoff (`store::table`) retries
        // what is worth retrying, under one budget. SDK retries inside it
        // would multiply the sends of a throttled call (3 × 8).
        .retry_config(RetryConfig::disabled())
        .load()
        .await
}

/// The DynamoDB client, pointed at `endpoint` when one is given (DynamoDB Local).
pub fn dynamodb_client(sdk: &aws_config::SdkConfig, endpoint: Option<&str>) -> Client {
    dynamodb_client_metered(sdk, endpoint, None)
}

/// [`dynamodb_client`], with `meter` recording what each call consumed.
pub fn dynamodb_client_metered(
    sdk: &aws_config::SdkConfig,
    endpoint: Option<&str>,
    meter: Option<CapacityMeter>,
) -> Client {
    let mut config = aws_sdk_dynamodb::config::Builder::from(sdk);
    if let Some(endpoint) = endpoint {
        config = config.endpoint_url(endpoint);
    }
    if let Some(meter) = meter {
        config = config.interceptor(meter);
    }
    Client::from_conf(config.build())
}

/// The DynamoDB Streams client, pointed at `endpoint` like
/// [`dynamodb_client`]: the stream poller reads the table's stream with it,
/// and `park-failures` the records the fan-out gave up on.
pub fn streams_client(
    sdk: &aws_config::SdkConfig,
    endpoint: Option<&str>,
) -> aws_sdk_dynamodbstreams::Client {
    let mut config = aws_sdk_dynamodbstreams::config::Builder::from(sdk);
    if let Some(endpoint) = endpoint {
        config = config.endpoint_url(endpoint);
    }
    aws_sdk_dynamodbstreams::Client::from_conf(config.build())
}

/// Whether `endpoint` (a URL) is on this machine: DynamoDB Local, or the
/// hostile proxy in front of it.
pub fn is_local_endpoint(endpoint: &str) -> bool {
    let rest = endpoint
        .strip_prefix("http://")
        .or_else(|| endpoint.strip_prefix("https://"))
        .unwrap_or(endpoint);
    let authority = rest.split('/').next().unwrap_or_default();
    let host = match authority.strip_prefix('[') {
        Some(bracketed) => bracketed.split(']').next().unwrap_or_default(),
        None => authority.split(':').next().unwrap_or_default(),
    };
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// `sdk` for a tool pointed at `endpoint`: against a local one, DynamoDB
/// Local's credentials (the scripts start it with `-sharedDb`, which takes
/// any) unless the environment names some (`credentials_named`), and
/// us-east-1 unless a region is set, so that `TABLE_NAME` and
/// `DYNAMODB_ENDPOINT` are all a local run needs. Elsewhere, `sdk` as it is.
pub fn with_local_defaults(
    sdk: aws_config::SdkConfig,
    endpoint: Option<&str>,
    credentials_named: bool,
) -> aws_config::SdkConfig {
    if !endpoint.is_some_and(is_local_endpoint) {
        return sdk;
    }
    let mut local = sdk.to_builder();
    if !credentials_named {
        local = local.credentials_provider(SharedCredentialsProvider::new(Credentials::new(
            "local",
            "local",
            None,
            None,
            "DynamoDB Local",
        )));
    }
    if sdk.region().is_none() {
        local = local.region(Region::new("us-east-1"));
    }
    local.build()
}

#[cfg(test)]
mod tests {
    use aws_sdk_dynamodb::config::ProvideCredentials as _;

    use super::*;

    #[test]
    fn local_endpoints_are_the_loopback_ones() {
        for local in [
            "http://127.0.0.1:8000",
            "http://localhost:8000/",
            "http://LOCALHOST",
            "http://127.0.0.2:9",
            "http://[::1]:8000",
        ] {
            assert!(is_local_endpoint(local), "{local}");
        }
        for remote in [
            "https://dynamodb.us-east-1.amazonaws.com",
            "http://10.0.0.1:8000",
            "http://localhost.example.com:8000",
            "http://[2001:db8::1]:8000",
        ] {
            assert!(!is_local_endpoint(remote), "{remote}");
        }
    }

    #[tokio::test]
    async fn a_local_endpoint_needs_no_credentials_or_region() {
        let bare = aws_config::SdkConfig::builder().build();
        let local = with_local_defaults(bare.clone(), Some("http://127.0.0.1:8000"), false);
        assert_eq!(local.region().map(|r| r.as_ref()), Some("us-east-1"));
        let credentials = local
            .credentials_provider()
            .expect("local credentials")
            .provide_credentials()
            .await
            .expect("credentials");
        assert_eq!(credentials.access_key_id(), "local");

        // Credentials or a region the environment names are kept.
        let named = aws_config::SdkConfig::builder()
            .region(Region::new("eu-west-1"))
            .build();
        let kept = with_local_defaults(named, Some("http://127.0.0.1:8000"), true);
        assert_eq!(kept.region().map(|r| r.as_ref()), Some("eu-west-1"));
        assert!(kept.credentials_provider().is_none());

        // Against AWS, nothing is made up.
        let remote = with_local_defaults(bare, None, false);
        assert!(remote.region().is_none());
        assert!(remote.credentials_provider().is_none());
    }
}
