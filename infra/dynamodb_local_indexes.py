"""Indexes a running DynamoDB Local's SQLite database (-dbPath), and puts it
in write-ahead-log mode.

DynamoDB Local keeps the stream records of every table in one SQLite table,
`us`, keyed by sequence number alone, and on every request it looks up the
oldest record of the table's stream (`SELECT MIN(SequenceNumber) FROM us
WHERE StreamID = ?`, when it describes the table to itself). Without an index
on StreamID that is a scan of every stream record the instance holds (it
trims them only when it starts; deleted tables' stay), so each request gets slower with
everything written before it: the test suite's instances ended up spending
most of their time there. With the indexes the lookups are a search; nothing
else changes (the same jar, the same answers: an index changes query plans,
not results).

DynamoDB Local leaves SQLite's default rollback journal, which creates and
deletes a journal file around every write; a write-ahead log appends instead.
The mode is kept in the file, so DynamoDB Local's own connection takes it up
at its next transaction.

The API suite on the same binary and machine (three instances, two cores):
673 to 870 s in memory (-inMemory), 322 s on an indexed file in RAM, 284 s with the
write-ahead log as well.

SQLite lets a second connection change the schema of a database another
process has open; DynamoDB Local's prepared statements pick up the new plans.

    python3 infra/dynamodb_local_indexes.py DBPATH/shared-local-instance.db
"""

import sqlite3
import sys
import time

# Names no DynamoDB table name can contain ("!" is not allowed in one), so
# that DynamoDB Local, which matches index names against its tables' names,
# never takes them for one of its own.
INDEXES = {
    "!us_by_stream": "us (StreamID, SequenceNumber)",
    "!us_by_shard": "us (ShardID, SequenceNumber)",
}


def main(path: str) -> None:
    # The file and its `us` table appear with DynamoDB Local's first request.
    deadline = time.monotonic() + 30
    while True:
        try:
            db = sqlite3.connect(f"file:{path}?mode=rw", uri=True, timeout=10)
            if db.execute("SELECT 1 FROM sqlite_master WHERE name = 'us'").fetchone():
                break
            db.close()
        except sqlite3.OperationalError:
            pass
        if time.monotonic() > deadline:
            sys.exit(f"{path}: no DynamoDB Local database with a stream table")
        time.sleep(0.1)
    db.execute("PRAGMA journal_mode = WAL")
    with db:
        for name, columns in INDEXES.items():
            db.execute(f'CREATE INDEX IF NOT EXISTS "{name}" ON {columns}')
    db.close()


if __name__ == "__main__":
    main(sys.argv[1])
