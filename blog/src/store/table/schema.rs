//! The table's definition, as the local stack and the tests create it. The
//! deployed table in template.yaml must agree with it (a test compares them).

use aws_sdk_dynamodb::{
    Client,
    types::{
        AttributeDefinition, BillingMode, GlobalSecondaryIndex, KeySchemaElement, KeyType,
        Projection, ProjectionType, ScalarAttributeType, StreamSpecification, StreamViewType,
        TimeToLiveSpecification,
    },
};

use super::classify;
use crate::{
    keys::{Counter, GSI1, GSI1PK, GSI1SK, PK, SK},
    store::error::StoreError,
};

/// What GSI1 copies besides keys: exactly what the short form of a post reads
/// (Q3), so a post's up-to-50,000-character content is never copied into it.
pub const GSI1_PROJECTED: [&str; 8] = [
    "postId",
    "userId",
    "username",
    "title",
    "summary",
    Counter::Comments.attribute(),
    Counter::Likes.attribute(),
    "createdAt",
];

/// Creates the table if it does not exist yet. Returns whether it created it.
pub async fn create_if_missing(client: &Client, name: &str) -> Result<bool, StoreError> {
    match client.describe_table().table_name(name).send().await {
        Ok(_) => return Ok(false),
        Err(err)
            if err
                .as_service_error()
                .is_some_and(|e| e.is_resource_not_found_exception()) => {}
        Err(err) => return Err(classify(err)),
    }
    let string_attr = |name: &str| {
        AttributeDefinition::builder()
            .attribute_name(name)
            .attribute_type(ScalarAttributeType::S)
            .build()
    };
    let key = |name: &str, kind: KeyType| {
        KeySchemaElement::builder()
            .attribute_name(name)
            .key_type(kind)
            .build()
    };
    let gsi1 = GlobalSecondaryIndex::builder()
        .index_name(GSI1)
        .key_schema(key(GSI1PK, KeyType::Hash)?)
        .key_schema(key(GSI1SK, KeyType::Range)?)
        .projection(
            Projection::builder()
                .projection_type(ProjectionType::Include)
                .set_non_key_attributes(Some(GSI1_PROJECTED.map(String::from).to_vec()))
                .build(),
        )
        .build()?;
    let created = client
        .create_table()
        .table_name(name)
        .billing_mode(BillingMode::PayPerRequest)
        .attribute_definitions(string_attr(PK)?)
        .attribute_definitions(string_attr(SK)?)
        .attribute_definitions(string_attr(GSI1PK)?)
        .attribute_definitions(string_attr(GSI1SK)?)
        .key_schema(key(PK, KeyType::Hash)?)
        .key_schema(key(SK, KeyType::Range)?)
        .global_secondary_indexes(gsi1)
        .stream_specification(
            StreamSpecification::builder()
                .stream_enabled(true)
                .stream_view_type(StreamViewType::NewAndOldImages)
                .build()?,
        )
        .send()
        .await;
    match created {
        Ok(_) => {
            // Idempotency-Key records expire (`store::idempotency`).
            let ttl = TimeToLiveSpecification::builder()
                .attribute_name(crate::keys::EXPIRES_AT)
                .enabled(true)
                .build()?;
            client
                .update_time_to_live()
                .table_name(name)
                .time_to_live_specification(ttl)
                .send()
                .await
                .map_err(classify)?;
            Ok(true)
        }
        // Someone else created it between our two calls: that is what we wanted.
        Err(err)
            if err
                .as_service_error()
                .is_some_and(|e| e.is_resource_in_use_exception()) =>
        {
            Ok(false)
        }
        Err(err) => Err(classify(err)),
    }
}
