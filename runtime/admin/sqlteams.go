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

// teamColumns are the teams columns scanTeam reads, in order.
const teamColumns = "id, name, balance_microcredits, created_at, released_at, self_service_keys, personal_key_max_days"

// scanTeam reads one team selected with teamColumns. Reserved and available
// money come from the ledger, not from here.
func scanTeam(r rowScanner) (adminwire.Team, error) {
	var (
		t        adminwire.Team
		released sql.NullTime
	)
	if err := r.Scan(&t.ID, &t.Name, &t.BalanceMicrocredits, &t.CreatedAt, &released, &t.SelfServiceKeys, &t.PersonalKeyMaxDays); err != nil {
		return adminwire.Team{}, err
	}
	t.CreatedAt = t.CreatedAt.UTC()
	if released.Valid {
		at := released.Time.UTC()
		t.ReleasedAt = &at
	}
	return t, nil
}

// CreateTeam creates the team called name, or returns the existing one
// with created false: creating a team is idempotent by name.
func (s *SQLStore) CreateTeam(ctx context.Context, name string, now time.Time) (adminwire.Team, bool, error) {
	t, err := scanTeam(s.db.QueryRowContext(ctx, `INSERT INTO teams (name, created_at) VALUES ($1, $2)
		ON CONFLICT (name) DO NOTHING RETURNING `+teamColumns, name, now))
	switch {
	case err == nil:
		return t, true, nil
	case !errors.Is(err, sql.ErrNoRows):
		return adminwire.Team{}, false, fmt.Errorf("create team: %w", err)
	}
	t, err = scanTeam(s.db.QueryRowContext(ctx, "SELECT "+teamColumns+" FROM teams WHERE name = $1", name))
	if err != nil {
		return adminwire.Team{}, false, fmt.Errorf("read existing team: %w", err)
	}
	return t, false, nil
}

// CreateTeamOnly creates the team called name (created true), or takes
// back the team of that name that ReleaseTeam released (created false), or
// fails with ErrAlreadyExists when the platform holds a team of that name.
// The database decides (the unique name, then the released row's lock), so
// of concurrent creates exactly one wins. With a non-empty idemKey, a
// repeat of the create answers the team it made or took (created false)
// instead of failing.
func (s *SQLStore) CreateTeamOnly(ctx context.Context, name, idemKey string, now time.Time) (adminwire.Team, bool, error) {
	fp := fingerprint(adminwire.CreateTeamRequest{Name: name})
	var (
		t       adminwire.Team
		created bool
	)
	err := runIdempotent(func() error {
		return s.db.InTx(ctx, func(tx *sql.Tx) error {
			var err error
			t, created, err = createTeamOnlyTx(ctx, tx, name, idemKey, fp, now)
			return err
		})
	})
	if err != nil {
		return adminwire.Team{}, false, fmt.Errorf("create team %q: %w", name, err)
	}
	return t, created, nil
}

// createTeamOnlyTx is CreateTeamOnly's transaction.
func createTeamOnlyTx(ctx context.Context, tx *sql.Tx, name, idemKey, fp string, now time.Time) (adminwire.Team, bool, error) {
	replay := func() (adminwire.Team, bool, error) {
		if idemKey == "" {
			return adminwire.Team{}, false, nil
		}
		id, err := lookupIdempotent(ctx, tx, scopeTeamCreate, idemKey, fp)
		if err != nil || id == 0 {
			return adminwire.Team{}, false, err
		}
		t, err := scanTeam(tx.QueryRowContext(ctx, "SELECT "+teamColumns+" FROM teams WHERE id = $1", id))
		if err != nil {
			return adminwire.Team{}, false, fmt.Errorf("read team %d: %w", id, err)
		}
		return t, true, nil
	}
	if t, ok, err := replay(); err != nil || ok {
		return t, false, err
	}
	t, err := scanTeam(tx.QueryRowContext(ctx, `INSERT INTO teams (name, created_at) VALUES ($1, $2)
		ON CONFLICT (name) DO NOTHING RETURNING `+teamColumns, name, now))
	switch {
	case errors.Is(err, sql.ErrNoRows):
		// The name is taken. A concurrent repeat of this very create may
		// have taken it: the insert waited for its commit, and this read
		// sees its record.
		if t, ok, err := replay(); err != nil || ok {
			return t, false, err
		}
		return takeBackTx(ctx, tx, name, idemKey, fp, now)
	case err != nil:
		return adminwire.Team{}, false, fmt.Errorf("insert: %w", err)
	}
	if idemKey != "" {
		if err := recordIdempotent(ctx, tx, scopeTeamCreate, idemKey, fp, t.ID, now); err != nil {
			if store.IsUniqueViolation(err) {
				return adminwire.Team{}, false, errRaceLost
			}
			return adminwire.Team{}, false, err
		}
	}
	return t, true, nil
}

