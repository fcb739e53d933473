-- 0007_usage_daily_by_statement: nothing changes on SQLite. The ledger
-- settles one row per transaction there (no settle batches), and the rollup's
-- triggers of 0006 fold each row; the version is kept in step with
-- PostgreSQL's.
SELECT 1;
