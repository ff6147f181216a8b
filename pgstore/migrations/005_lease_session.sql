-- 005: the session a stream's lease is tied to. {{schema}} is the quoted
-- schema name.
--
-- lease_session is the key of a session-level advisory lock that the
-- holder's process holds, on a connection of its own, for as long as it
-- lives; NULL means none (a lease granted by an older pgstore, or with
-- Config.NoLeaseSession). When the process dies, PostgreSQL ends its
-- session and drops the lock, and Acquire, which can then take the lock,
-- takes the lease over at once instead of waiting for lease_expires.
ALTER TABLE {{schema}}.streams ADD COLUMN IF NOT EXISTS lease_session bigint;
