package admin

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/llmplat/llmplat/runtime/adminwire"
	"github.com/llmplat/llmplat/runtime/store"
)

// modelColumns are the models columns scanModel reads, in order.
const modelColumns = `name, served_name, prompt_price_micro_per_mtok, completion_price_micro_per_mtok,
	max_context_tokens, max_output_tokens, created_at, updated_at`

// scanModel reads one model selected with modelColumns.
func scanModel(r rowScanner) (adminwire.Model, error) {
	var m adminwire.Model
	if err := r.Scan(&m.Name, &m.ServedName, &m.PromptPriceMicroPerMTok, &m.CompletionPriceMicroPerMTok,
		&m.MaxContextTokens, &m.MaxOutputTokens, &m.CreatedAt, &m.UpdatedAt); err != nil {
		return adminwire.Model{}, err
	}
	m.CreatedAt, m.UpdatedAt = m.CreatedAt.UTC(), m.UpdatedAt.UTC()
	return m, nil
}

// getModel reads the model called name through q.
func getModel(ctx context.Context, q queryer, name, forUpdate string) (adminwire.Model, error) {
	m, err := scanModel(q.QueryRowContext(ctx, "SELECT "+modelColumns+" FROM models WHERE name = $1"+forUpdate, name))
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return adminwire.Model{}, fmt.Errorf("model %q: %w", name, ErrNotFound)
	case err != nil:
		return adminwire.Model{}, fmt.Errorf("read model: %w", err)
	}
	return m, nil
}

// PutModel creates the model called name (created true) or brings it to
// spec. Putting the spec it already has changes nothing, updated_at
// included, so a repeated apply is a no-op.
func (s *SQLStore) PutModel(ctx context.Context, name string, spec adminwire.ModelSpec, now time.Time) (adminwire.Model, bool, error) {
	var (
		m       adminwire.Model
		created bool
	)
	err := s.db.InTx(ctx, func(tx *sql.Tx) error {
		var err error
		m, err = scanModel(tx.QueryRowContext(ctx, `INSERT INTO models (name, served_name, prompt_price_micro_per_mtok,
			completion_price_micro_per_mtok, max_context_tokens, max_output_tokens, created_at, updated_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $7) ON CONFLICT (name) DO NOTHING RETURNING `+modelColumns,
			name, spec.ServedName, spec.PromptPriceMicroPerMTok, spec.CompletionPriceMicroPerMTok,
			spec.MaxContextTokens, spec.MaxOutputTokens, now))
		if err == nil {
			created = true
			return nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("insert: %w", err)
		}
		if m, err = getModel(ctx, tx, name, s.db.Dialect().ForUpdate()); err != nil {
			return err
		}
		if m.ModelSpec == spec {
			return nil
		}
		_, err = tx.ExecContext(ctx, `UPDATE models SET served_name = $2, prompt_price_micro_per_mtok = $3,
			completion_price_micro_per_mtok = $4, max_context_tokens = $5, max_output_tokens = $6, updated_at = $7
			WHERE name = $1`, name, spec.ServedName, spec.PromptPriceMicroPerMTok, spec.CompletionPriceMicroPerMTok,
			spec.MaxContextTokens, spec.MaxOutputTokens, now)
		if err != nil {
			return fmt.Errorf("update: %w", err)
		}
		m.ModelSpec, m.UpdatedAt = spec, now.UTC()
		return nil
	})
	if err != nil {
		return adminwire.Model{}, false, fmt.Errorf("put model: %w", err)
	}
	return m, created, nil
}

