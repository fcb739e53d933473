package devmode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/llmplat/llmplat/runtime/admin"
	"github.com/llmplat/llmplat/runtime/adminwire"
	"github.com/llmplat/llmplat/runtime/auth"
	"github.com/llmplat/llmplat/runtime/credential"
)

// secretsFile, in the data dir, keeps the secrets the local mode minted
// (the store holds only their hashes), so that a restart on the same data
// dir prints the same credentials and its node agents reconnect.
const secretsFile = "local-secrets.json"

// secrets are the local mode's minted secrets. Each is written to the data
// dir before the store learns its hash, so none is ever issued and lost.
type secrets struct {
	AdminToken string `json:"admin_token,omitempty"`
	APIKey     string `json:"api_key,omitempty"`
	// NodeTokens are the local node agents' tokens, by node id.
	NodeTokens map[string]string `json:"node_tokens,omitempty"`

	dir string
}

// loadSecrets reads the data dir's secrets, none on a first start, and
// mints the admin token if there is none yet.
func loadSecrets(dir string) (*secrets, error) {
	s := &secrets{dir: dir}
	b, err := os.ReadFile(filepath.Join(dir, secretsFile))
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("local secrets: %w", err)
	default:
		if err := json.Unmarshal(b, s); err != nil {
			return nil, fmt.Errorf("local secrets %s: %w", secretsFile, err)
		}
	}
	if s.NodeTokens == nil {
		s.NodeTokens = map[string]string{}
	}
	if s.AdminToken == "" {
		if s.AdminToken, err = auth.GenerateAdminToken(); err != nil {
			return nil, err
		}
		if err := s.save(); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// save writes the secrets readable by their owner only, through a rename,
// so that a crash leaves the old file or the new one.
func (s *secrets) save() error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("local secrets: %w", err)
	}
	tmp := filepath.Join(s.dir, secretsFile+".tmp")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("local secrets: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(s.dir, secretsFile)); err != nil {
		return fmt.Errorf("local secrets: %w", err)
	}
	return nil
}

// nodeToken returns the kept token of the local node nodeID while the
// store still accepts it (a restart), or mints a new one, keeps it and
// issues it (a first start, or a token revoked through the admin API).
func (s *secrets) nodeToken(ctx context.Context, tokens *admin.SQLNodeTokens, nodeID string, now time.Time) (string, error) {
	if tok := s.NodeTokens[nodeID]; tok != "" {
		err := tokens.Verify(ctx, nodeID, tok)
		if err == nil {
			return tok, nil
		}
		if !errors.Is(err, admin.ErrInvalidNodeToken) {
			return "", err
		}
	}
	tok, _, err := credential.GenerateNodeToken()
	if err != nil {
		return "", err
	}
	s.NodeTokens[nodeID] = tok
	if err := s.save(); err != nil {
		return "", err
	}
	if _, err := tokens.IssueMinted(ctx, nodeID, tok, "", now); err != nil {
		return "", fmt.Errorf("node %s: %w", nodeID, err)
	}
	return tok, nil
}

// apiKey returns the kept API key while the store still admits it (a
// restart), or mints a new one for teamID, keeps it and creates it.
func (s *secrets) apiKey(ctx context.Context, adm *admin.SQLStore, teamID int64, now time.Time) (string, error) {
	if s.APIKey != "" {
		rec, err := adm.LookupKey(ctx, credential.HashKey(s.APIKey))
		switch {
		case err == nil && rec.TeamID == teamID && rec.RevokedAt.IsZero() && (rec.ExpiresAt.IsZero() || rec.ExpiresAt.After(now)):
			return s.APIKey, nil
		case err != nil && !errors.Is(err, auth.ErrKeyNotFound):
			return "", fmt.Errorf("look up the local key: %w", err)
		}
	}
	k, err := credential.GenerateKey()
	if err != nil {
		return "", err
	}
	s.APIKey = k.Secret
	if err := s.save(); err != nil {
		return "", err
	}
	if _, err := adm.CreateKey(ctx, adminwire.CreateKeyRequest{TeamID: teamID, Name: "dev", RPM: 600, TokensPerDay: 10_000_000,
		MaxStreams: 64, Key: s.APIKey}, "", now); err != nil {
		return "", fmt.Errorf("create key: %w", err)
	}
	return s.APIKey, nil
}
