CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT) WITHOUT ROWID;
CREATE TABLE sources(source_id INTEGER PRIMARY KEY, source TEXT UNIQUE NOT NULL, scanned TEXT NOT NULL,
  file_size BIGINT, mtime_ns BIGINT, etag TEXT);
CREATE TABLE remap(target TEXT NOT NULL, prefix TEXT NOT NULL, replacement TEXT NOT NULL,
  PRIMARY KEY (target, prefix)) WITHOUT ROWID;
CREATE TABLE arrays(array TEXT PRIMARY KEY, kind TEXT, storage TEXT, dims TEXT, shape TEXT, chunks TEXT,
  dtype TEXT, fill TEXT, codec TEXT, attrs TEXT, affine TEXT, "values" BLOB, chunk_table TEXT) WITHOUT ROWID;
CREATE TABLE "chunks_grp/T"(source_id INTEGER NOT NULL REFERENCES sources, dim_0 INTEGER NOT NULL, present INTEGER NOT NULL DEFAULT 1, "offset" BIGINT, size BIGINT, info TEXT, data BLOB, PRIMARY KEY (dim_0)) WITHOUT ROWID;
CREATE TABLE "chunks_inline"(source_id INTEGER NOT NULL REFERENCES sources, dim_0 INTEGER NOT NULL, dim_1 INTEGER NOT NULL, present INTEGER NOT NULL DEFAULT 1, "offset" BIGINT, size BIGINT, info TEXT, data BLOB, PRIMARY KEY (dim_0, dim_1)) WITHOUT ROWID;
CREATE TABLE "chunks_time"(source_id INTEGER NOT NULL REFERENCES sources, dim_0 INTEGER NOT NULL, present INTEGER NOT NULL DEFAULT 1, "offset" BIGINT, size BIGINT, info TEXT, data BLOB, PRIMARY KEY (dim_0)) WITHOUT ROWID;
CREATE TABLE "chunks_x"(source_id INTEGER NOT NULL REFERENCES sources, dim_0 INTEGER NOT NULL, dim_1 INTEGER NOT NULL, present INTEGER NOT NULL DEFAULT 1, "offset" BIGINT, size BIGINT, info TEXT, data BLOB, PRIMARY KEY (dim_0, dim_1)) WITHOUT ROWID;
CREATE VIEW "refs_grp/T" AS SELECT c.dim_0, c.present, CASE WHEN c."offset" IS NULL THEN NULL ELSE s.source END AS path, c."offset", c.size, c.info, c.data FROM "chunks_grp/T" AS c JOIN sources AS s USING(source_id);
CREATE VIEW "refs_inline" AS SELECT c.dim_0, c.dim_1, c.present, CASE WHEN c."offset" IS NULL THEN NULL ELSE s.source END AS path, c."offset", c.size, c.info, c.data FROM "chunks_inline" AS c JOIN sources AS s USING(source_id);
CREATE VIEW "refs_time" AS SELECT c.dim_0, c.present, CASE WHEN c."offset" IS NULL THEN NULL ELSE s.source END AS path, c."offset", c.size, c.info, c.data FROM "chunks_time" AS c JOIN sources AS s USING(source_id);
CREATE VIEW "refs_x" AS SELECT c.dim_0, c.dim_1, c.present, CASE WHEN c."offset" IS NULL THEN NULL ELSE s.source END AS path, c."offset", c.size, c.info, c.data FROM "chunks_x" AS c JOIN sources AS s USING(source_id);
