-- Search pages filter on the archive partition and order by a time and the id (see sqlite/004).
DROP INDEX IF EXISTS conversations_by_archived;
CREATE INDEX conversations_by_partition_created ON conversations (archived_at, created_at, id);
CREATE INDEX conversations_by_partition_updated ON conversations (archived_at, updated_at, id);
