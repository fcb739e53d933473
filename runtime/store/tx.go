package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// InTx runs fn in one transaction and commits it when fn returns nil; on
// any error it rolls back and returns fn's error as is, for the caller to
// classify. On SQLite the transaction begins IMMEDIATE, holding the write
// lock from its first statement, so it serialises like a row lock.
func (db *DB) InTx(ctx context.Context, fn func(tx *sql.Tx) error) (err error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer func() {
		if rbErr := tx.Rollback(); rbErr != nil && !errors.Is(rbErr, sql.ErrTxDone) {
			err = errors.Join(err, fmt.Errorf("roll back: %w", rbErr))
		}
	}()
	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}
