//! A stream record the fan-out gave up on, parked for the replay.

use aws_lambda_events::event::dynamodb::EventRecord;
use serde::{Deserialize, Serialize};

use crate::keys::ItemType;
use crate::keys::{Entity, Key, ParkedPartition};
use crate::store::error::StoreError;

/// A record too large for one item (400 KB) cannot be parked; none of the
/// records the fan-out applies comes near (posts without their content,
/// comments, likes, profiles).
const MAX_RECORD_BYTES: usize = 350 * 1024;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ParkedRecordItem {
    pub shard_id: String,
    pub sequence_number: String,
    pub event_name: String,
    /// The record as Lambda delivers it to the fan-out (JSON).
    pub record: String,
    /// RFC 3339.
    pub parked_at: String,
    /// Read from the single `PARKED` partition the earlier version parked
    /// every record in, so that forgetting it deletes it there. Not an
    /// attribute: the page that read it says so; `false` for a record parked
    /// now.
    #[serde(skip)]
    pub legacy: bool,
}

impl ParkedRecordItem {
    pub fn new(
        shard_id: &str,
        record: &EventRecord,
        parked_at: String,
    ) -> Result<Self, StoreError> {
        let sequence_number = record.change.sequence_number.clone().ok_or_else(|| {
            StoreError::Internal("a stream record without a sequence number".into())
        })?;
        let json = serde_json::to_string(record)
            .map_err(|e| StoreError::Internal(format!("cannot encode a stream record: {e}")))?;
        if json.len() > MAX_RECORD_BYTES {
            return Err(StoreError::Internal(format!(
                "stream record {sequence_number} is {} bytes, too large to park",
                json.len()
            )));
        }
        Ok(Self {
            shard_id: shard_id.to_owned(),
            sequence_number,
            event_name: record.event_name.clone(),
            record: json,
            parked_at,
            legacy: false,
        })
    }

    /// The record, as the fan-out takes it.
    pub fn record(&self) -> Result<EventRecord, StoreError> {
        serde_json::from_str(&self.record).map_err(|e| {
            let at = &self.sequence_number;
            StoreError::Internal(format!("parked record {at} is unreadable: {e}"))
        })
    }
}

impl Entity for ParkedRecordItem {
    const TYPE: ItemType = ItemType::ParkedRecord;
    /// Parking the same record again writes the same item.
    const OWN: &'static [&'static str] = &[];

    /// In the partition its shard and sequence number hash to, or, read from
    /// the legacy partition, there.
    fn key(&self) -> Key {
        self.partition().key(&self.sequence_number, &self.shard_id)
    }
}

impl ParkedRecordItem {
    /// The partition it is in.
    pub fn partition(&self) -> ParkedPartition {
        match self.legacy {
            true => ParkedPartition::Legacy,
            false => ParkedPartition::of(&self.sequence_number, &self.shard_id),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::PARKED_PARTITIONS;

    fn parked(sequence_number: String, shard_id: &str) -> ParkedRecordItem {
        ParkedRecordItem {
            shard_id: shard_id.to_owned(),
            sequence_number,
            event_name: "INSERT".to_owned(),
            record: "{}".to_owned(),
            parked_at: "2026-01-01T00:00:00Z".to_owned(),
            legacy: false,
        }
    }

    /// How many of `items` each partition holds, by its key.
    fn spread(items: &[ParkedRecordItem]) -> Vec<usize> {
        let mut held = vec![0; usize::from(PARKED_PARTITIONS)];
        for item in items {
            let key = item.key();
            match ParkedPartition::of_pk(&key.pk) {
                Some(ParkedPartition::Spread(k)) => held[usize::from(k)] += 1,
                other => panic!("parked in {other:?} ({})", key.pk),
            }
        }
        held
    }

    /// 1,000 records of one batch (one shard, consecutive sequence numbers
    /// as DynamoDB Streams gives them, and sequence numbers far apart): every
    /// partition takes some, none more than twice its share (62.5).
    #[test]
    fn a_batch_of_1000_records_spreads_over_every_partition() {
        let shard = "shardId-00000001573689847184-864758bb";
        let consecutive: Vec<_> = (0..1000_u128)
            .map(|i| parked((800_000_000_003_126_276_362 + i).to_string(), shard))
            .collect();
        let strided: Vec<_> = (0..1000_u128)
            .map(|i| parked((49_000_000_000_000_000_000 + i * 1_000).to_string(), shard))
            .collect();
        let local: Vec<_> = (1..=1000_u64)
            .map(|i| parked(format!("{i:021}"), "shardId-00000001000000000000-00000000"))
            .collect();
        for batch in [consecutive, strided, local] {
            let held = spread(&batch);
            let share = batch.len() / usize::from(PARKED_PARTITIONS);
            assert!(held.iter().all(|&n| n > 0 && n <= 2 * share), "{held:?}");
            assert_eq!(held.iter().sum::<usize>(), 1000);
        }
    }

    /// Parking a record again writes the same item; a legacy record's key is
    /// in `PARKED`, with the same sort key.
    #[test]
    fn a_record_keeps_its_partition_and_a_legacy_one_its_key() {
        let item = parked("800000000003126276362".to_owned(), "shard-1");
        assert_eq!(item.key(), item.clone().key());
        assert!(item.key().pk.starts_with("PARKED#"));
        assert_eq!(
            item.key().sk,
            format!("RECORD#{:0>40}#shard-1", "800000000003126276362")
        );
        let legacy = ParkedRecordItem {
            legacy: true,
            ..item.clone()
        };
        assert_eq!(legacy.key().pk, "PARKED");
        assert_eq!(legacy.key().sk, item.key().sk);
        assert_eq!(
            ParkedPartition::of_pk("PARKED"),
            Some(ParkedPartition::Legacy)
        );
        assert_eq!(ParkedPartition::of_pk("PARKED#16"), None);
        assert_eq!(ParkedPartition::of_pk("PARKED#1"), None);
        let every: Vec<_> = ParkedPartition::all().collect();
        assert_eq!(every.len(), 17);
        let mut walked = vec![ParkedPartition::Legacy];
        while let Some(next) = walked.last().and_then(|p| p.next()) {
            walked.push(next);
        }
        assert_eq!(walked, every);
        for partition in every {
            assert_eq!(ParkedPartition::of_pk(&partition.pk()), Some(partition));
        }
    }
}
