package store

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
)

// schemaQueries describe a migrated database as sorted lines, so both
// dialects can be compared with each other and with a golden file:
//
//	column <table>.<column> <int|text|bytes|bool|time> <null|notnull>
//	unique <table>(<columns>)
//	index  <table>.<name>(<columns>)
var schemaQueries = map[Dialect][]string{
	Postgres: {
		`SELECT 'column ' || table_name || '.' || column_name || ' ' ||
			CASE WHEN data_type IN ('bigint', 'integer', 'numeric') THEN 'int' -- numeric: sums that cannot overflow
			     WHEN data_type IN ('text', 'jsonb', 'USER-DEFINED') THEN 'text'
			     WHEN data_type = 'bytea' THEN 'bytes'
			     WHEN data_type = 'boolean' THEN 'bool'
			     WHEN data_type = 'timestamp with time zone' THEN 'time'
			     ELSE 'other:' || data_type END || ' ' ||
			CASE WHEN is_nullable = 'YES' THEN 'null' ELSE 'notnull' END
		FROM information_schema.columns WHERE table_schema = current_schema()`,
		`SELECT CASE WHEN i.indisunique THEN 'unique ' || t.relname
		             ELSE 'index ' || t.relname || '.' || ic.relname END ||
			'(' || string_agg(a.attname, ',' ORDER BY k.ord) || ')'
		FROM pg_index i
		JOIN pg_class t ON t.oid = i.indrelid
		JOIN pg_class ic ON ic.oid = i.indexrelid
		JOIN pg_namespace n ON n.oid = t.relnamespace
		CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, ord)
		JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = k.attnum
		WHERE n.nspname = current_schema()
		GROUP BY t.relname, ic.relname, i.indisunique`,
	},
	SQLite: {
		`SELECT 'column ' || m.name || '.' || p.name || ' ' ||
			CASE WHEN upper(p.type) IN ('INTEGER', 'BIGINT', 'INT') THEN 'int'
			     WHEN upper(p.type) = 'TEXT' THEN 'text'
			     WHEN upper(p.type) = 'BLOB' THEN 'bytes'
			     WHEN upper(p.type) = 'BOOLEAN' THEN 'bool'
			     WHEN upper(p.type) = 'TIMESTAMP' THEN 'time'
			     ELSE 'other:' || p.type END || ' ' ||
			CASE WHEN p."notnull" OR (p.pk AND upper(p.type) = 'INTEGER') THEN 'notnull' ELSE 'null' END
		FROM sqlite_schema m JOIN pragma_table_info(m.name) p
		WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite_%'`,
		`SELECT 'unique ' || m.name || '(' ||
			(SELECT group_concat(name, ',') FROM (SELECT name FROM pragma_table_info(m.name) WHERE pk > 0 ORDER BY pk)) || ')'
		FROM sqlite_schema m
		WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite_%'
			AND EXISTS (SELECT 1 FROM pragma_table_info(m.name) WHERE pk > 0)`,
		`SELECT CASE WHEN l."unique" THEN 'unique ' || m.name ELSE 'index ' || m.name || '.' || l.name END ||
			'(' || (SELECT group_concat(name, ',') FROM (SELECT name FROM pragma_index_info(l.name) ORDER BY seqno)) || ')'
		FROM sqlite_schema m JOIN pragma_index_list(m.name) l
		WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite_%' AND l.origin <> 'pk'`,
	},
}

// describeSchema returns the sorted schema lines of db.
func describeSchema(t *testing.T, db *DB) []string {
	t.Helper()
	var lines []string
	for _, q := range schemaQueries[db.Dialect()] {
		rows, err := db.QueryContext(context.Background(), q)
		if err != nil {
			t.Fatalf("describe schema: %v\n%s", err, q)
		}
		for rows.Next() {
			var s string
			if err := rows.Scan(&s); err != nil {
				t.Fatalf("scan schema line: %v", err)
			}
			lines = append(lines, s)
		}
		if err := rows.Close(); err != nil {
			t.Fatalf("read schema: %v", err)
		}
	}
	sort.Strings(lines)
	return lines
}

// diffLines returns the lines only in got (+) and only in want (-).
func diffLines(got, want []string) string {
	in := func(list []string) map[string]bool {
		m := map[string]bool{}
		for _, s := range list {
			m[s] = true
		}
		return m
	}
	g, w := in(got), in(want)
	var b strings.Builder
	for _, s := range got {
		if !w[s] {
			fmt.Fprintf(&b, "+ %s\n", s)
		}
	}
	for _, s := range want {
		if !g[s] {
			fmt.Fprintf(&b, "- %s\n", s)
		}
	}
	return b.String()
}
