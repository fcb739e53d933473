package store

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
)

// ErrPasswordUnavailable means the database password could not be read
// from its source (Secrets Manager unreachable, the secret unreadable):
// the database is out of reach, as with a refused connection.
var ErrPasswordUnavailable = errors.New("database password unavailable")

// pgInvalidPassword is SQLSTATE 28P01, PostgreSQL's answer to a wrong
// password: after a rotation, the password a process cached is the old one.
const pgInvalidPassword = "28P01"

// PasswordSource gives the database password that is current now. A
// rotated password (Aurora's managed master password changes every seven
// days) is read again from it, so it must return the new one once the
// rotation is done.
type PasswordSource interface {
	Password(ctx context.Context) (string, error)
}

// PasswordFunc is a PasswordSource made of a function.
type PasswordFunc func(ctx context.Context) (string, error)

// Password calls f.
func (f PasswordFunc) Password(ctx context.Context) (string, error) { return f(ctx) }

// Option changes how Open connects.
type Option func(*options)

type options struct {
	password PasswordSource
}

// WithPassword makes every new PostgreSQL connection take its password
// from src instead of the DSN (which must then carry none). The password
// is read once and kept; a connection refused for a wrong password
// (SQLSTATE 28P01) forgets it, reads it again and retries once, so a
// rotation costs no failed connection once the source has the new
// password. Connections already open are not affected by a rotation.
func WithPassword(src PasswordSource) Option {
	return func(o *options) { o.password = src }
}

// passwordCache keeps the last password read from its source.
type passwordCache struct {
	src   PasswordSource
	mu    sync.Mutex // held while reading the source: one read serves every waiting connection
	value string
	have  bool
}

// get returns the kept password, reading the source when there is none.
func (c *passwordCache) get(ctx context.Context) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.have {
		return c.value, nil
	}
	v, err := c.src.Password(ctx)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrPasswordUnavailable, err)
	}
	c.value, c.have = v, true
	return v, nil
}

// forget drops the kept password if it is still used, the one a server
// refused; a newer one another connection already read is kept.
func (c *passwordCache) forget(used string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.have && c.value == used {
		c.value, c.have = "", false
	}
}

// rotatingConnector opens pgx connections with the password of its cache
// (pgx's BeforeConnect), and reads the password again after a refusal.
type rotatingConnector struct {
	cfg      pgx.ConnConfig
	password *passwordCache
}

// Connect opens one connection, retrying once with a fresh password when
// the server refuses the kept one.
func (c *rotatingConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, used, err := c.attempt(ctx)
	if !isInvalidPassword(err) {
		return conn, err
	}
	c.password.forget(used)
	conn, _, err = c.attempt(ctx)
	return conn, err
}

// attempt opens one connection and says which password it gave.
func (c *rotatingConnector) attempt(ctx context.Context) (driver.Conn, string, error) {
	var used string
	setPassword := stdlib.OptionBeforeConnect(func(ctx context.Context, cc *pgx.ConnConfig) error {
		pw, err := c.password.get(ctx)
		if err != nil {
			return err
		}
		cc.Password, used = pw, pw
		return nil
	})
	conn, err := stdlib.GetConnector(c.cfg, setPassword).Connect(ctx)
	return conn, used, err
}

// Driver returns pgx's database/sql driver.
func (c *rotatingConnector) Driver() driver.Driver { return stdlib.GetDefaultDriver() }

// isInvalidPassword reports whether err is PostgreSQL refusing a password.
func isInvalidPassword(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == pgInvalidPassword
}

// passwordConnector builds the connector of a PostgreSQL DSN without a
// password whose connections take theirs from src.
func passwordConnector(source string, src PasswordSource) (driver.Connector, error) {
	cfg, err := pgx.ParseConfig(source)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnsupportedDSN, err)
	}
	if cfg.Password != "" {
		return nil, fmt.Errorf("%w: the DSN carries a password and a password source is given; drop one", ErrUnsupportedDSN)
	}
	return &rotatingConnector{cfg: *cfg, password: &passwordCache{src: src}}, nil
}
