//! The SDK client every process builds once and shares across invocations.

use std::time::Duration;

use aws_config::{BehaviorVersion, retry::RetryConfig, timeout::TimeoutConfig};
use aws_sdk_dynamodb::Client;

use super::meter::CapacityMeter;

/// Loads credentials and region from the environment, with short timeouts so
/// that an unreachable DynamoDB becomes a 503 well inside API Gateway's 30 s.
pub async fn sdk_config() -> aws_config::SdkConfig {
    let timeouts = TimeoutConfig::builder()
        .connect_timeout(Duration::from_secs(2))
        .operation_attempt_timeout(Duration::from_secs(3))
        .operation_timeout(Duration::from_secs(8))
        .build();
    aws_config::defaults(BehaviorVersion::latest())
        .timeout_config(timeouts)
        // DynamoDB's throttling clears in tens of milliseconds, not the SDK's
        // default first backoff of one second.
        .retry_config(
            RetryConfig::standard()
                .with_max_attempts(3)
                .with_initial_backoff(Duration::from_millis(50)),
        )
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
