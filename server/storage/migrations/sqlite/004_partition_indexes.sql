-- Search pages filter on the archive partition and order by a time and the id. An index on
-- archived_at alone made the planner fetch the whole active partition and sort it; these serve
-- both the filter and the order, so a page stays an index range scan.
DROP INDEX IF EXISTS conversations_by_archived;
CREATE INDEX conversations_by_partition_created ON conversations (archived_at, created_at, id);
CREATE INDEX conversations_by_partition_updated ON conversations (archived_at, updated_at, id);
