-- Who is erasing a conversation being deleted: the lease owner name of the server process that
-- began it. Another replica takes over a delete whose process no longer beats (it was killed,
-- or stopped gracefully mid-way): only a restart of the same data dir finished it, and on a
-- shared catalog the conversation's id stayed refused (409) for good when that never came.
-- NULL: begun before this column, taken over by whoever looks first.
ALTER TABLE pending_deletes ADD COLUMN deleter TEXT;