// takeBackTx takes back the released team called name for a create-only
// request, or fails with ErrAlreadyExists when it is held. Of concurrent
// takers the row's lock lets one through: the others find it held.
func takeBackTx(ctx context.Context, tx *sql.Tx, name, idemKey, fp string, now time.Time) (adminwire.Team, bool, error) {
	t, err := scanTeam(tx.QueryRowContext(ctx, `UPDATE teams SET released_at = NULL
		WHERE name = $1 AND released_at IS NOT NULL RETURNING `+teamColumns, name))
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return adminwire.Team{}, false, ErrAlreadyExists
	case err != nil:
		return adminwire.Team{}, false, fmt.Errorf("take back released team: %w", err)
	}
	if idemKey != "" {
		if err := recordIdempotent(ctx, tx, scopeTeamCreate, idemKey, fp, t.ID, now); err != nil {
			if store.IsUniqueViolation(err) {
				return adminwire.Team{}, false, errRaceLost
			}
			return adminwire.Team{}, false, err
		}
	}
	return t, false, nil
}

// ReleaseTeam marks the team with id released (ErrTeamNotFound when it
// does not exist): Terraform let go of it, and a create-only request of its
// name may take it back. Releasing twice keeps the first time. Nothing else
// changes: its keys work until revoked.
func (s *SQLStore) ReleaseTeam(ctx context.Context, id int64, now time.Time) (adminwire.Team, error) {
	res, err := s.db.ExecContext(ctx, "UPDATE teams SET released_at = COALESCE(released_at, $2) WHERE id = $1", id, now)
	if err != nil {
		return adminwire.Team{}, fmt.Errorf("release team: %w", err)
	}
	if n, err := res.RowsAffected(); err == nil && n == 0 {
		return adminwire.Team{}, fmt.Errorf("team %d: %w", id, ErrTeamNotFound)
	}
	return s.GetTeam(ctx, id)
}

// GetTeam returns the team with id, or ErrTeamNotFound.
func (s *SQLStore) GetTeam(ctx context.Context, id int64) (adminwire.Team, error) {
	t, err := scanTeam(s.db.QueryRowContext(ctx, "SELECT "+teamColumns+" FROM teams WHERE id = $1", id))
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return adminwire.Team{}, fmt.Errorf("team %d: %w", id, ErrTeamNotFound)
	case err != nil:
		return adminwire.Team{}, fmt.Errorf("read team: %w", err)
	}
	return t, nil
}

// ListTeams returns every team, oldest first.
func (s *SQLStore) ListTeams(ctx context.Context) ([]adminwire.Team, error) {
	rows, err := s.db.QueryContext(ctx, "SELECT "+teamColumns+" FROM teams ORDER BY id")
	if err != nil {
		return nil, fmt.Errorf("list teams: %w", err)
	}
	defer rows.Close()
	teams := []adminwire.Team{}
	for rows.Next() {
		t, err := scanTeam(rows)
		if err != nil {
			return nil, fmt.Errorf("list teams: %w", err)
		}
		teams = append(teams, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list teams: %w", err)
	}
	return teams, nil
}

// RenameTeam renames the team with id: ErrTeamNotFound when it does not
// exist, ErrNameTaken when another team has the name.
func (s *SQLStore) RenameTeam(ctx context.Context, id int64, name string) (adminwire.Team, error) {
	res, err := s.db.ExecContext(ctx, "UPDATE teams SET name = $2 WHERE id = $1", id, name)
	switch {
	case store.IsUniqueViolation(err):
		return adminwire.Team{}, fmt.Errorf("rename team %d to %q: %w", id, name, ErrNameTaken)
	case err != nil:
		return adminwire.Team{}, fmt.Errorf("rename team: %w", err)
	}
	if n, err := res.RowsAffected(); err == nil && n == 0 {
		return adminwire.Team{}, fmt.Errorf("team %d: %w", id, ErrTeamNotFound)
	}
	return s.GetTeam(ctx, id)
}

// SetSelfService sets the team's self-service switch and the longest life
// of its personal keys; a nil field is left as it is. A missing team is
// ErrTeamNotFound.
func (s *SQLStore) SetSelfService(ctx context.Context, id int64, on *bool, maxDays *int) (adminwire.Team, error) {
	res, err := s.db.ExecContext(ctx, `UPDATE teams SET self_service_keys = COALESCE($2, self_service_keys),
		personal_key_max_days = COALESCE($3, personal_key_max_days) WHERE id = $1`, id, nullBool(on), nullInt(maxDays))
	if err != nil {
		return adminwire.Team{}, fmt.Errorf("set self-service of team %d: %w", id, err)
	}
	if n, err := res.RowsAffected(); err == nil && n == 0 {
		return adminwire.Team{}, fmt.Errorf("team %d: %w", id, ErrTeamNotFound)
	}
	return s.GetTeam(ctx, id)
}

// nullBool and nullInt are nullable parameters: nil for an absent field.
func nullBool(b *bool) any {
	if b == nil {
		return nil
	}
	return *b
}

func nullInt(v *int) any {
	if v == nil {
		return nil
	}
	return int64(*v)
}