// CreateModel creates the model called name, or fails with
// ErrAlreadyExists when the platform declares a model of that name, which
// it leaves as it is. The primary key decides, so of concurrent creates
// exactly one wins. With a non-empty idemKey, a repeat of the create
// answers the model (created false) instead of failing.
func (s *SQLStore) CreateModel(ctx context.Context, name string, spec adminwire.ModelSpec, idemKey string, now time.Time) (adminwire.Model, bool, error) {
	fp := fingerprint(struct {
		Name string
		Spec adminwire.ModelSpec
	}{name, spec})
	var (
		m       adminwire.Model
		created bool
	)
	err := runIdempotent(func() error {
		return s.db.InTx(ctx, func(tx *sql.Tx) error {
			var err error
			m, created, err = createModelTx(ctx, tx, name, spec, idemKey, fp, now)
			return err
		})
	})
	if err != nil {
		return adminwire.Model{}, false, fmt.Errorf("create model %q: %w", name, err)
	}
	return m, created, nil
}

// createModelTx is CreateModel's transaction. Models have no numeric id:
// the idempotency record names none, and a replay reads the model by name.
func createModelTx(ctx context.Context, tx *sql.Tx, name string, spec adminwire.ModelSpec, idemKey, fp string, now time.Time) (adminwire.Model, bool, error) {
	replay := func() (adminwire.Model, bool, error) {
		if idemKey == "" {
			return adminwire.Model{}, false, nil
		}
		_, ok, err := readIdempotent(ctx, tx, scopeModelCreate, idemKey, fp)
		if err != nil || !ok {
			return adminwire.Model{}, false, err
		}
		m, err := getModel(ctx, tx, name, "")
		return m, err == nil, err
	}
	if m, ok, err := replay(); err != nil || ok {
		return m, false, err
	}
	m, err := scanModel(tx.QueryRowContext(ctx, `INSERT INTO models (name, served_name, prompt_price_micro_per_mtok,
		completion_price_micro_per_mtok, max_context_tokens, max_output_tokens, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $7) ON CONFLICT (name) DO NOTHING RETURNING `+modelColumns,
		name, spec.ServedName, spec.PromptPriceMicroPerMTok, spec.CompletionPriceMicroPerMTok,
		spec.MaxContextTokens, spec.MaxOutputTokens, now))
	switch {
	case errors.Is(err, sql.ErrNoRows):
		// A concurrent repeat of this very create may have won: the insert
		// waited for its commit, and this read sees its record.
		if m, ok, err := replay(); err != nil || ok {
			return m, false, err
		}
		return adminwire.Model{}, false, ErrAlreadyExists
	case err != nil:
		return adminwire.Model{}, false, fmt.Errorf("insert: %w", err)
	}
	if idemKey != "" {
		if err := recordIdempotent(ctx, tx, scopeModelCreate, idemKey, fp, 0, now); err != nil {
			if store.IsUniqueViolation(err) {
				return adminwire.Model{}, false, errRaceLost
			}
			return adminwire.Model{}, false, err
		}
	}
	return m, true, nil
}

// GetModel returns the model called name, or ErrNotFound.
func (s *SQLStore) GetModel(ctx context.Context, name string) (adminwire.Model, error) {
	return getModel(ctx, s.db, name, "")
}

// ListModels returns every model by name.
func (s *SQLStore) ListModels(ctx context.Context) ([]adminwire.Model, error) {
	rows, err := s.db.QueryContext(ctx, "SELECT "+modelColumns+" FROM models ORDER BY name")
	if err != nil {
		return nil, fmt.Errorf("list models: %w", err)
	}
	defer rows.Close()
	models := []adminwire.Model{}
	for rows.Next() {
		m, err := scanModel(rows)
		if err != nil {
			return nil, fmt.Errorf("list models: %w", err)
		}
		models = append(models, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list models: %w", err)
	}
	return models, nil
}

// DeleteModel removes the model called name, or reports ErrNotFound.
// Usage rows keep the name as text, so history survives.
func (s *SQLStore) DeleteModel(ctx context.Context, name string) error {
	res, err := s.db.ExecContext(ctx, "DELETE FROM models WHERE name = $1", name)
	if err != nil {
		return fmt.Errorf("delete model: %w", err)
	}
	if n, err := res.RowsAffected(); err == nil && n == 0 {
		return fmt.Errorf("model %q: %w", name, ErrNotFound)
	}
	return nil
}
