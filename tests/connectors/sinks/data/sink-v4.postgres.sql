SET statement_timeout = 0;
SET lock_timeout = 0;
SET idle_in_transaction_session_timeout = 0;
SET client_encoding = 'UTF8';
SET standard_conforming_strings = on;
SET check_function_bodies = false;
SET xmloption = content;
SET client_min_messages = warning;
SET row_security = off;
SET default_tablespace = '';
SET default_table_access_method = heap;
CREATE TABLE public.consumer_group_commit_counts (
    group_id text NOT NULL COLLATE pg_catalog."C",
    commits bigint NOT NULL,
    updated_at_ms bigint NOT NULL
);
CREATE TABLE public.consumer_group_members (
    group_id text NOT NULL COLLATE pg_catalog."C",
    member_id text NOT NULL COLLATE pg_catalog."C",
    batch_id bigint NOT NULL
);
CREATE TABLE public.consumer_groups (
    group_id text NOT NULL COLLATE pg_catalog."C",
    generation integer,
    members integer,
    batch_id bigint NOT NULL
);
CREATE TABLE public.consumer_offsets (
    group_id text NOT NULL COLLATE pg_catalog."C",
    topic text NOT NULL COLLATE pg_catalog."C",
    partition integer NOT NULL,
    committed_offset bigint NOT NULL,
    leader_epoch integer NOT NULL,
    metadata text NOT NULL,
    commit_timestamp_ms bigint NOT NULL,
    expire_timestamp_ms bigint,
    batch_id bigint NOT NULL
)
WITH (fillfactor='70');
CREATE TABLE public.coordinator_status (
    id smallint NOT NULL,
    status text NOT NULL,
    detail text NOT NULL,
    last_batch_id bigint NOT NULL,
    ingest_offsets text NOT NULL,
    input_rows bigint NOT NULL,
    commits_applied bigint NOT NULL,
    rejected bigint NOT NULL,
    tombstones bigint NOT NULL,
    state_keys bigint NOT NULL,
    duration_ms bigint NOT NULL,
    batch_timestamp_ms bigint,
    skipped_records bigint NOT NULL,
    updated_at_ms bigint NOT NULL,
    heartbeat_at_ms bigint,
    CONSTRAINT coordinator_status_id_check CHECK ((id = 1)),
    CONSTRAINT coordinator_status_status_check CHECK ((status = ANY (ARRAY['LOADING'::text, 'ACTIVE'::text, 'STOPPED'::text])))
);
CREATE TABLE public.offset_commit_history (
    batch_id bigint NOT NULL,
    seq bigint NOT NULL,
    group_id text NOT NULL COLLATE pg_catalog."C",
    topic text NOT NULL COLLATE pg_catalog."C",
    partition integer NOT NULL,
    committed_offset bigint NOT NULL,
    leader_epoch integer NOT NULL,
    metadata text NOT NULL,
    commit_timestamp_ms bigint NOT NULL
)
WITH (autovacuum_vacuum_scale_factor='0.02', autovacuum_vacuum_insert_scale_factor='0.02');
CREATE TABLE public.sink_schema_version (
    version integer NOT NULL,
    description text NOT NULL,
    applied_at_ms bigint NOT NULL
);
CREATE TABLE public.source_cluster (
    id smallint NOT NULL,
    cluster_id text NOT NULL,
    cluster_name text NOT NULL,
    updated_at_ms bigint NOT NULL,
    CONSTRAINT source_cluster_id_check CHECK ((id = 1))
);
CREATE TABLE public.topic_log_end_offsets (
    topic text NOT NULL COLLATE pg_catalog."C",
    partition integer NOT NULL,
    log_end_offset bigint NOT NULL,
    updated_at_ms bigint NOT NULL
);
CREATE TABLE public.topic_log_end_samples (
    topic text NOT NULL,
    partition integer NOT NULL,
    log_end_offset bigint NOT NULL,
    first_seen_ms bigint NOT NULL,
    last_seen_ms bigint NOT NULL
);
INSERT INTO public.consumer_group_commit_counts VALUES ('audit', 1, 1795754801309);
INSERT INTO public.consumer_groups VALUES ('classic', 3, 2, 0);
INSERT INTO public.consumer_offsets VALUES ('payments', 'orders', 1, 20, -1, 'm', 1700000000000, NULL, 0);
INSERT INTO public.consumer_offsets VALUES ('nul￿0group', 'té✓', 0, 5, -1, '', 1700000001000, NULL, 0);
INSERT INTO public.consumer_offsets VALUES ('payments', 'orders', 0, 17, 4, '', 1700000003000, NULL, 1);
INSERT INTO public.consumer_offsets VALUES ('audit', 'orders', 2, 3, -1, '', 1700000004000, NULL, 2);
INSERT INTO public.coordinator_status VALUES (1, 'ACTIVE', '', 2, '{"0": 9, "1": 7}', 0, 0, 0, 0, 0, 0, 1795754801305, 0, 1795754801310, NULL);
INSERT INTO public.offset_commit_history VALUES (0, 0, 'payments', 'orders', 0, 10, -1, '', 1700000000000);
INSERT INTO public.offset_commit_history VALUES (0, 1, 'payments', 'orders', 1, 20, -1, 'm', 1700000000000);
INSERT INTO public.offset_commit_history VALUES (0, 2, 'nul￿0group', 'té✓', 0, 5, -1, '', 1700000001000);
INSERT INTO public.offset_commit_history VALUES (0, 3, 'gone', 'orders', 0, 1, -1, '', 1700000001000);
INSERT INTO public.offset_commit_history VALUES (1, 0, 'payments', 'orders', 0, 15, -1, '', 1700000002000);
INSERT INTO public.offset_commit_history VALUES (1, 1, 'payments', 'orders', 0, 17, 4, '', 1700000003000);
INSERT INTO public.offset_commit_history VALUES (2, 0, 'audit', 'orders', 2, 3, -1, '', 1700000004000);
INSERT INTO public.sink_schema_version VALUES (2, 'history indexed by commit time (history retention); status heartbeat (liveness)', 1795754801296);
INSERT INTO public.sink_schema_version VALUES (3, 'log-end offsets over time per partition (lag in seconds)', 1795754801301);
INSERT INTO public.sink_schema_version VALUES (4, 'offset commits counted per group (the commits counter)', 1795754801303);
INSERT INTO public.topic_log_end_offsets VALUES ('orders', 0, 30, 1700000000040);
INSERT INTO public.topic_log_end_offsets VALUES ('orders', 1, 25, 1700000000040);
ALTER TABLE ONLY public.consumer_group_commit_counts
    ADD CONSTRAINT consumer_group_commit_counts_pkey PRIMARY KEY (group_id);
