package sqlstore_test

import (
	"database/sql"
	"testing"
)

// sqliteQuery runs q on a connection of its own to the file at path.
func sqliteQuery(t *testing.T, path, q string, args ...any) [][]string {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(q, args...)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		t.Fatal(err)
	}
	var out [][]string
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		out = append(out, strs(vals))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
