package sqlstore_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/logplayer/logplayer/target/sqlstore"
)

func TestModeAndBadMessageNamed(t *testing.T) {
	if sqlstore.ModeNamed("upsert") != sqlstore.Upsert || sqlstore.ModeNamed("append") != sqlstore.Append {
		t.Error("ModeNamed")
	}
	if sqlstore.BadMessageNamed("dead-letter") != sqlstore.DeadLetter || sqlstore.BadMessageNamed("refuse") != sqlstore.Refuse {
		t.Error("BadMessageNamed")
	}
}

// TestOpenMappedState opens a new SQLite sink with its State (empty), and
// refuses an invalid mapping with ErrInvalidConfig.
func TestOpenMappedState(t *testing.T) {
	ctx := context.Background()
	cfg := sqlstore.Config{TargetID: "sink", Dialect: sqlstore.SQLite, Path: filepath.Join(t.TempDir(), "sink.db")}
	s, st, err := sqlstore.OpenMappedState(ctx, sqlstore.MappingConfig{TargetID: "sink", Topics: []string{"orders"}}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if st.AppliedLSN != 0 || st.Epoch != 0 {
		t.Errorf("state of a new sink %+v", st)
	}
	if _, _, err := sqlstore.OpenMappedState(ctx, sqlstore.MappingConfig{TargetID: "sink"}, cfg); !errors.Is(err, sqlstore.ErrInvalidConfig) {
		t.Errorf("a mapping without topics: %v, want ErrInvalidConfig", err)
	}
}