ALTER TABLE ONLY public.consumer_group_members
    ADD CONSTRAINT consumer_group_members_pkey PRIMARY KEY (group_id, member_id);
ALTER TABLE ONLY public.consumer_groups
    ADD CONSTRAINT consumer_groups_pkey PRIMARY KEY (group_id);
ALTER TABLE ONLY public.consumer_offsets
    ADD CONSTRAINT consumer_offsets_pkey PRIMARY KEY (group_id, topic, partition);
ALTER TABLE ONLY public.coordinator_status
    ADD CONSTRAINT coordinator_status_pkey PRIMARY KEY (id);
ALTER TABLE ONLY public.offset_commit_history
    ADD CONSTRAINT offset_commit_history_pkey PRIMARY KEY (batch_id, seq);
ALTER TABLE ONLY public.sink_schema_version
    ADD CONSTRAINT sink_schema_version_pkey PRIMARY KEY (version);
ALTER TABLE ONLY public.source_cluster
    ADD CONSTRAINT source_cluster_pkey PRIMARY KEY (id);
ALTER TABLE ONLY public.topic_log_end_offsets
    ADD CONSTRAINT topic_log_end_offsets_pkey PRIMARY KEY (topic, partition);
ALTER TABLE ONLY public.topic_log_end_samples
    ADD CONSTRAINT topic_log_end_samples_pkey PRIMARY KEY (topic, partition, log_end_offset);
CREATE INDEX offset_commit_history_key_idx ON public.offset_commit_history USING btree (group_id, topic, partition, batch_id);
CREATE INDEX offset_commit_history_time_idx ON public.offset_commit_history USING btree (commit_timestamp_ms);
