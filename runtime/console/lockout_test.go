package console_test

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/llmplat/llmplat/runtime/adminwire"
	"github.com/llmplat/llmplat/runtime/credential"
	"github.com/llmplat/llmplat/runtime/platformtest"
)

// wrongKey is a well-formed API key that no team has.
func wrongKey(t *testing.T) string {
	t.Helper()
	k, err := credential.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	return k.Secret
}

// TestSignInLockoutSparesOthers: an attacker at one address — all the
// users behind a NAT or the load balancer share it — who fails with one
// credential is refused that credential after its 10th failure, and at its
// 11th and 50th attempt a colleague at the same address still signs in
// with a correct credential; an attacker who sprays many credentials from
// there can retry none that failed, and still the colleague signs in.
func TestSignInLockoutSparesOthers(t *testing.T) {
	p := platformtest.Start(t, platformtest.Options{})
	team := p.Team("alpha", 1_000_000)
	attacker, csrf := formClient(t, p.URL)
	guess := wrongKey(t)
	signsIn := func(when string) {
		t.Helper()
		key := p.Key(adminwire.CreateKeyRequest{TeamID: team})
		client, csrf := formClient(t, p.URL)
		if got := postSignIn(t, client, p.URL, csrf, key); got != http.StatusSeeOther {
			t.Errorf("a correct credential from the attacker's address %s: %d, want 303 (signed in)", when, got)
		}
	}
	for i := 1; i <= 50; i++ {
		got := postSignIn(t, attacker, p.URL, csrf, guess)
		want := http.StatusUnauthorized
		if i > 10 {
			want = http.StatusTooManyRequests
		}
		if got != want {
			t.Fatalf("attempt %d with one wrong credential: %d, want %d", i, got, want)
		}
		if i == 11 || i == 50 {
			signsIn(fmt.Sprintf("after the attacker's attempt %d", i))
		}
	}
	// A spray: each guess a credential of its own, each failing once.
	var sprayed []string
	for i := range 40 {
		g := wrongKey(t)
		sprayed = append(sprayed, g)
		if got := postSignIn(t, attacker, p.URL, csrf, g); got != http.StatusUnauthorized {
			t.Fatalf("sprayed guess %d: %d, want 401", i+1, got)
		}
	}
	if got := postSignIn(t, attacker, p.URL, csrf, sprayed[0]); got != http.StatusTooManyRequests {
		t.Errorf("a sprayed guess tried again from the address past its failures: %d, want 429", got)
	}
	signsIn("after a spray of 40 guesses")
}

// TestSignInWindowIsFixed: a locked credential's window runs from its
// first failure and refused attempts do not extend it (they extended it:
// one attempt every 15 s kept an address locked for good); a sign-in that
// succeeds counts nothing. Windows are read as Redis TTLs and shortened
// there, instead of waiting them out.
func TestSignInWindowIsFixed(t *testing.T) {
	p := platformtest.Start(t, platformtest.Options{})
	team := p.Team("alpha", 1_000_000)
	key := p.Key(adminwire.CreateKeyRequest{TeamID: team})
	rdb := p.Redis.Client()
	ctx := context.Background()
	counters := func() map[string]int64 {
		t.Helper()
		out := map[string]int64{}
		iter := rdb.Scan(ctx, 0, p.Redis.Prefix+"console:signin:*", 100).Iterator()
		for iter.Next(ctx) {
			n, err := rdb.Get(ctx, iter.Val()).Int64()
			if err != nil && err != redis.Nil {
				t.Fatal(err)
			}
			out[iter.Val()] = n
		}
		if err := iter.Err(); err != nil {
			t.Fatal(err)
		}
		return out
	}

	good, csrf := formClient(t, p.URL)
	if got := postSignIn(t, good, p.URL, csrf, key); got != http.StatusSeeOther {
		t.Fatalf("sign-in: %d", got)
	}
	if c := counters(); len(c) != 0 {
		t.Errorf("a successful sign-in left counters %v, want none", c)
	}

	attacker, csrf := formClient(t, p.URL)
	guess := wrongKey(t)
	for range 10 {
		postSignIn(t, attacker, p.URL, csrf, guess)
	}
	c := counters()
	if len(c) != 2 {
		t.Fatalf("after 10 failures with one credential from one address: counters %v, want one per credential and one per address", c)
	}
	// Most of the window has passed: 5 s of it are left.
	const left = 5 * time.Second
	for k, n := range c {
		if n != 10 {
			t.Errorf("counter %s = %d, want 10", k, n)
		}
		if err := rdb.PExpire(ctx, k, left).Err(); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 5 {
		resp := postSignInResponse(t, attacker, p.URL, csrf, guess)
		retry, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
		if resp.StatusCode != http.StatusTooManyRequests || retry < 1 || retry > int(left/time.Second) {
			t.Errorf("refused attempt %d: %d with Retry-After %q, want 429 with at most the %v left", i+1, resp.StatusCode,
				resp.Header.Get("Retry-After"), left)
		}
	}
	for k, n := range counters() {
		ttl, err := rdb.PTTL(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		if n != 10 || ttl <= 0 || ttl > left {
			t.Errorf("after 5 refused attempts counter %s = %d with %v left, want 10 with at most %v: a refused attempt counts nothing and extends nothing",
				k, n, ttl, left)
		}
	}
}

// postSignInResponse posts the sign-in form and returns the answer.
func postSignInResponse(t *testing.T, client *http.Client, base, csrf, cred string) *http.Response {
	t.Helper()
	resp, err := client.PostForm(base+"/console/signin", map[string][]string{"csrf": {csrf}, "credential": {cred}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}
