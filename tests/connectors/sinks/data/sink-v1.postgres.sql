--
-- PostgreSQL database dump
--

\restrict DveLrwZHIIpsFhRVT03pjw6WGSUcd8gW5f95yI0jm938yhYO8fGLcn15dkn7zsG

-- Dumped from database version 15.18 (Debian 15.18-0+deb12u1)
-- Dumped by pg_dump version 15.18 (Debian 15.18-0+deb12u1)

SET statement_timeout = 0;
SET lock_timeout = 0;
SET idle_in_transaction_session_timeout = 0;
SET client_encoding = 'UTF8';
SET standard_conforming_strings = on;
SELECT pg_catalog.set_config('search_path', '', false);
SET check_function_bodies = false;
SET xmloption = content;
SET client_min_messages = warning;
SET row_security = off;

SET default_tablespace = '';

SET default_table_access_method = heap;

--
-- Name: consumer_group_members; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.consumer_group_members (
    group_id text NOT NULL COLLATE pg_catalog."C",
    member_id text NOT NULL COLLATE pg_catalog."C",
    batch_id bigint NOT NULL
);


--
-- Name: consumer_groups; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.consumer_groups (
    group_id text NOT NULL COLLATE pg_catalog."C",
    generation integer,
    members integer,
    batch_id bigint NOT NULL
);


--
-- Name: consumer_offsets; Type: TABLE; Schema: public; Owner: -
--

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


--
-- Name: coordinator_status; Type: TABLE; Schema: public; Owner: -
--

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
    CONSTRAINT coordinator_status_id_check CHECK ((id = 1)),
    CONSTRAINT coordinator_status_status_check CHECK ((status = ANY (ARRAY['LOADING'::text, 'ACTIVE'::text, 'STOPPED'::text])))
);


--
-- Name: offset_commit_history; Type: TABLE; Schema: public; Owner: -
--

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
);


--
-- Name: source_cluster; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.source_cluster (
    id smallint NOT NULL,
    cluster_id text NOT NULL,
    cluster_name text NOT NULL,
    updated_at_ms bigint NOT NULL,
    CONSTRAINT source_cluster_id_check CHECK ((id = 1))
);


--
-- Name: topic_log_end_offsets; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.topic_log_end_offsets (
    topic text NOT NULL COLLATE pg_catalog."C",
    partition integer NOT NULL,
    log_end_offset bigint NOT NULL,
    updated_at_ms bigint NOT NULL
);


--
-- Data for Name: consumer_group_members; Type: TABLE DATA; Schema: public; Owner: -
--

COPY public.consumer_group_members (group_id, member_id, batch_id) FROM stdin;
\.


--
-- Data for Name: consumer_groups; Type: TABLE DATA; Schema: public; Owner: -
--

COPY public.consumer_groups (group_id, generation, members, batch_id) FROM stdin;
classic	3	2	0
\.


--
-- Data for Name: consumer_offsets; Type: TABLE DATA; Schema: public; Owner: -
--

COPY public.consumer_offsets (group_id, topic, partition, committed_offset, leader_epoch, metadata, commit_timestamp_ms, expire_timestamp_ms, batch_id) FROM stdin;
payments	orders	1	20	-1	m	1700000000000	\N	0
nul￿0group	té✓	0	5	-1		1700000001000	\N	0
payments	orders	0	17	4		1700000003000	\N	1
\.


--
-- Data for Name: coordinator_status; Type: TABLE DATA; Schema: public; Owner: -
--

COPY public.coordinator_status (id, status, detail, last_batch_id, ingest_offsets, input_rows, commits_applied, rejected, tombstones, state_keys, duration_ms, batch_timestamp_ms, skipped_records, updated_at_ms) FROM stdin;
1	ACTIVE		1	{"0": 8, "1": 7}	3	2	0	1	0	0	1795607279228	0	1700000000050
\.


--
-- Data for Name: offset_commit_history; Type: TABLE DATA; Schema: public; Owner: -
--

COPY public.offset_commit_history (batch_id, seq, group_id, topic, partition, committed_offset, leader_epoch, metadata, commit_timestamp_ms) FROM stdin;
0	0	payments	orders	0	10	-1		1700000000000
0	1	payments	orders	1	20	-1	m	1700000000000
0	2	nul￿0group	té✓	0	5	-1		1700000001000
0	3	gone	orders	0	1	-1		1700000001000
1	0	payments	orders	0	15	-1		1700000002000
1	1	payments	orders	0	17	4		1700000003000
\.


--
-- Data for Name: source_cluster; Type: TABLE DATA; Schema: public; Owner: -
--

COPY public.source_cluster (id, cluster_id, cluster_name, updated_at_ms) FROM stdin;
\.


--
-- Data for Name: topic_log_end_offsets; Type: TABLE DATA; Schema: public; Owner: -
--

COPY public.topic_log_end_offsets (topic, partition, log_end_offset, updated_at_ms) FROM stdin;
orders	0	30	1700000000040
orders	1	25	1700000000040
\.


--
-- Name: consumer_group_members consumer_group_members_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.consumer_group_members
    ADD CONSTRAINT consumer_group_members_pkey PRIMARY KEY (group_id, member_id);


--
-- Name: consumer_groups consumer_groups_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.consumer_groups
    ADD CONSTRAINT consumer_groups_pkey PRIMARY KEY (group_id);


--
-- Name: consumer_offsets consumer_offsets_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.consumer_offsets
    ADD CONSTRAINT consumer_offsets_pkey PRIMARY KEY (group_id, topic, partition);


--
-- Name: coordinator_status coordinator_status_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.coordinator_status
    ADD CONSTRAINT coordinator_status_pkey PRIMARY KEY (id);


--
-- Name: offset_commit_history offset_commit_history_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.offset_commit_history
    ADD CONSTRAINT offset_commit_history_pkey PRIMARY KEY (batch_id, seq);


--
-- Name: source_cluster source_cluster_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.source_cluster
    ADD CONSTRAINT source_cluster_pkey PRIMARY KEY (id);


--
-- Name: topic_log_end_offsets topic_log_end_offsets_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.topic_log_end_offsets
    ADD CONSTRAINT topic_log_end_offsets_pkey PRIMARY KEY (topic, partition);


--
-- Name: offset_commit_history_key_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX offset_commit_history_key_idx ON public.offset_commit_history USING btree (group_id, topic, partition, batch_id);


--
-- PostgreSQL database dump complete
--

\unrestrict DveLrwZHIIpsFhRVT03pjw6WGSUcd8gW5f95yI0jm938yhYO8fGLcn15dkn7zsG

