-- The extension's owner need not stay a superuser (SPEC §3): a role that
-- created lake and later lost SUPERUSER still administers it and reads
-- every tenant's landings, while a role that is neither is refused (42501)
-- and sees none. (The privilege matrix's owner is a superuser, so nothing
-- else tells the owner's own checks apart.) Runs last: it re-creates lake.
CREATE ROLE lake_extowner SUPERUSER;
CREATE ROLE lake_nobody;
SET SESSION AUTHORIZATION lake_extowner;
DROP EXTENSION lake CASCADE;
DROP SCHEMA lake;	-- made before the extension: it stays, owned by another role
CREATE EXTENSION lake;
RESET SESSION AUTHORIZATION;
ALTER ROLE lake_extowner NOSUPERUSER;
GRANT USAGE ON SCHEMA lake TO lake_nobody;
SELECT extowner::regrole AS owner, rolsuper
FROM pg_extension JOIN pg_roles ON pg_roles.oid = extowner WHERE extname = 'lake';

SET SESSION AUTHORIZATION lake_extowner;
SELECT lake.create_dataset('owned');
SELECT lake.define_lifecycle('owned_lc', 'A', '{{A,B},{B,A}}');
SELECT lake.grant_tenant('lake_nobody', 'granted');
SELECT lake.append('owned', 'any_tenant', 'op', '\x01'::bytea) AS version;
SELECT lake.create_owner('eo', 'owned_lc', 'any_tenant');
SELECT (lake.cast_durable('eo', 'A', 'B')).position;
SELECT lake.seal() IS NULL AS nothing_pending;
SELECT lake.checkpoint() > 0 AS checkpointed;
SELECT owner, "position" FROM lake.log();
RESET SESSION AUTHORIZATION;

SET SESSION AUTHORIZATION lake_nobody;
SELECT left(t.err($$SELECT lake.seal()$$), 5) AS seal,
       left(t.err($$SELECT lake.checkpoint()$$), 5) AS checkpoint,
       left(t.err($$SELECT lake.create_dataset('mine')$$), 5) AS create_dataset,
       left(t.err($$SELECT lake.read('owned', 1)$$), 5) AS read;
SELECT count(*) AS landings_seen FROM lake.log();
RESET SESSION AUTHORIZATION;

DROP EXTENSION lake CASCADE;
DROP SCHEMA lake;
DROP OWNED BY lake_nobody;
DROP ROLE lake_extowner;
DROP ROLE lake_nobody;
