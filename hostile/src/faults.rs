//! Which faults to inject, and the per-request decision.

use std::time::Duration;

use serde::Deserialize;
use serde_json::json;

/// The prefix of every DynamoDB `x-amz-target`; anything else (DynamoDB
/// Streams' `DynamoDBStreams_20120810.*`, a bare GET) is passed through.
pub(crate) const TARGET_PREFIX: &str = "DynamoDB_20120810.";

/// What the SDK reads the error code from: the part after `#`.
const ERROR_NAMESPACE: &str = "com.amazonaws.dynamodb.v20120810#";

/// Data-plane requests real DynamoDB throttles. Control-plane operations are
/// left alone: their limits are not what application code has to survive.
const THROTTLED: [&str; 9] = [
    "GetItem",
    "Query",
    "Scan",
    "PutItem",
    "UpdateItem",
    "DeleteItem",
    "BatchGetItem",
    "BatchWriteItem",
    "TransactWriteItems",
];

/// Single-item writes, which fail with `TransactionConflictException` while a
/// transaction holds their item.
const SINGLE_WRITES: [&str; 3] = ["PutItem", "UpdateItem", "DeleteItem"];

const TRANSACT_WRITE: &str = "TransactWriteItems";

const CONFLICT_MESSAGE: &str = "Transaction is ongoing for the item";
const GSI_THROTTLE_MESSAGE: &str = "Throughput exceeds the current capacity for one or more global secondary indexes. DynamoDB is automatically scaling your index so please try again shortly.";
const THROUGHPUT_MESSAGE: &str = "Throughput exceeds the current capacity of your table or index. DynamoDB is automatically scaling your table or index so please try again shortly. If exceptions persist, check if you have a hot partition: https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/bp-partition-key-design.html.";
const THROTTLING_MESSAGE: &str = "Rate of requests exceeds the allowed throughput.";

/// The fault rates (each the probability, in [0, 1], that one eligible
/// request gets that fault), the GSI lag and the seed of the one random
/// generator that decides. A rate of 0 never injects; 1 always does.
///
/// The rates are checked in turn (throttle, then write conflict, then
/// transaction cancel, then lost response), each only for the operations it
/// applies to, so a transaction is cancelled at rate
/// `(1 - throttle) * transaction_cancel`. A TransactWriteItems whose
/// `ClientRequestToken` the proxy has seen commit is a replay, which DynamoDB
/// answers from its record of the token: it is cancelled only at rate
/// `replay_cancel` (as when another transaction holds its items at that
/// moment), and can still be throttled or lose its response again.
#[derive(Debug, Clone, PartialEq)]
pub struct Faults {
    pub transaction_cancel: f64,
    pub write_conflict: f64,
    pub throttle: f64,
    pub lost_response: f64,
    /// A write (plain or transaction) is not sent, and the client gets a
    /// 500 `InternalServerError`, as when DynamoDB fails before committing:
    /// to the client the outcome is unknown, yet nothing was written.
    pub server_error: f64,
    /// A TransactWriteItems carrying a `ClientRequestToken` is held, the
    /// client gets a 500 at once (its attempt timed out), and the proxy
    /// sends the transaction on `late_commit_delay` later, where it commits
    /// after the client gave up on it. Meanwhile a retry with the same token
    /// gets `TransactionInProgressException`, as from DynamoDB while the
    /// first is still running.
    pub late_commit: f64,
    pub late_commit_delay: Duration,
    pub replay_cancel: f64,
    /// Index queries do not see items whose `createdAt` is younger than this.
    pub gsi_lag: Duration,
    pub seed: u64,
}

/// The rate names `--rate KIND=P` and [`Faults::set_rate`] accept.
pub const RATE_KINDS: [&str; 7] = [
    "transaction_cancel",
    "write_conflict",
    "throttle",
    "lost_response",
    "server_error",
    "late_commit",
    "replay_cancel",
];

/// How long a late commit waits by default: longer than the store's retries
/// of a refused attempt (5 s), shorter than its resolution of an unknown
/// outcome within the request's deadline.
pub const LATE_COMMIT_DELAY: Duration = Duration::from_secs(6);

