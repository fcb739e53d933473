package rdssecret

// AWS is not reachable from the tests: the Secrets Manager client (the
// SDK's own, signing and encoding as in production) talks to an httptest
// server that speaks GetSecretValue's JSON protocol (awsJson1.1), through
// the client's BaseEndpoint.

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
)

const secretARN = "arn:aws:secretsmanager:eu-central-1:123456789012:secret:rds!cluster-0123-AbCdEf"

// fakeSecrets answers GetSecretValue for secretARN with its current value.
type fakeSecrets struct {
	mu     sync.Mutex
	value  string // the SecretString; empty: ResourceNotFoundException
	status int    // when non-zero, every answer is this status
	asked  []string
}

func (f *fakeSecrets) set(v string) { f.mu.Lock(); f.value = v; f.mu.Unlock() }

func (f *fakeSecrets) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r.Method != http.MethodPost || r.Header.Get("X-Amz-Target") != "secretsmanager.GetSecretValue" ||
		!strings.Contains(r.Header.Get("Authorization"), "/secretsmanager/aws4_request") {
		http.Error(w, "unexpected request", http.StatusBadRequest)
		return
	}
	var in struct{ SecretId, VersionStage string }
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	f.asked = append(f.asked, in.SecretId+"@"+in.VersionStage)
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	if f.status != 0 {
		w.WriteHeader(f.status)
		_, _ = w.Write([]byte(`{"__type":"InternalServiceError","message":"down"}`))
		return
	}
	if in.SecretId != secretARN || f.value == "" {
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"__type":"ResourceNotFoundException","message":"Secrets Manager can't find the specified secret."}`))
		return
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"ARN": secretARN, "Name": "rds!cluster-0123",
		"SecretString": f.value, "VersionId": "v1", "VersionStages": []string{"AWSCURRENT"}, "CreatedDate": 1.7e9})
}

// client is the SDK's Secrets Manager client pointed at f.
func client(t *testing.T, f *fakeSecrets) *secretsmanager.Client {
	t.Helper()
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return secretsmanager.New(secretsmanager.Options{
		Region:           "eu-central-1",
		BaseEndpoint:     aws.String(srv.URL),
		Credentials:      credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", ""),
		RetryMaxAttempts: 1,
	})
}

func TestPasswordFollowsRotation(t *testing.T) {
	f := &fakeSecrets{value: `{"username":"llmplat","password":"first"}`}
	src := New(client(t, f), secretARN)
	for _, want := range []string{"first", "second"} {
		f.set(`{"username":"llmplat","password":"` + want + `"}`)
		got, err := src.Password(context.Background())
		if err != nil {
			t.Fatalf("Password: %v", err)
		}
		if got != want {
			t.Errorf("Password = %q, want %q", got, want)
		}
	}
	if got, want := strings.Join(f.asked, ","), secretARN+"@,"+secretARN+"@"; got != want {
		t.Errorf("requests named %q, want %q (the ARN, the current version)", got, want)
	}
}

func TestPasswordRefusals(t *testing.T) {
	tests := []struct {
		name   string
		value  string
		status int
		id     string
		want   error
	}{
		{name: "not JSON", value: "hunter2", id: secretARN, want: ErrNoPassword},
		{name: "no password", value: `{"username":"llmplat"}`, id: secretARN, want: ErrNoPassword},
		{name: "empty password", value: `{"username":"llmplat","password":""}`, id: secretARN, want: ErrNoPassword},
		{name: "unknown secret", value: `{"password":"p"}`, id: secretARN + "x"},
		{name: "service error", value: `{"password":"p"}`, status: http.StatusInternalServerError, id: secretARN},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeSecrets{value: tt.value, status: tt.status}
			got, err := New(client(t, f), tt.id).Password(context.Background())
			if err == nil {
				t.Fatalf("Password = %q, want an error", got)
			}
			if tt.want != nil && !errors.Is(err, tt.want) {
				t.Errorf("Password: %v, want %v", err, tt.want)
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("the error quotes the secret: %v", err)
			}
		})
	}
}

func TestRegionOf(t *testing.T) {
	tests := []struct {
		arn, want string
	}{
		{arn: secretARN, want: "eu-central-1"},
		{arn: "arn:aws-us-gov:secretsmanager:us-gov-west-1:123456789012:secret:x", want: "us-gov-west-1"},
		{arn: "arn:aws:s3:::bucket"},
		{arn: "rds!cluster-0123"},
		{arn: "arn:aws:secretsmanager::123456789012:secret:x"},
	}
	for _, tt := range tests {
		t.Run(tt.arn, func(t *testing.T) {
			got, err := regionOf(tt.arn)
			if tt.want == "" {
				if err == nil {
					t.Errorf("regionOf = %q, want an error", got)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("regionOf = %q, %v, want %q", got, err, tt.want)
			}
		})
	}
}
