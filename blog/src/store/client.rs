//! The SDK client every process builds once and shares across invocations.

use std::time::Duration;

use aws_config::{BehaviorVersion, retry::RetryConfig, timeout::TimeoutConfig};
use aws_sdk_dynamodb::Client;

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