impl Faults {
    /// A transparent proxy.
    pub fn none() -> Self {
        Self {
            transaction_cancel: 0.0,
            write_conflict: 0.0,
            throttle: 0.0,
            lost_response: 0.0,
            server_error: 0.0,
            late_commit: 0.0,
            late_commit_delay: LATE_COMMIT_DELAY,
            replay_cancel: 0.0,
            gsi_lag: Duration::ZERO,
            seed: 0,
        }
    }

    /// Rates high enough that every retry path runs within a few dozen
    /// requests, low enough that the store's retries still get
    /// almost every request through.
    pub fn hostile() -> Self {
        Self {
            transaction_cancel: 0.1,
            write_conflict: 0.1,
            throttle: 0.05,
            lost_response: 0.05,
            server_error: 0.0,
            late_commit: 0.0,
            late_commit_delay: LATE_COMMIT_DELAY,
            replay_cancel: 0.0,
            gsi_lag: Duration::from_secs(1),
            seed: 0,
        }
    }

    /// Sets the rate named `kind` (one of [`RATE_KINDS`]; `-` may stand for `_`).
    pub fn set_rate(&mut self, kind: &str, rate: f64) -> Result<(), String> {
        if !(0.0..=1.0).contains(&rate) {
            return Err(format!("rate {rate} for {kind} is not within [0, 1]"));
        }
        let slot = match kind.replace('-', "_").as_str() {
            "transaction_cancel" => &mut self.transaction_cancel,
            "write_conflict" => &mut self.write_conflict,
            "throttle" => &mut self.throttle,
            "lost_response" => &mut self.lost_response,
            "server_error" => &mut self.server_error,
            "late_commit" => &mut self.late_commit,
            "replay_cancel" => &mut self.replay_cancel,
            _ => {
                return Err(format!(
                    "unknown fault {kind:?}: expected one of {}",
                    RATE_KINDS.join(", ")
                ));
            }
        };
        *slot = rate;
        Ok(())
    }

    /// Sets a rate from `KIND=P`, as `blog-admin hostile-dynamodb --rate` takes it.
    pub fn parse_rate(&mut self, spec: &str) -> Result<(), String> {
        let (kind, rate) = spec
            .split_once('=')
            .ok_or_else(|| format!("expected KIND=P, got {spec:?}"))?;
        let rate: f64 = rate
            .parse()
            .map_err(|_| format!("rate {rate:?} for {kind} is not a number"))?;
        self.set_rate(kind, rate)
    }
}

/// A fault decided for one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fault {
    /// Not forwarded: `ProvisionedThroughputExceededException` when
    /// `provisioned`, else `ThrottlingException`.
    Throttle { provisioned: bool },
    /// Not forwarded: `TransactionConflictException`.
    WriteConflict,
    /// Not forwarded: `TransactionCanceledException` with reason
    /// `TransactionConflict` (when `conflict`) or `ThrottlingError` for item
    /// `item` of `items`.
    TransactionCancel {
        items: usize,
        item: usize,
        conflict: bool,
    },
    /// Forwarded, and a 200 from upstream becomes a 500.
    LostResponse,
    /// Not forwarded: a 500 `InternalServerError`.
    ServerError,
    /// Answered with a 500 at once, forwarded later ([`Faults::late_commit`]).
    LateCommit,
    /// A transaction whose token a late commit holds:
    /// `TransactionInProgressException`.
    InProgress,
}

impl Fault {
    /// The status and body the client gets instead of upstream's answer.
    pub(crate) fn response(self) -> (u16, String) {
        match self {
            Fault::Throttle { provisioned: true } => (
                400,
                error_body("ProvisionedThroughputExceededException", THROUGHPUT_MESSAGE),
            ),
            Fault::Throttle { provisioned: false } => {
                (400, error_body("ThrottlingException", THROTTLING_MESSAGE))
            }
            Fault::WriteConflict => (
                400,
                error_body("TransactionConflictException", CONFLICT_MESSAGE),
            ),
            Fault::TransactionCancel {
                items,
                item,
                conflict,
            } => (400, cancellation_body(items, item, conflict)),
            Fault::LostResponse | Fault::ServerError | Fault::LateCommit => (
                500,
                error_body("InternalServerError", "Internal server error"),
            ),
            Fault::InProgress => (
                400,
                error_body(
                    "TransactionInProgressException",
                    "Transaction is in progress",
                ),
            ),
        }
    }
}

