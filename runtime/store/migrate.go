package store

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// migrationFiles holds migrations/<dialect>/NNNN_name.sql.
//
//go:embed migrations
var migrationFiles embed.FS

// migrateLockKey is the PostgreSQL advisory lock that serialises replicas
// migrating at once: a fixed number ("llmplat" in ASCII) that no other lock
// of ours uses.
const migrateLockKey int64 = 0x6c6c6d706c6174

// createMigrationsTable creates the table that records applied versions,
// per dialect.
var createMigrationsTable = map[Dialect]string{
	Postgres: `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    BIGINT PRIMARY KEY,
		applied_at TIMESTAMPTZ NOT NULL DEFAULT now())`,
	SQLite: `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    INTEGER PRIMARY KEY,
		applied_at TIMESTAMP NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f+00:00', 'now')))`,
}

// migration is one numbered schema change.
type migration struct {
	version int64
	name    string // the file name, for errors
	sql     string
}

// Migrate brings the schema up to the newest embedded migration. Each
// migration runs in its own transaction and is recorded in
// schema_migrations; a second call is a no-op. Replicas starting together on
// PostgreSQL take turns on an advisory lock; on SQLite the IMMEDIATE
// transactions take turns. Migrate refuses (ErrSchemaTooNew) to touch a
// database that a newer binary has migrated.
func (db *DB) Migrate(ctx context.Context) error {
	migs, err := loadMigrations(migrationFiles, path.Join("migrations", db.dialect.String()))
	if err != nil {
		return err
	}
	_, err = db.migrate(ctx, migs)
	return err
}

// migrate applies the pending migrations of migs and returns how many this
// call applied.
func (db *DB) migrate(ctx context.Context, migs []migration) (int, error) {
	applied := 0
	for {
		did, err := db.migrateStep(ctx, migs)
		if err != nil {
			return applied, err
		}
		if !did {
			return applied, nil
		}
		applied++
	}
}

// migrateStep applies the first pending migration in one transaction and
// reports whether there was one.
func (db *DB) migrateStep(ctx context.Context, migs []migration) (applied bool, err error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return false, fmt.Errorf("begin migration: %w", err)
	}
	defer func() {
		if rbErr := tx.Rollback(); rbErr != nil && !errors.Is(rbErr, sql.ErrTxDone) {
			err = errors.Join(err, fmt.Errorf("roll back migration: %w", rbErr))
		}
	}()
	if db.dialect == Postgres {
		if _, err := tx.ExecContext(ctx, "SELECT pg_advisory_xact_lock($1)", migrateLockKey); err != nil {
			return false, fmt.Errorf("take migration lock: %w", err)
		}
	}
	if _, err := tx.ExecContext(ctx, createMigrationsTable[db.dialect]); err != nil {
		return false, fmt.Errorf("create schema_migrations: %w", err)
	}
	done, current, err := appliedVersions(ctx, tx)
	if err != nil {
		return false, err
	}
	if latest := migs[len(migs)-1].version; current > latest {
		return false, fmt.Errorf("database at version %d, this binary knows up to %d: %w", current, latest, ErrSchemaTooNew)
	}
	i := slices.IndexFunc(migs, func(m migration) bool { return !done[m.version] })
	if i < 0 {
		return false, tx.Commit()
	}
	m := migs[i]
	if _, err := tx.ExecContext(ctx, m.sql); err != nil {
		return false, fmt.Errorf("apply migration %s: %w", m.name, err)
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO schema_migrations (version) VALUES ($1)", m.version); err != nil {
		return false, fmt.Errorf("record migration %s: %w", m.name, err)
	}
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("commit migration %s: %w", m.name, err)
	}
	return true, nil
}

// appliedVersions returns the versions schema_migrations records and the
// highest of them (0 for none).
func appliedVersions(ctx context.Context, tx *sql.Tx) (map[int64]bool, int64, error) {
	rows, err := tx.QueryContext(ctx, "SELECT version FROM schema_migrations")
	if err != nil {
		return nil, 0, fmt.Errorf("read schema versions: %w", err)
	}
	defer rows.Close()
	applied, current := map[int64]bool{}, int64(0)
	for rows.Next() {
		var v int64
		if err := rows.Scan(&v); err != nil {
			return nil, 0, fmt.Errorf("read schema versions: %w", err)
		}
		applied[v], current = true, max(current, v)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, fmt.Errorf("read schema versions: %w", err)
	}
	return applied, current, nil
}

// loadMigrations reads the NNNN_name.sql files of dir (four digits or
// more), which must number from 1 upwards without duplicates. A gap is
// allowed: branches developed side by side take numbers in advance (one
// adds 0010 while another adds 0009), and the runner applies every
// migration schema_migrations does not record, in order, so a database
// that ran 0010 first still gets 0009 once both are merged.
func loadMigrations(fsys fs.FS, dir string) ([]migration, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("%w: read %s: %w", ErrBadMigrations, dir, err)
	}
	var migs []migration
	for _, e := range entries {
		name := e.Name()
		digits, _, ok := strings.Cut(name, "_")
		v, err := strconv.ParseInt(digits, 10, 64)
		if e.IsDir() || !ok || !strings.HasSuffix(name, ".sql") || len(digits) < 4 || err != nil {
			return nil, fmt.Errorf("%w: %s/%s is not named NNNN_name.sql", ErrBadMigrations, dir, name)
		}
		b, err := fs.ReadFile(fsys, path.Join(dir, name))
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrBadMigrations, err)
		}
		migs = append(migs, migration{version: v, name: name, sql: string(b)})
	}
	sort.Slice(migs, func(i, j int) bool { return migs[i].version < migs[j].version })
	if len(migs) == 0 {
		return nil, fmt.Errorf("%w: %s holds none", ErrBadMigrations, dir)
	}
	if migs[0].version != 1 {
		return nil, fmt.Errorf("%w: %s/%s has version %d, want 1", ErrBadMigrations, dir, migs[0].name, migs[0].version)
	}
	for i := 1; i < len(migs); i++ {
		if migs[i].version == migs[i-1].version {
			return nil, fmt.Errorf("%w: %s/%s and %s share version %d", ErrBadMigrations, dir, migs[i-1].name, migs[i].name, migs[i].version)
		}
	}
	return migs, nil
}
