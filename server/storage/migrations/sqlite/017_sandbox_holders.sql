-- The catalog's own identity, made once: replicas on one catalog name and label their
-- containers by it, so that they share them (and servers of other catalogs on the same engine
-- never take or remove them).
CREATE TABLE catalog_identity (id TEXT NOT NULL PRIMARY KEY);
INSERT INTO catalog_identity (id) VALUES (lower(hex(randomblob(16))));
-- The replica whose sandbox took the conversation's container last: it alone pauses, stops or
-- removes it for being idle (an engine cannot change a container's labels).
ALTER TABLE conversations ADD COLUMN sandbox_holder TEXT;