/// A DynamoDB error body, as the SDK parses it.
pub(crate) fn error_body(code: &str, message: &str) -> String {
    json!({ "__type": format!("{ERROR_NAMESPACE}{code}"), "message": message }).to_string()
}

/// A `TransactionCanceledException` body: one reason per item of the
/// request, in order, all `None` but `item`'s.
pub(crate) fn cancellation_body(items: usize, item: usize, conflict: bool) -> String {
    let reason = if conflict {
        ("TransactionConflict", CONFLICT_MESSAGE)
    } else {
        ("ThrottlingError", GSI_THROTTLE_MESSAGE)
    };
    cancellation(items, |i| (i == item).then_some(reason))
}

/// A transaction refused because the partitions of the `throttled` items
/// are out of capacity.
pub(crate) fn throttled_cancellation_body(items: usize, throttled: &[usize]) -> String {
    cancellation(items, |i| {
        throttled
            .contains(&i)
            .then_some(("ThrottlingError", THROUGHPUT_MESSAGE))
    })
}

/// A single request refused because a partition it reads or writes is out
/// of capacity, with DynamoDB's `ThrottlingReasons`.
pub(crate) fn partition_throttle_body(reasons: serde_json::Value) -> String {
    json!({
        "__type": format!("{ERROR_NAMESPACE}ProvisionedThroughputExceededException"),
        "message": THROUGHPUT_MESSAGE,
        "ThrottlingReasons": reasons,
    })
    .to_string()
}

/// A request (a transaction too) refused because its table is past its
/// on-demand maximum, with DynamoDB's reasons (this exception's model names
/// them `throttlingReasons`, lower case, unlike
/// `ProvisionedThroughputExceededException`'s `ThrottlingReasons`).
pub(crate) fn table_throttle_body(reasons: serde_json::Value) -> String {
    json!({
        "__type": format!("{ERROR_NAMESPACE}ThrottlingException"),
        "message": THROTTLING_MESSAGE,
        "throttlingReasons": reasons,
    })
    .to_string()
}

/// A `TransactionCanceledException` body whose item `i` has the reason
/// `reason(i)` (`None` for the others).
fn cancellation(
    items: usize,
    reason: impl Fn(usize) -> Option<(&'static str, &'static str)>,
) -> String {
    let reasons: Vec<_> = (0..items)
        .map(|i| match reason(i) {
            Some((code, message)) => json!({ "Code": code, "Message": message }),
            None => json!({ "Code": "None" }),
        })
        .collect();
    let codes: Vec<&str> = (0..items)
        .map(|i| reason(i).map_or("None", |(code, _)| code))
        .collect();
    json!({
        "__type": format!("{ERROR_NAMESPACE}TransactionCanceledException"),
        "Message": format!(
            "Transaction cancelled, please refer cancellation reasons for specific reasons [{}]",
            codes.join(", ")
        ),
        "CancellationReasons": reasons,
    })
    .to_string()
}

/// Whether one request with probability `rate` gets the fault. Rate 0 draws
/// nothing, so a transparent configuration leaves the sequence alone.
fn draw(rng: &mut fastrand::Rng, rate: f64) -> bool {
    rate > 0.0 && rng.f64() < rate
}

/// What the decision needs from a TransactWriteItems request.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Transaction {
    /// How many items it holds; 0 when the request cannot be read, so that
    /// DynamoDB Local reports what is wrong with it.
    pub(crate) items: usize,
    pub(crate) token: Option<String>,
}

