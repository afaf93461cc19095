-- PostgreSQL roles for the sink: the job (or the mirror) writes, readers only read.
--
-- Run once per database, as a role allowed to create roles and schemas (e.g. postgres):
--
--   psql "postgresql://postgres@db-host/offsets" -v ON_ERROR_STOP=1 \
--        -v writer=consumer_offsets_writer -v writer_password="$WRITER_PASSWORD" \
--        -v reader=consumer_offsets_reader -v reader_password="$READER_PASSWORD" \
--        -v schema=consumer_offsets -f deploy/postgres/roles.sql
--
-- Then the job and the mirror use the writer (they create and migrate the tables, so the
-- writer owns them):  --sink-url "postgresql://consumer_offsets_writer:…@db-host/offsets?schema=consumer_offsets"
-- and `serve` and the CLI's reads the reader:
--                      "postgresql://consumer_offsets_reader:…@db-host/offsets?schema=consumer_offsets"
-- The reader may SELECT every table the writer creates, now and after a migration adds one, and
-- nothing else: no INSERT, UPDATE, DELETE, DDL, and its sessions are read-only by default.

CREATE ROLE :"writer" LOGIN PASSWORD :'writer_password';
CREATE ROLE :"reader" LOGIN PASSWORD :'reader_password';

-- The writer owns the schema, so it creates (and migrates) the sink's tables in it.
CREATE SCHEMA :"schema" AUTHORIZATION :"writer";
REVOKE ALL ON SCHEMA :"schema" FROM PUBLIC;
GRANT USAGE ON SCHEMA :"schema" TO :"reader";

-- Tables the writer creates later (a new sink, a migration step) are readable at once.
ALTER DEFAULT PRIVILEGES FOR ROLE :"writer" IN SCHEMA :"schema" GRANT SELECT ON TABLES TO :"reader";
GRANT SELECT ON ALL TABLES IN SCHEMA :"schema" TO :"reader";

ALTER ROLE :"reader" SET default_transaction_read_only = on;
