package store

import (
	"errors"
	"io/fs"
	"testing"
	"testing/fstest"
)

func TestLoadMigrations(t *testing.T) {
	file := func(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s)} }
	tests := []struct {
		name     string
		files    fstest.MapFS
		versions []int64
		wantErr  bool
	}{
		{name: "in order", files: fstest.MapFS{"m/0002_b.sql": file("B"), "m/0001_a.sql": file("A")}, versions: []int64{1, 2}},
		{name: "five digits", files: fstest.MapFS{"m/00001_a.sql": file("A")}, versions: []int64{1}},
		{name: "gap", files: fstest.MapFS{"m/0001_a.sql": file("A"), "m/0003_c.sql": file("C")}, versions: []int64{1, 3}},
		{name: "duplicate", files: fstest.MapFS{"m/0001_a.sql": file("A"), "m/0001_b.sql": file("B")}, wantErr: true},
		{name: "starts at two", files: fstest.MapFS{"m/0002_a.sql": file("A")}, wantErr: true},
		{name: "no underscore", files: fstest.MapFS{"m/0001.sql": file("A")}, wantErr: true},
		{name: "short number", files: fstest.MapFS{"m/1_a.sql": file("A")}, wantErr: true},
		{name: "not sql", files: fstest.MapFS{"m/0001_a.txt": file("A")}, wantErr: true},
		{name: "empty", files: fstest.MapFS{"m": &fstest.MapFile{Mode: fs.ModeDir}}, wantErr: true},
		{name: "missing", files: fstest.MapFS{}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			migs, err := loadMigrations(tt.files, "m")
			if tt.wantErr {
				if !errors.Is(err, ErrBadMigrations) {
					t.Fatalf("error = %v, want ErrBadMigrations", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("loadMigrations: %v", err)
			}
			var got []int64
			for _, m := range migs {
				got = append(got, m.version)
			}
			if len(got) != len(tt.versions) {
				t.Fatalf("versions = %v, want %v", got, tt.versions)
			}
			for i := range got {
				if got[i] != tt.versions[i] {
					t.Fatalf("versions = %v, want %v", got, tt.versions)
				}
			}
		})
	}
}

func TestEmbeddedMigrationsMatchAcrossDialects(t *testing.T) {
	pg := embeddedMigrations(t, Postgres)
	lite := embeddedMigrations(t, SQLite)
	if len(pg) != len(lite) {
		t.Fatalf("postgres has %d migrations, sqlite %d", len(pg), len(lite))
	}
	for i := range pg {
		if pg[i].name != lite[i].name {
			t.Errorf("migration %d: postgres %s, sqlite %s", i+1, pg[i].name, lite[i].name)
		}
	}
}