impl Transaction {
    pub(crate) fn read(request: &[u8]) -> Transaction {
        #[derive(Deserialize)]
        struct Request {
            #[serde(rename = "TransactItems", default)]
            items: Vec<serde::de::IgnoredAny>,
            #[serde(rename = "ClientRequestToken")]
            token: Option<String>,
        }
        serde_json::from_slice::<Request>(request).map_or_else(
            |_| Transaction::default(),
            |r| Transaction {
                items: r.items.len(),
                token: r.token,
            },
        )
    }
}

/// The fault for one DynamoDB `operation` (the target without its prefix),
/// if any. For a TransactWriteItems, `items` is its number of items and
/// `replay` whether its `ClientRequestToken` already committed: DynamoDB
/// answers such a retry from its record of the token, without running the
/// transaction again, so it cannot be cancelled (it can still be throttled,
/// or lose its response again).
pub(crate) fn decide(
    rng: &mut fastrand::Rng,
    faults: &Faults,
    operation: &str,
    items: usize,
    replay: bool,
) -> Option<Fault> {
    if THROTTLED.contains(&operation) && draw(rng, faults.throttle) {
        return Some(Fault::Throttle {
            provisioned: rng.bool(),
        });
    }
    let writes = SINGLE_WRITES.contains(&operation) || operation == TRANSACT_WRITE;
    if writes && draw(rng, faults.server_error) {
        return Some(Fault::ServerError);
    }
    if SINGLE_WRITES.contains(&operation) {
        if draw(rng, faults.write_conflict) {
            return Some(Fault::WriteConflict);
        }
        return draw(rng, faults.lost_response).then_some(Fault::LostResponse);
    }
    if operation != TRANSACT_WRITE {
        return None;
    }
    if !replay && draw(rng, faults.late_commit) {
        return Some(Fault::LateCommit);
    }
    let cancel = if replay {
        faults.replay_cancel
    } else {
        faults.transaction_cancel
    };
    if items > 0 && draw(rng, cancel) {
        return Some(Fault::TransactionCancel {
            items,
            item: rng.usize(..items),
            conflict: rng.bool(),
        });
    }
    draw(rng, faults.lost_response).then_some(Fault::LostResponse)
}

/// The tokens of transactions that committed, the most recent ones only
/// (DynamoDB itself honours a token for ten minutes).
#[derive(Debug, Default)]
pub(crate) struct Committed {
    tokens: std::collections::HashSet<String>,
    order: std::collections::VecDeque<String>,
}

impl Committed {
    const CAPACITY: usize = 10_000;

    pub(crate) fn contains(&self, token: &str) -> bool {
        self.tokens.contains(token)
    }

