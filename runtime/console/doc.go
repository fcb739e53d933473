// Package console is the web console the gateway serves under /console:
// server-rendered pages (html/template) for a team's usage, cost, balance,
// keys and models, and, for the platform team, nodes, models and teams.
//
// Sign-in exchanges a credential the gateway accepts (a team's API key, a
// JWT, or the admin token), posted in a form body and verified by the same
// Authenticate the API uses, for a session: a random id in an HttpOnly,
// SameSite=Strict cookie (Secure over TLS), at most 30 minutes and never
// past the credential's expiry. Redis keeps the session under the id's
// SHA-256, holding the verified principal and never the credential, so that
// every replica sees it and a sign-out ends it everywhere. A session
// exchanged for an API key ends as soon as the key is revoked, expires, is
// deleted or moves team, and never because the database did not answer.
// Sign-in and sign-out forms carry CSRF tokens (a double-submit cookie
// before sign-in, the session's token after) and are refused from another
// origin; sign-in attempts are limited per client address across replicas.
//
// Every answer carries a Content-Security-Policy without 'unsafe-inline'
// (no script at all; the stylesheet and images are our own), frame-ancestors
// 'none' and X-Frame-Options DENY, and no-store. Names are escaped by
// html/template; charts are SVG the console draws server-side (chart.go),
// colours and fonts as presentation attributes rather than inline style,
// every label escaped, shown as images. No page puts a secret in a URL: a
// range is the only query.
//
// Team pages are scoped by the session's team exactly as GET /v1/usage is:
// the team comes from the verified principal, never from the request, and
// the usage totals are the same ledger call (ledger.Usage) over the same
// range, and the days are one ledger.UsageByDay call (the same sums per
// UTC day): both read the ledger's daily rollup, not its rows, so a month
// of a million requests costs a page view a few hundred rows. Every page says
// where its numbers come from and when they were read; a failed read shows
// a designed error page, never a half-drawn table. A page's database reads,
// and its session's key check before them, each have Config.QueryTimeout
// (store.RequestBudget, the gateway's budget for the same waits): a down or
// frozen database gets a 503 page with a Retry-After within it, never a
// wait for the thaw. When Redis does not answer, no session can be
// checked: every page behind a session answers 503 with a page saying the
// session store is down (and a Retry-After), not a bounce to the sign-in
// form.
//
// The usage page opens with a headline at Config.Clock's time: this month so far
// against the same stretch of last month from its 1st, last month whole,
// the month's end projected at the current rate (the last 7 days' spend
// per day) and how long the available balance lasts at it; each figure is
// one ledger.Usage range, the very call of GET /v1/usage. Its range picker
// takes UTC dates with the last day included ([from, to+1 day) in the
// API's terms).
//
// The keys page shows each key's 429s in the last hour from the per-minute
// refusal counters the gateway writes in Redis when a key's limits refuse
// (quota.Limiter.CountRefusal); the platform models page shows the pending
// requests every replica can read (Config.Pending: the shared queue and the
// callers held while a model wakes from zero); the GPU-hours page runs the
// weekly cost report (package costreport) over the last seven days, at most
// once a minute per replica: the views within that minute share the report
// and its computed-at time, nothing invalidates it early, and the first
// view after it computes a new one.
//
// Personal keys (Config.SelfService): when the platform allows it for a
// team (teams.self_service_keys), its members create keys on the keys page
// within their own credential's models and limits and the team's longest
// key life, see each secret once on the answer page, and revoke them; a
// key made through the admin API (by Terraform) is managed and its revoke
// is refused, a key of another team is 404. Every form carries the
// session's CSRF token and is refused from another origin, as sign-out is.
// The audit page lists the team's keys created and revoked, with who did
// it, and its credit grants.
//
// The per-key usage page reads the ledger's rollup per key (UsageByKey);
// the latency and errors page the hourly latency rollup (TeamLatency) and
// the team's per-day refusal counts in Redis (quota.ReadTeamRefusals); the
// platform's SLI page both over every team for the last hour and day
// (PlatformLatency, quota.ReadPlatformRefusals). None reads ledger rows.
//
// Assets are embedded; nothing is fetched from elsewhere at run time.
package console
