package rdssecret

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
)

// ErrNoPassword means the secret holds no JSON object with a non-empty
// "password".
var ErrNoPassword = errors.New("rdssecret: the secret holds no password")

// fetchTimeout bounds one read of the secret: Secrets Manager answers in
// milliseconds, and a connection waiting on a hung read must give up well
// within the store's own 5 s connect timeout plus a retry.
const fetchTimeout = 5 * time.Second

// API is the part of the Secrets Manager client Source uses.
type API interface {
	GetSecretValue(ctx context.Context, in *secretsmanager.GetSecretValueInput, opts ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error)
}

// Source reads the current password of one RDS-managed secret.
type Source struct {
	api API
	id  string
}

// New returns the Source of the secret id (its ARN or name) read through
// api.
func New(api API, id string) *Source { return &Source{api: api, id: id} }

// Load returns the Source of the secret with the given ARN, read with the
// SDK's default credentials (EKS Pod Identity in a pod) in the ARN's
// region.
func Load(ctx context.Context, arn string) (*Source, error) {
	region, err := regionOf(arn)
	if err != nil {
		return nil, err
	}
	cfg, err := awsconfig.LoadDefaultConfig(ctx, awsconfig.WithRegion(region))
	if err != nil {
		return nil, fmt.Errorf("rdssecret: aws config: %w", err)
	}
	return New(secretsmanager.NewFromConfig(cfg), arn), nil
}

// Password returns the password the secret's current version
// (AWSCURRENT) holds.
func (s *Source) Password(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, fetchTimeout)
	defer cancel()
	out, err := s.api.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(s.id)})
	if err != nil {
		return "", fmt.Errorf("rdssecret: read %s: %w", s.id, err)
	}
	if out.SecretString == nil {
		return "", fmt.Errorf("%w: %s has no string value", ErrNoPassword, s.id)
	}
	var v struct {
		Password string `json:"password"`
	}
	if err := json.Unmarshal([]byte(*out.SecretString), &v); err != nil {
		// The error would quote the secret; say only where it is.
		return "", fmt.Errorf("%w: %s is not a JSON object", ErrNoPassword, s.id)
	}
	if v.Password == "" {
		return "", fmt.Errorf("%w: %s has no \"password\"", ErrNoPassword, s.id)
	}
	return v.Password, nil
}

// regionOf is the region of a Secrets Manager ARN
// (arn:<partition>:secretsmanager:<region>:<account>:secret:<name>).
func regionOf(arn string) (string, error) {
	parts := strings.SplitN(arn, ":", 7)
	if len(parts) != 7 || parts[0] != "arn" || parts[2] != "secretsmanager" || parts[3] == "" || parts[5] != "secret" {
		return "", fmt.Errorf("rdssecret: %q is not a Secrets Manager secret ARN", arn)
	}
	return parts[3], nil
}