    pub(crate) fn insert(&mut self, token: String) {
        if !self.tokens.insert(token.clone()) {
            return;
        }
        self.order.push_back(token);
        if self.order.len() > Self::CAPACITY
            && let Some(oldest) = self.order.pop_front()
        {
            self.tokens.remove(&oldest);
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;

    const TRANSACTION: &[u8] = br#"{"TransactItems":[{"Put":{}},{"Update":{}},{"Delete":{}}]}"#;

    fn faults(set: impl FnOnce(&mut Faults)) -> Faults {
        let mut faults = Faults::none();
        set(&mut faults);
        faults
    }

    fn share(faults: &Faults, operation: &str, n: usize) -> f64 {
        let mut rng = fastrand::Rng::with_seed(faults.seed);
        let hits = (0..n)
            .filter(|_| decide(&mut rng, faults, operation, 3, false).is_some())
            .count();
        hits as f64 / n as f64
    }

    #[test]
    fn a_seeded_rate_gives_its_share() {
        for (seed, rate) in [(1, 0.1), (2, 0.05), (3, 0.5), (4, 0.9)] {
            let f = faults(|f| {
                f.throttle = rate;
                f.seed = seed;
            });
            let got = share(&f, "GetItem", 20_000);
            assert!((got - rate).abs() < 0.02, "seed {seed}: {got} for {rate}");
        }
    }

    #[test]
    fn the_same_seed_gives_the_same_decisions() {
        let f = Faults {
            seed: 42,
            ..Faults::hostile()
        };
        let run = || {
            let mut rng = fastrand::Rng::with_seed(f.seed);
            (0..500)
                .map(|i| {
                    let op = ["PutItem", "TransactWriteItems", "Query"][i % 3];
                    decide(&mut rng, &f, op, 3, false)
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(run(), run());
    }

    #[test]
    fn rate_zero_never_injects() {
        let mut rng = fastrand::Rng::with_seed(7);
        let f = Faults {
            gsi_lag: Duration::from_secs(5),
            ..Faults::none()
        };
        for op in ["GetItem", "PutItem", "TransactWriteItems", "Query", "Scan"] {
            for _ in 0..1_000 {
                assert_eq!(decide(&mut rng, &f, op, 3, false), None);
            }
        }
    }

    #[test]
    fn rate_one_always_injects_where_it_applies_only() {
        let mut rng = fastrand::Rng::with_seed(7);
        let conflict = faults(|f| f.write_conflict = 1.0);
        for op in SINGLE_WRITES {
            assert_eq!(
                decide(&mut rng, &conflict, op, 0, false),
                Some(Fault::WriteConflict)
            );
        }
        let everything = Faults {
            transaction_cancel: 1.0,
            write_conflict: 1.0,
            throttle: 1.0,
            lost_response: 1.0,
            server_error: 1.0,
            late_commit: 1.0,
            late_commit_delay: LATE_COMMIT_DELAY,
            replay_cancel: 1.0,
            gsi_lag: Duration::from_secs(1),
            seed: 7,
        };
        for op in [
            "CreateTable",
            "DescribeTable",
            "ListTables",
            "TransactGetItems",
            "UpdateTimeToLive",
        ] {
            assert_eq!(decide(&mut rng, &everything, op, 3, false), None, "{op}");
        }
        let failing = faults(|f| f.server_error = 1.0);
        for op in ["PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems"] {
            assert_eq!(
                decide(&mut rng, &failing, op, 2, false),
                Some(Fault::ServerError),
                "{op}"
            );
        }
        for op in ["GetItem", "Query", "BatchGetItem"] {
            assert_eq!(decide(&mut rng, &failing, op, 0, false), None, "{op}");
        }
        let lost = faults(|f| f.lost_response = 1.0);
        assert_eq!(
            decide(&mut rng, &lost, "TransactWriteItems", 3, false),
            Some(Fault::LostResponse)
        );
        for op in ["PutItem", "UpdateItem", "DeleteItem"] {
            assert_eq!(
                decide(&mut rng, &lost, op, 0, false),
                Some(Fault::LostResponse),
                "{op}"
            );
        }
        assert_eq!(decide(&mut rng, &lost, "GetItem", 0, false), None);
    }

    #[test]
    fn throttling_takes_both_codes() {
        let mut rng = fastrand::Rng::with_seed(3);
        let f = faults(|f| f.throttle = 1.0);
        let provisioned = (0..1_000)
            .filter(|_| {
                decide(&mut rng, &f, "Query", 0, false)
                    == Some(Fault::Throttle { provisioned: true })
            })
            .count();
        assert!((400..600).contains(&provisioned), "{provisioned}");
    }

    #[test]
    fn cancellation_reasons_match_the_transaction() {
        let mut rng = fastrand::Rng::with_seed(11);
        let f = faults(|f| f.transaction_cancel = 1.0);
        let mut seen = [[false; 2]; 3];
        for _ in 0..200 {
            let Some(fault @ Fault::TransactionCancel { item, conflict, .. }) = decide(
                &mut rng,
                &f,
                "TransactWriteItems",
                Transaction::read(TRANSACTION).items,
                false,
            ) else {
                panic!("no cancellation");
            };
            seen[item][usize::from(conflict)] = true;
            let (status, body) = fault.response();
            assert_eq!(status, 400);
            let body: Value = serde_json::from_str(&body).expect("json");
            assert_eq!(
                body["__type"],
                "com.amazonaws.dynamodb.v20120810#TransactionCanceledException"
            );
            let reasons = body["CancellationReasons"].as_array().expect("reasons");
            assert_eq!(reasons.len(), 3, "one reason per item");
            for (i, reason) in reasons.iter().enumerate() {
                let code = reason["Code"].as_str().expect("code");
                if i == item {
                    let want = if conflict {
                        "TransactionConflict"
                    } else {
                        "ThrottlingError"
                    };
                    assert_eq!(code, want);
                    assert!(reason["Message"].is_string());
                } else {
                    assert_eq!(code, "None");
                }
            }
            let message = body["Message"].as_str().expect("message");
            assert!(message.ends_with(']'), "{message}");
        }
        assert!(seen.iter().flatten().all(|&s| s), "{seen:?}");
    }

    #[test]
    fn the_cancellation_body_reads_like_dynamodbs() {
        let dynamodb = r#"{"__type":"com.amazonaws.dynamodb.v20120810#TransactionCanceledException","Message":"Transaction cancelled, please refer cancellation reasons for specific reasons [None, ThrottlingError]","CancellationReasons":[{"Code":"None"},{"Code":"ThrottlingError","Message":"Throughput exceeds the current capacity for one or more global secondary indexes. DynamoDB is automatically scaling your index so please try again shortly."}]}"#;
        let ours: Value = serde_json::from_str(&cancellation_body(2, 1, false)).expect("json");
        assert_eq!(ours, serde_json::from_str::<Value>(dynamodb).expect("json"));
    }

    #[test]
    fn an_unreadable_transaction_is_not_cancelled() {
        let mut rng = fastrand::Rng::with_seed(1);
        let f = faults(|f| f.transaction_cancel = 1.0);
        for body in [&b"not json"[..], b"{}", br#"{"TransactItems":[]}"#] {
            let items = Transaction::read(body).items;
            assert_eq!(items, 0);
            assert_eq!(
                decide(&mut rng, &f, "TransactWriteItems", items, false),
                None
            );
        }
    }

    #[test]
    fn a_committed_transaction_is_not_cancelled_on_retry() {
        let request = br#"{"TransactItems":[{"Put":{}}],"ClientRequestToken":"t-1"}"#;
        assert_eq!(
            Transaction::read(request),
            Transaction {
                items: 1,
                token: Some("t-1".into()),
            }
        );
        let mut rng = fastrand::Rng::with_seed(5);
        let f = Faults {
            transaction_cancel: 1.0,
            lost_response: 1.0,
            ..Faults::none()
        };
        assert_eq!(
            decide(&mut rng, &f, "TransactWriteItems", 1, true),
            Some(Fault::LostResponse)
        );
        assert!(matches!(
            decide(&mut rng, &f, "TransactWriteItems", 1, false),
            Some(Fault::TransactionCancel { .. })
        ));
        // Unless replays are cancelled too.
        let replays = Faults {
            replay_cancel: 1.0,
            ..f
        };
        assert!(matches!(
            decide(&mut rng, &replays, "TransactWriteItems", 1, true),
            Some(Fault::TransactionCancel { .. })
        ));
    }

    #[test]
    fn committed_tokens_are_bounded() {
        let mut committed = Committed::default();
        for i in 0..Committed::CAPACITY + 5 {
            committed.insert(format!("t{i}"));
        }
        committed.insert("t9".into());
        assert!(!committed.contains("t0") && !committed.contains("t4"));
        assert!(committed.contains("t5") && committed.contains("t9"));
        assert_eq!(committed.tokens.len(), Committed::CAPACITY);
        assert_eq!(committed.order.len(), Committed::CAPACITY);
    }

    #[test]
    fn rates_parse_from_the_command_line() {
        let mut f = Faults::none();
        f.parse_rate("throttle=0.25").expect("throttle");
        f.parse_rate("lost-response=1").expect("lost response");
        assert_eq!((f.throttle, f.lost_response), (0.25, 1.0));
        for bad in [
            "throttle",
            "throttle=x",
            "throttle=1.5",
            "nope=0.1",
            "throttle=-0.1",
        ] {
            assert!(f.parse_rate(bad).is_err(), "{bad}");
        }
    }
}
